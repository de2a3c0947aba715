package timers

import (
	"context"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/timerstore"
)

func TestApplicationRoundsToWholeSeconds(t *testing.T) {
	h := newHarness(t, timerstore.NewMemory(), 0, 64)
	app := Application{h.m}
	ctx := context.Background()
	base := time.Now().Add(time.Hour).Truncate(time.Second)
	tests := []struct {
		name string
		at   time.Time
		want time.Time
	}{
		{"whole second unchanged", base, base},
		{"below half rounds down", base.Add(2*time.Second + 499*time.Millisecond), base.Add(2 * time.Second)},
		{"half rounds up", base.Add(4*time.Second + 500*time.Millisecond), base.Add(5 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := app.ClearAndSchedule(ctx, "k", tt.at, nil); err != nil {
				t.Fatal(err)
			}
			got, err := app.Scheduled(ctx, "k")
			if err != nil || len(got) != 1 || !got[0].Equal(tt.want) {
				t.Fatalf("scheduled = %v %v, want [%v]", got, err, tt.want)
			}
			// Unscheduling by the unrounded time finds the rounded timer.
			if err := app.Unschedule(ctx, "k", tt.at); err != nil {
				t.Fatal(err)
			}
			if got, _ := app.Scheduled(ctx, "k"); len(got) != 0 {
				t.Fatalf("still scheduled after unschedule: %v", got)
			}
		})
	}
	if err := app.Schedule(ctx, "k", base, nil); err != nil {
		t.Fatal(err)
	}
	if err := app.ClearScheduled(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if got, _ := app.Scheduled(ctx, "k"); len(got) != 0 {
		t.Fatalf("clear left %v", got)
	}
}

// A timer keeps the trace context it was scheduled with, through the store
// and a reload, and fires with it.
func TestApplicationTimerKeepsItsTraceContext(t *testing.T) {
	span := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "", "baggage": "user=1"}
	for _, op := range []string{"schedule", "clear_and_schedule"} {
		t.Run(op, func(t *testing.T) {
			h := newHarness(t, timerstore.NewMemory(), 0, 64)
			app := Application{h.m}
			when := time.Now().Add(-time.Hour)
			var err error
			if op == "schedule" {
				err = app.Schedule(context.Background(), "k", when, span)
			} else {
				err = app.ClearAndSchedule(context.Background(), "k", when, span)
			}
			if err != nil {
				t.Fatal(err)
			}
			tr := h.expectFire(2 * time.Second)
			if len(tr.Span) != len(span) {
				t.Fatalf("fired with span %v, want %v", tr.Span, span)
			}
			for k, v := range span {
				if tr.Span[k] != v {
					t.Fatalf("fired with span %v, want %v", tr.Span, span)
				}
			}
		})
	}
}
