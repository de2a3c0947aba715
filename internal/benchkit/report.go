package benchkit

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// Report is a benchmark program's machine-readable result (its -json
// file): every reader's value of each metric in every round, their
// medians, and each median as a ratio of the baseline reader's. scripts/bench
// gathers these into docs/bench/results.json, so the figures on the
// results page are the ones the programs measured, not parsed from text.
type Report struct {
	Benchmark string          `json:"benchmark"`
	Unit      string          `json:"unit,omitempty"`     // of the metric "rate", when there is one
	Baseline  string          `json:"baseline,omitempty"` // the reader the ratios divide by
	Params    map[string]any  `json:"params"`
	Readers   []*ReaderResult `json:"readers"`
}

// ReaderResult is one reader's figures. Metrics keep the rounds in the
// order they ran; Ratios hold, for each metric the baseline reader also
// has, this reader's median over the baseline's.
type ReaderResult struct {
	Name    string             `json:"name"`
	Metrics map[string]*Metric `json:"metrics"`
	Ratios  map[string]float64 `json:"ratios,omitempty"`
}

// Metric is one measure of a reader: a value per round and their median
// (the upper one for an even count, as Median).
type Metric struct {
	Rounds []float64 `json:"rounds"`
	Median float64   `json:"median"`
}

// NewReport starts the report of benchmark; baseline may be empty.
func NewReport(benchmark, unit, baseline string, params map[string]any) *Report {
	if params == nil {
		params = map[string]any{}
	}
	return &Report{Benchmark: benchmark, Unit: unit, Baseline: baseline, Params: params}
}

// Reader is the named reader's result, added in first-seen order so the
// file lists readers as the command line named them.
func (r *Report) Reader(name string) *ReaderResult {
	for _, rr := range r.Readers {
		if rr.Name == name {
			return rr
		}
	}
	rr := &ReaderResult{Name: name, Metrics: map[string]*Metric{}}
	r.Readers = append(r.Readers, rr)
	return rr
}

// Add records one round's value of metric for reader.
func (r *Report) Add(reader, metric string, v float64) {
	rr := r.Reader(reader)
	m := rr.Metrics[metric]
	if m == nil {
		m = &Metric{}
		rr.Metrics[metric] = m
	}
	m.Rounds = append(m.Rounds, v)
}

// finish computes the medians and the ratios to the baseline.
func (r *Report) finish() {
	for _, rr := range r.Readers {
		for _, m := range rr.Metrics {
			m.Median = Median(m.Rounds)
		}
	}
	var base *ReaderResult
	for _, rr := range r.Readers {
		if rr.Name == r.Baseline {
			base = rr
		}
	}
	if base == nil {
		return
	}
	for _, rr := range r.Readers {
		for name, m := range rr.Metrics {
			b, ok := base.Metrics[name]
			if !ok || b.Median == 0 || math.IsNaN(m.Median) {
				continue
			}
			if rr.Ratios == nil {
				rr.Ratios = map[string]float64{}
			}
			rr.Ratios[name] = m.Median / b.Median
		}
	}
}

// Write finishes the report and writes it to path as indented JSON; an
// empty path writes nothing, so programs call it unconditionally.
func (r *Report) Write(path string) error {
	if path == "" {
		return nil
	}
	r.finish()
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}
