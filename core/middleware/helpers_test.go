package middleware

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newInv is an invocation on key "k" whose parent the test cancels.
func newInv() (*invocation.Context, context.CancelCauseFunc) {
	parent, cancel := context.WithCancelCause(context.Background())
	return invocation.NewInvocation(parent, "k"), cancel
}

// invoke runs ev through s with Invoke, as a partition's goroutine does.
func invoke(s *Stack, ctx *invocation.Context, ev event.Event) error {
	var r Run
	return s.Invoke(&r, ctx, ev)
}

// outcome receives the final outcome of a run of Start.
type outcome chan error

func (o outcome) Done(err error) { o <- err }

// start runs ev through s with Start and returns where its outcome arrives.
func start(s *Stack, ctx *invocation.Context, ev event.Event) outcome {
	out := make(outcome, 1)
	s.Start(new(Run), ctx, ev, out)
	return out
}

// handlerFunc is a Go handler of messages and timers alike.
func handlerFunc(f func(ctx *event.Context, ev event.Event) error) event.Handler {
	return event.HandlerFuncs{
		Message: func(ctx *event.Context, m *event.Message) error { return f(ctx, m) },
		Timer:   func(ctx *event.Context, t *event.Timer) error { return f(ctx, t) },
	}
}

// eventually polls cond every millisecond for up to ten seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// fakeClock records the delays asked of it and runs them when told.
type fakeClock struct {
	mu      sync.Mutex
	delays  []time.Duration // every delay asked for, in order
	pending []*fakeTimer
	added   chan struct{} // a timer was added
}

type fakeTimer struct {
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock { return &fakeClock{added: make(chan struct{}, 1024)} }

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	tm := &fakeTimer{f: f}
	c.delays = append(c.delays, d)
	c.pending = append(c.pending, tm)
	c.mu.Unlock()
	c.added <- struct{}{}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !tm.stopped
		tm.stopped = true
		return was
	}
}

// fire runs the oldest pending timer that was not stopped, on a goroutine
// of its own as time.AfterFunc does, and reports whether there was one.
func (c *fakeClock) fire() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.pending) > 0 {
		tm := c.pending[0]
		c.pending = c.pending[1:]
		if !tm.stopped {
			tm.stopped = true
			go tm.f()
			return true
		}
	}
	return false
}

func (c *fakeClock) asked() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.delays...)
}

// newInvKey is newInv for another key.
func newInvKey(key string) (*invocation.Context, context.CancelCauseFunc) {
	parent, cancel := context.WithCancelCause(context.Background())
	return invocation.NewInvocation(parent, key), cancel
}
