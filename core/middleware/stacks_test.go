package middleware

import (
	"reflect"
	"strings"
	"testing"

	"github.com/prosody-events/prosody-go/core/config"
)

// The stacks of each mode, outermost first (core-behavior.md §4.1).
func TestModeStacks(t *testing.T) {
	tests := []struct {
		mode        config.Mode
		events      string
		undecodable string
	}{
		{config.ModePipeline, "Retry Cancellation Limiter Timeouts", ""},
		{config.ModeLowLatency, "Retry DeadLetter Retry Cancellation Limiter Timeouts", "Retry DeadLetter"},
		{config.ModeBestEffort, "Log Cancellation Limiter Timeouts", ""},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			cfg := config.Default()
			cfg.Mode, cfg.FailureTopic, cfg.GroupID, cfg.MaxRetries = tt.mode, "failures", "g", 2
			timeouts := NewTimeouts(0)
			defer timeouts.Stop()
			stacks := ModeStacks(&cfg, handlerFunc(nil), Services{Limiter: NewLimiter(1), Timeouts: timeouts, DeadLetters: &fakeSink{}})
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
