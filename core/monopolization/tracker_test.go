package monopolization

import (
	"math"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/telemetry"
)

var t0 = time.Unix(1_700_000_000, 0)

func call(tr *Tracker, key string, start, end time.Duration) {
	tr.Observe(telemetry.Event{Kind: telemetry.HandlerInvoked, At: t0.Add(start), Topic: "t", Key: key})
	tr.Observe(telemetry.Event{Kind: telemetry.HandlerSucceeded, At: t0.Add(end), Topic: "t", Key: key})
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestTrackerShare(t *testing.T) {
	window := 16 * time.Second // one second per part
	tests := []struct {
		name  string
		calls [][2]time.Duration
		open  time.Duration // a call under way since, or -1
		at    time.Duration
		want  float64
	}{
		{"idle key", nil, -1, 10 * time.Second, 0},
		{"one call of a quarter window", [][2]time.Duration{{0, 4 * time.Second}}, -1, 10 * time.Second, 0.25},
		{"calls add up", [][2]time.Duration{{0, 2 * time.Second}, {3 * time.Second, 5 * time.Second}}, -1, 10 * time.Second, 0.25},
		{"the call under way counts", [][2]time.Duration{{0, 4 * time.Second}}, 6 * time.Second, 10 * time.Second, 0.5},
		{"a call longer than the window counts once", nil, 0, 40 * time.Second, 1},
		{"old calls leave the window", [][2]time.Duration{{0, 8 * time.Second}}, -1, 30 * time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker(window, 10)
			for _, c := range tt.calls {
				call(tr, "k", c[0], c[1])
			}
			if tt.open >= 0 {
				tr.Observe(telemetry.Event{Kind: telemetry.HandlerInvoked, At: t0.Add(tt.open), Topic: "t", Key: "k"})
			}
			if got := tr.Share(TPK{"t", 0, "k"}, t0.Add(tt.at)); !near(got, tt.want) {
				t.Fatalf("Share = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTrackerKeysApart(t *testing.T) {
	tr := NewTracker(16*time.Second, 10)
	call(tr, "hot", 0, 15*time.Second)
	call(tr, "cold", 0, time.Second)
	if s := tr.Share(TPK{"t", 0, "hot"}, t0.Add(15*time.Second)); s < 0.9 {
		t.Fatalf("hot key share %v", s)
	}
	if s := tr.Share(TPK{"t", 0, "cold"}, t0.Add(15*time.Second)); !near(s, 1.0/16) {
		t.Fatalf("cold key share %v", s)
	}
	if s := tr.Share(TPK{"t", 1, "hot"}, t0.Add(15*time.Second)); s != 0 {
		t.Fatalf("the same key of another partition has share %v", s)
	}
}

func TestTrackerForgetsLeastRecentlyActive(t *testing.T) {
	tr := NewTracker(16*time.Second, 2)
	call(tr, "a", 0, time.Second)
	call(tr, "b", 0, time.Second)
	call(tr, "a", 2*time.Second, 3*time.Second) // a is now the more recent
	call(tr, "c", 0, time.Second)               // evicts b
	if tr.Len() != 2 {
		t.Fatalf("tracking %d keys, want 2", tr.Len())
	}
	at := t0.Add(4 * time.Second)
	if tr.Share(TPK{"t", 0, "b"}, at) != 0 {
		t.Fatal("b should have been forgotten")
	}
	if !near(tr.Share(TPK{"t", 0, "a"}, at), 2.0/16) {
		t.Fatal("a should be kept")
	}
	// An outcome for a forgotten key's call is ignored.
	tr.Observe(telemetry.Event{Kind: telemetry.HandlerFailed, At: at, Topic: "t", Key: "b"})
	if tr.Len() != 2 {
		t.Fatal("an outcome must not add a key")
	}
}
