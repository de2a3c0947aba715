package middleware

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/dedup"
	"github.com/prosody-events/prosody-go/core/dedupstore"
	"github.com/prosody-events/prosody-go/core/scheduler"
	"github.com/prosody-events/prosody-go/core/telemetry"
)

// The stacks of each mode, outermost first (core-behavior.md §4.1).
func TestModeStacks(t *testing.T) {
	tests := []struct {
		name           string
		mode           config.Mode
		noBroadcast    bool
		monopolization bool
		// dedup gives the stacks a deduplicator, with this
		// idempotence_cache_size (-1: none).
		dedup       int
		events      string
		undecodable string
	}{
		{"pipeline", config.ModePipeline, false, true, 8192, "Retry Deduplication MessageDefer TimerDefer Monopolization Cancellation Scheduler Timeouts Telemetry", ""},
		{"pipeline with idempotence_cache_size 0", config.ModePipeline, false, true, 0, "Retry MessageDefer TimerDefer Monopolization Cancellation Scheduler Timeouts Telemetry", ""},
		{"pipeline without monopolization", config.ModePipeline, false, false, -1, "Retry MessageDefer TimerDefer Cancellation Scheduler Timeouts Telemetry", ""},
		{"pipeline without telemetry", config.ModePipeline, true, true, -1, "Retry MessageDefer TimerDefer Cancellation Scheduler Timeouts", ""},
		{"low-latency", config.ModeLowLatency, false, true, 8192, "Retry DeadLetter Retry Cancellation Scheduler Timeouts Telemetry", "Retry DeadLetter"},
		{"best-effort", config.ModeBestEffort, false, true, 8192, "Log Cancellation Scheduler Timeouts Telemetry", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Mode, cfg.FailureTopic, cfg.GroupID, cfg.MaxRetries = tt.mode, "failures", "g", 2
			cfg.MonopolizationEnabled = tt.monopolization
			timeouts := NewTimeouts(0)
			defer timeouts.Stop()
			svc := Services{Scheduler: NewFIFOScheduler(1), Timeouts: timeouts, DeadLetters: &fakeSink{}}
			if !tt.noBroadcast {
				svc.Broadcast = new(telemetry.Broadcast)
			}
			if tt.dedup >= 0 {
				cfg.IdempotenceCacheSize = tt.dedup
				svc.Dedup = dedup.New(dedup.Options{Group: "g", CacheSize: 16, Store: dedupstore.NewMemory(time.Hour)})
			}
			stacks := ModeStacks(&cfg, handlerFunc(nil), svc)
			if got := layerNames(stacks.Events); got != tt.events {
				t.Fatalf("events: %s, want %s", got, tt.events)
			}
			if got := layerNames(stacks.Undecodable); got != tt.undecodable {
				t.Fatalf("undecodable: %q, want %q", got, tt.undecodable)
			}
			if tt.mode == config.ModeLowLatency {
				limited := stacks.Events.layers[2].(*Retry)
				if limited.p.MaxRetries != 2 || stacks.Events.layers[0].(*Retry).p.MaxRetries != Unlimited {
					t.Fatal("low-latency mode: the outer retry is unlimited, the inner one max_retries")
				}
				if stacks.Events.layers[1] != stacks.Undecodable.layers[1] {
					t.Fatal("undecodable records and messages share one dead-letter layer")
				}
			}
		})
	}
}

func layerNames(s *Stack) string {
	if s == nil {
		return ""
	}
	var names []string
	for _, l := range s.layers {
		names = append(names, reflect.Indirect(reflect.ValueOf(l)).Type().Name())
	}
	return strings.Join(names, " ")
}

// The client's scheduler is the fair one the scheduler_* options
// describe: max_concurrency permits, and failure_weight deciding which
// class goes first when both wait (weight 0 gives a class nothing while
// the other waits). Reservations stand in for attempts.
func TestSchedulerOfReadsTheOptions(t *testing.T) {
	tests := []struct {
		weight float64
		first  Demand
	}{{0, Normal}, {1, Failure}}
	for _, tt := range tests {
		cfg := config.Default()
		cfg.MaxConcurrency = 1
		cfg.SchedulerFailureWeight = tt.weight
		s := SchedulerOf(&cfg, nil)
		if s.Policy().Size() != 1 {
			t.Fatalf("%d permits, want max_concurrency 1", s.Policy().Size())
		}
		never := func() bool { return false }
		if !s.Reserve(1, Normal, never, nil) {
			t.Fatal("the free permit was not taken at once")
		}
		var order []Demand
		for i, d := range []Demand{Failure, Normal} {
			if s.Reserve(scheduler.Key(i+2), d, never, func(bool) { order = append(order, d) }) {
				t.Fatal("a permit was granted while none was free")
			}
		}
		s.EndLease()
		if len(order) != 1 || order[0] != tt.first {
			t.Fatalf("failure weight %v: granted %v first, want %v", tt.weight, order, tt.first)
		}
		s.EndLease()
		s.EndLease()
		if s.InUse() != 0 || s.Waiting() != 0 {
			t.Fatalf("in use %d, waiting %d at the end", s.InUse(), s.Waiting())
		}
	}
}
