package middleware

import (
	"errors"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
)

func TestTimeout(t *testing.T) {
	slowHandler := func(ctx *event.Context, _ event.Event) error {
		<-ctx.OnCancel()
		return ctx.Err()
	}
	tests := []struct {
		name      string
		d         time.Duration
		handler   func(*event.Context, event.Event) error
		wantErr   bool
		wantClass fault.Class
	}{
		{"fast handler unaffected", time.Second, func(*event.Context, event.Event) error { return nil }, false, 0},
		{"slow handler is cancelled and transient", 20 * time.Millisecond, slowHandler, true, fault.ClassTransient},
		{"success despite timeout counts as success", 10 * time.Millisecond, func(ctx *event.Context, _ event.Event) error {
			<-ctx.OnCancel()
			return nil
		}, false, 0},
		{"permanent error before the timeout stays permanent", time.Second, func(*event.Context, event.Event) error {
			return fault.Permanent(errors.New("bad"))
		}, true, fault.ClassPermanent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := newInv()
			defer cancel(nil)
			timeouts := NewTimeouts(tt.d)
			defer timeouts.Stop()
			err := invoke(NewStack(Handler(handlerFunc(tt.handler), nil), timeouts), ctx, &event.Message{})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tt.wantErr)
			}
			if err != nil && fault.ClassOf(err) != tt.wantClass {
				t.Fatalf("class = %v, want %v (err %v)", fault.ClassOf(err), tt.wantClass, err)
			}
			if tt.name == "slow handler is cancelled and transient" && !errors.Is(err, invocation.ErrTimeout) {
				t.Fatalf("err = %v, want it to wrap ErrTimeout", err)
			}
			if ctx.ShouldCancel() {
				t.Fatal("the attempt's timeout must not cancel the invocation's context")
			}
			if timeouts.scan() {
				t.Fatal("the attempt is still timed after it ended")
			}
		})
	}
}

func TestTimeoutsWatchdogIdlesAndStops(t *testing.T) {
	timeouts := NewTimeouts(10 * time.Millisecond)
	s := NewStack(Handler(handlerFunc(func(ctx *event.Context, _ event.Event) error {
		<-ctx.OnCancel()
		return ctx.Err()
	}), nil), timeouts)
	for i := 0; i < 3; i++ {
		runTimedOut(t, s, i)
		eventually(t, "the watchdog sleeps", func() bool { return timeouts.ticker.Asleep() })
	}
	timeouts.Stop()
	timeouts.Stop() // idempotent
}

func TestNoLimitPassesThrough(t *testing.T) {
	timeouts := NewTimeouts(0)
	defer timeouts.Stop()
	ctx, cancel := newInv()
	defer cancel(nil)
	var seen *event.Context
	_ = invoke(NewStack(Handler(handlerFunc(func(c *event.Context, _ event.Event) error { seen = c; return nil }), nil), timeouts), ctx, &event.Message{})
	if seen != (*event.Context)(ctx) {
		t.Fatal("with no limit the handler must get the invocation's context itself")
	}
}

// TestTimeoutNeverEarly: however the attempts fall between the watchdog's
// ticks, and across its sleeps, none is cancelled before the limit, and
// each is cancelled within a few ticks after it.
func TestTimeoutNeverEarly(t *testing.T) {
	const limit = 20 * time.Millisecond
	timeouts := NewTimeouts(limit)
	defer timeouts.Stop()
	var early, late []time.Duration
	s := NewStack(Handler(handlerFunc(func(ctx *event.Context, _ event.Event) error {
		start := time.Now()
		<-ctx.OnCancel()
		el := time.Since(start)
		if el < limit {
			early = append(early, el)
		}
		if el > limit+10*timeouts.tick {
			late = append(late, el)
		}
		return ctx.Err()
	}), nil), timeouts)
	for i := 0; i < 30; i++ {
		runTimedOut(t, s, i)
		// Start the next attempt at another point of the tick, sometimes
		// after the watchdog went to sleep.
		time.Sleep(time.Duration(i%7) * 3 * time.Millisecond)
	}
	if len(early) > 0 {
		t.Fatalf("attempts cancelled before the %v limit: %v", limit, early)
	}
	if len(late) > 3 {
		t.Fatalf("attempts cancelled long after the %v limit: %v", limit, late)
	}
}

// runTimedOut runs one event through s, which must time it out.
func runTimedOut(t *testing.T, s *Stack, i int) {
	t.Helper()
	ctx, cancel := newInv()
	defer cancel(nil)
	if err := invoke(s, ctx, &event.Message{}); !errors.Is(err, invocation.ErrTimeout) {
		t.Fatalf("attempt %d: err = %v, want a timeout", i, err)
	}
}

// A permanent or terminal verdict returned after the timeout keeps its
// class (spec §4.11: the attempt's real result): a host that aborts a
// timed-out event must not see it committed or retried.
func TestTimeoutKeepsAPermanentOrTerminalVerdict(t *testing.T) {
	for _, tc := range []struct {
		name string
		mark func(error) error
		want fault.Class
	}{{"permanent", fault.Permanent, fault.ClassPermanent}, {"terminal", fault.Terminal, fault.ClassTerminal}} {
		t.Run(tc.name, func(t *testing.T) {
			timeouts := NewTimeouts(20 * time.Millisecond)
			defer timeouts.Stop()
			s := NewStack(Func(func(ctx *event.Context, _ event.Event) error {
				<-ctx.Done()
				return tc.mark(errors.New("the handler's own verdict"))
			}), timeouts)
			ctx, cancel := newInv()
			defer cancel(nil)
			if err := invoke(s, ctx, &event.Message{}); fault.ClassOf(err) != tc.want {
				t.Fatalf("class %v (%v), want %v", fault.ClassOf(err), err, tc.want)
			}
		})
	}
}
