package main

import (
	"sort"
	"time"

	"github.com/prosody-events/prosody-go/internal/chaos/check"
)

// summary is the figures of a run, as docs/reliability.md reports them.
type summary struct {
	Seconds         float64            `json:"seconds"`
	Scenarios       int                `json:"scenarios"`
	Events          int                `json:"events"`
	Handled         int                `json:"handled"`
	Timers          int                `json:"timers"`
	FailedAttempts  int                `json:"failed_attempts"`
	Faults          map[string]int     `json:"faults"`
	Duplicates      map[string]int     `json:"duplicates_by_fault_kind"`
	TopicDuplicates int                `json:"topic_duplicates"`
	Violations      map[string]int     `json:"violations"`
	RecoveryP50     map[string]float64 `json:"recovery_p50_s"`
	RecoveryP99     map[string]float64 `json:"recovery_p99_s"`
	AllP50          float64            `json:"recovery_p50_all_s"`
	AllP99          float64            `json:"recovery_p99_all_s"`
}

func summarize(rs []*check.Report, took time.Duration) summary {
	s := summary{Seconds: took.Seconds(), Scenarios: len(rs), Faults: map[string]int{}, Duplicates: map[string]int{},
		Violations: map[string]int{}, RecoveryP50: map[string]float64{}, RecoveryP99: map[string]float64{}}
	rec := map[string][]float64{}
	var all []float64
	for _, r := range rs {
		s.Events += r.Events
		s.Handled += r.Handled
		s.Timers += r.Timers
		s.FailedAttempts += r.Failed
		s.TopicDuplicates += r.TopicDuplicates
		s.Duplicates[r.Meta.Kind] += r.Duplicates
		for k, n := range r.Faults {
			s.Faults[k] += n
		}
		for k, n := range r.Counts {
			s.Violations[k] += n
		}
		rec[r.Meta.Kind] = append(rec[r.Meta.Kind], r.Recoveries...)
		all = append(all, r.Recoveries...)
	}
	for k, xs := range rec {
		if len(xs) > 0 {
			s.RecoveryP50[k], s.RecoveryP99[k] = quantile(xs, 0.5), quantile(xs, 0.99)
		}
	}
	if len(all) > 0 {
		s.AllP50, s.AllP99 = quantile(all, 0.5), quantile(all, 0.99)
	}
	return s
}

// quantile is the nearest-rank quantile.
func quantile(xs []float64, q float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}
