package middleware

import (
	"errors"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
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
			h := handlerFunc(func(*event.Context, event.Event) error {
				attempts++
				if attempts <= len(tt.failures) {
					return tt.failures[attempts-1]
				}
				return nil
			})
			ctx, cancel := newInv()
			defer cancel(nil)
			p := RetryPolicy{MaxRetries: tt.maxRetries, Base: time.Millisecond, MaxDelay: 4 * time.Millisecond}
			err := invoke(NewStack(Handler(h, nil), NewRetry(p)), ctx, &event.Message{})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if attempts != tt.wantAttempts {
				t.Fatalf("attempts = %d, want %d", attempts, tt.wantAttempts)
			}
		})
	}
}

// A revocation during the backoff ends the run at once with its cause;
// no attempt follows.
func TestRetryStopsOnCancellation(t *testing.T) {
	for _, drive := range []string{"Invoke", "Start"} {
		t.Run(drive, func(t *testing.T) {
			ctx, cancel := newInv()
			attempts := 0
			h := handlerFunc(func(*event.Context, event.Event) error { attempts++; return errors.New("flaky") })
			clock := newFakeClock()
			s := NewStack(Handler(h, nil), NewRetry(RetryPolicy{MaxRetries: Unlimited, Base: time.Hour, MaxDelay: time.Hour})).WithClock(clock)
			done := make(chan error, 1)
			if drive == "Invoke" {
				go func() { done <- invoke(s, ctx, &event.Message{}) }()
			} else {
				s.Start(new(Run), ctx, &event.Message{}, outcome(done))
			}
			<-clock.added // in its backoff
			cancel(invocation.ErrRevoked)
			err := <-done
			if !errors.Is(err, invocation.ErrRevoked) || !fault.IsTerminal(err) || attempts != 1 {
				t.Fatalf("err = %v after %d attempts, want terminal ErrRevoked after 1", err, attempts)
			}
		})
	}
}

// A failure once the invocation is cancelled is not retried.
func TestRetryNotWhileShuttingDown(t *testing.T) {
	ctx, cancel := newInv()
	attempts := 0
	h := handlerFunc(func(*event.Context, event.Event) error {
		attempts++
		cancel(invocation.ErrRevoked)
		return errors.New("flaky")
	})
	err := invoke(NewStack(Handler(h, nil), NewRetry(RetryPolicy{MaxRetries: Unlimited, Base: time.Millisecond, MaxDelay: time.Millisecond})), ctx, &event.Message{})
	if err == nil || attempts != 1 {
		t.Fatalf("err = %v after %d attempts, want the failure after 1", err, attempts)
	}
}

// Full jitter: uniform in [0, min(2^n × base, max)), in whole milliseconds.
func TestRetryDelayIsFullJitterCapped(t *testing.T) {
	tests := []struct {
		name     string
		base, mx time.Duration
		n        int
		cap      time.Duration
	}{
		{"first retry below twice the base", 20 * time.Millisecond, 5 * time.Minute, 1, 40 * time.Millisecond},
		{"doubling", 20 * time.Millisecond, 5 * time.Minute, 3, 160 * time.Millisecond},
		{"capped", 20 * time.Millisecond, 100 * time.Millisecond, 4, 100 * time.Millisecond},
		{"no overflow far out", 20 * time.Millisecond, time.Second, 200, time.Second},
		{"zero base: no delay", 0, time.Second, 3, 0},
		{"zero max: no delay", 20 * time.Millisecond, 0, 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asked int64
			p := RetryPolicy{Base: tt.base, MaxDelay: tt.mx, Jitter: func(n int64) int64 { asked = n; return n - 1 }}
			d := p.Delay(tt.n)
			if tt.cap == 0 {
				if d != 0 {
					t.Fatalf("Delay = %v, want 0", d)
				}
				return
			}
			if asked != tt.cap.Milliseconds() || d != tt.cap-time.Millisecond {
				t.Fatalf("jitter range %d ms, delay %v: want [0, %v)", asked, d, tt.cap)
			}
			p.Jitter = nil
			for i := 0; i < 100; i++ {
				if d := p.Delay(tt.n); d < 0 || d >= tt.cap || d%time.Millisecond != 0 {
					t.Fatalf("Delay = %v, want whole ms in [0, %v)", d, tt.cap)
				}
			}
		})
	}
}

// Retries are attempts of failure demand.
func TestRetryMarksFailureDemand(t *testing.T) {
	ctx, cancel := newInv()
	defer cancel(nil)
	probe := &demandProbe{}
	n := 0
	h := handlerFunc(func(*event.Context, event.Event) error {
		if n++; n < 3 {
			return errors.New("flaky")
		}
		return nil
	})
	if err := invoke(NewStack(Handler(h, nil), NewRetry(RetryPolicy{MaxRetries: 5}), probe), ctx, &event.Message{}); err != nil {
		t.Fatal(err)
	}
	if want := []Demand{Normal, Failure, Failure}; len(probe.demands) != 3 || probe.demands[0] != want[0] || probe.demands[2] != want[2] {
		t.Fatalf("demands %v, want %v", probe.demands, want)
	}
}
