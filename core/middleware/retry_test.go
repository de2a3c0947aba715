package middleware

import (
	"errors"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
)

func TestRetry(t *testing.T) {
	transient := errors.New("flaky")
	permanent := fault.Permanent(errors.New("bad input"))
	terminal := fault.Terminal(errors.New("gone"))
	tests := []struct {
		name         string
		maxRetries   int
		failures     []error // returned by successive attempts, then nil
		wantAttempts int
		wantErr      error
	}{
		{"success first time", 3, nil, 1, nil},
		{"transient then success", 3, []error{transient, transient}, 3, nil},
		{"transient exhausts retries", 2, []error{transient, transient, transient, transient}, 3, transient},
		{"permanent is not retried", 3, []error{permanent}, 1, permanent},
		{"terminal is not retried", 3, []error{terminal}, 1, terminal},
		{"zero retries means one attempt", 0, []error{transient}, 1, transient},
		{"unlimited keeps going", Unlimited, []error{transient, transient, transient, transient, transient}, 6, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			attempts := 0
			inner := func(*event.Context, event.Event) error {
				attempts++
				if attempts <= len(tt.failures) {
					return tt.failures[attempts-1]
				}
				return nil
			}
			ctx, cancel := newCtx()
			defer cancel(nil)
			p := RetryPolicy{MaxRetries: tt.maxRetries, Base: time.Millisecond, MaxDelay: 4 * time.Millisecond}
			err := Chain(inner, Retry(p))(ctx, &event.Message{})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if attempts != tt.wantAttempts {
				t.Fatalf("attempts = %d, want %d", attempts, tt.wantAttempts)
			}
		})
	}
}

func TestRetryStopsOnCancellation(t *testing.T) {
	ctx, cancel := newCtx()
	inner := func(*event.Context, event.Event) error { return errors.New("flaky") }
	p := RetryPolicy{MaxRetries: Unlimited, Base: time.Hour, MaxDelay: time.Hour}
	done := make(chan error)
	go func() { done <- Chain(inner, Retry(p))(ctx, &event.Message{}) }()
	time.Sleep(10 * time.Millisecond)
	cancel(event.ErrRevoked)
	select {
	case err := <-done:
		if !errors.Is(err, event.ErrRevoked) || !fault.IsTerminal(err) {
			t.Fatalf("err = %v, want terminal ErrRevoked", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("retry did not stop on cancellation")
	}
}

func TestRetryDelayIsExponentialAndCapped(t *testing.T) {
	p := RetryPolicy{Base: 20 * time.Millisecond, MaxDelay: 100 * time.Millisecond}
	tests := []struct {
		n       int
		nominal time.Duration
	}{{1, 20 * time.Millisecond}, {2, 40 * time.Millisecond}, {3, 80 * time.Millisecond}, {4, 100 * time.Millisecond}, {30, 100 * time.Millisecond}}
	for _, tt := range tests {
		for i := 0; i < 50; i++ {
			d := p.Delay(tt.n)
			if d > tt.nominal || d < tt.nominal*4/5 {
				t.Fatalf("Delay(%d) = %v, want within [%v, %v]", tt.n, d, tt.nominal*4/5, tt.nominal)
			}
		}
	}
}
