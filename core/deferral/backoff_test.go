package deferral

import (
	"math"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	tests := []struct {
		name      string
		base, max time.Duration
		retries   uint32
		wantCap   int64 // seconds; the delay is in [1, cap]
	}{
		{"the first deferral is immediate", time.Second, 24 * time.Hour, 0, 0},
		{"first retry", time.Second, 24 * time.Hour, 1, 1},
		{"doubles", time.Second, 24 * time.Hour, 4, 8},
		{"base of two seconds", 2 * time.Second, 24 * time.Hour, 3, 8},
		{"capped by the maximum", time.Second, 10 * time.Second, 10, 10},
		{"base truncated to whole seconds", 1500 * time.Millisecond, time.Hour, 2, 2},
		{"zero base still waits a second", 0, time.Hour, 5, 1},
		{"sub-second maximum still waits a second", time.Second, 100 * time.Millisecond, 5, 1},
		{"huge shift saturates", time.Second, 1 << 33 * time.Second, 60, math.MaxUint32},
		{"huge base saturates", 1 << 32 * time.Second, 1 << 33 * time.Second, 2, math.MaxUint32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asked int64 = -1
			low := Backoff{Base: tt.base, MaxDelay: tt.max, Jitter: func(n int64) int64 { asked = n; return 0 }}
			high := Backoff{Base: tt.base, MaxDelay: tt.max, Jitter: func(n int64) int64 { return n - 1 }}
			if tt.wantCap == 0 {
				if d := low.Delay(tt.retries); d != 0 {
					t.Fatalf("Delay = %v, want 0", d)
				}
				return
			}
			if d := low.Delay(tt.retries); d != time.Second {
				t.Fatalf("smallest delay = %v, want 1s", d)
			}
			if asked != tt.wantCap {
				t.Fatalf("jitter range = %d, want %d", asked, tt.wantCap)
			}
			if d := high.Delay(tt.retries); d != time.Duration(tt.wantCap)*time.Second {
				t.Fatalf("largest delay = %v, want %ds", d, tt.wantCap)
			}
		})
	}
}

func TestBackoffRandomStaysInRange(t *testing.T) {
	b := Backoff{Base: time.Second, MaxDelay: time.Hour}
	for i := 0; i < 1000; i++ {
		if d := b.Delay(3); d < time.Second || d > 4*time.Second {
			t.Fatalf("Delay(3) = %v, outside [1s, 4s]", d)
		}
	}
}
