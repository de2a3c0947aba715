package deferral

import (
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/telemetry"
)

func TestGate(t *testing.T) {
	start := telemetry.Now()
	outcome := func(g *Gate, at int64, ok bool) {
		kind := telemetry.HandlerFailed
		if ok {
			kind = telemetry.HandlerSucceeded
		}
		g.Observe(telemetry.Event{Kind: kind, At: at})
	}
	tests := []struct {
		name                string
		successes, failures int
		threshold           float64
		want                bool
	}{
		{"nothing observed", 0, 0, 0.9, true},
		{"below the minimum sample, all failed", 0, MinSample - 1, 0.9, true},
		{"minimum sample, all failed", 0, MinSample, 0.9, false},
		{"rate just below the threshold", 2, 18, 0.95, true},
		{"rate at the threshold is refused", 1, 9, 0.9, false},
		{"mostly successes", 90, 10, 0.5, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewGate(tt.threshold, time.Minute)
			for i := 0; i < tt.successes; i++ {
				outcome(g, start, true)
			}
			for i := 0; i < tt.failures; i++ {
				outcome(g, start, false)
			}
			g.Observe(telemetry.Event{Kind: telemetry.HandlerInvoked, At: start}) // not an outcome
			if got := g.AllowsAt(start); got != tt.want {
				rate, n := g.Rate(start)
				t.Fatalf("Allows = %v, want %v (rate %.2f of %d)", got, tt.want, rate, n)
			}
		})
	}
}

func TestGateForgetsOutcomesOlderThanTheWindow(t *testing.T) {
	start := telemetry.Now()
	g := NewGate(0.5, time.Minute)
	for i := 0; i < 20; i++ {
		g.Observe(telemetry.Event{Kind: telemetry.HandlerFailed, At: start})
	}
	if g.AllowsAt(start) {
		t.Fatal("an outage within the window should gate deferral off")
	}
	if g.AllowsAt(start + int64(30*time.Second)) {
		t.Fatal("outcomes 30 s old are still in a one-minute window")
	}
	later := start + int64(time.Minute+time.Minute/gateBuckets)
	if _, n := g.Rate(later); n != 0 {
		t.Fatalf("a window later %d outcomes remain", n)
	}
	if !g.AllowsAt(later) {
		t.Fatal("deferral should be allowed again once the failures left the window")
	}
	// Successes coming back lower the rate.
	for i := 0; i < 20; i++ {
		g.Observe(telemetry.Event{Kind: telemetry.HandlerFailed, At: later})
	}
	for i := 0; i < 21; i++ {
		g.Observe(telemetry.Event{Kind: telemetry.HandlerSucceeded, At: later})
	}
	if !g.AllowsAt(later) {
		t.Fatal("20 failures of 41 is below a 0.5 threshold")
	}
	// An event from before the window does not wipe the current bucket.
	g.Observe(telemetry.Event{Kind: telemetry.HandlerFailed, At: later - int64(2*time.Minute)})
	if _, n := g.Rate(later); n != 41 {
		t.Fatalf("a stale event changed the window: %d outcomes", n)
	}
}
