package invocation

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/fault"
)

func TestContextLifecycle(t *testing.T) {
	parent, cancelParent := context.WithCancelCause(context.Background())
	defer cancelParent(nil)
	c := NewContext(parent, "k1")
	if c.Key() != "k1" || c.ShouldCancel() || c.Check() != nil || !c.Valid() {
		t.Fatal("a new context must be valid and not cancelled")
	}
	c.Invalidate()
	if !c.ShouldCancel() || c.Valid() {
		t.Fatal("an invalidated context must be cancelled")
	}
	if err := c.Check(); !errors.Is(err, ErrInvalidContext) || !fault.IsPermanent(err) {
		t.Fatalf("Check after invalidate = %v, want permanent ErrInvalidContext", err)
	}
}

func TestContextCancellationCauses(t *testing.T) {
	tests := []struct {
		name   string
		cancel func(parent context.CancelCauseFunc, c *Context)
		want   error
		class  fault.Class
	}{
		{"revocation reaches the handler", func(p context.CancelCauseFunc, _ *Context) { p(ErrRevoked) }, ErrRevoked, fault.ClassTerminal},
		{"explicit cancel", func(_ context.CancelCauseFunc, c *Context) { c.Cancel(ErrTimeout) }, ErrTimeout, fault.ClassTransient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent, cancelParent := context.WithCancelCause(context.Background())
			defer cancelParent(nil)
			c := NewContext(parent, "k")
			tt.cancel(cancelParent, c)
			select {
			case <-c.OnCancel():
			case <-time.After(5 * time.Second):
				t.Fatal("OnCancel did not fire")
			}
			if !errors.Is(c.Cause(), tt.want) || !errors.Is(c.Check(), tt.want) {
				t.Fatalf("cause = %v, want %v", c.Cause(), tt.want)
			}
			if fault.ClassOf(c.Cause()) != tt.class {
				t.Fatalf("class = %v, want %v", fault.ClassOf(c.Cause()), tt.class)
			}
		})
	}
}

func TestAttempt(t *testing.T) {
	for _, inv := range []*Context{NewInvocation(context.Background(), "k"), NewContext(context.Background(), "k")} {
		for i := 0; i < 3; i++ { // the first may use the spare, later ones allocate
			a := inv.Attempt()
			if a.Key() != "k" || !a.Valid() || a.ShouldCancel() {
				t.Fatalf("attempt %d: fresh attempt not usable", i)
			}
			a.CancelTimeout()
			if !errors.Is(a.Cause(), ErrTimeout) || inv.ShouldCancel() {
				t.Fatalf("attempt %d: timeout must cancel the attempt only (cause %v, parent cancelled %v)", i, a.Cause(), inv.ShouldCancel())
			}
			a.Invalidate()
			if a.Check() != ErrInvalidContext {
				t.Fatalf("attempt %d: ended attempt still valid", i)
			}
		}
		a := inv.Attempt()
		done := a.Done()
		inv.Cancel(ErrRevoked)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("cancelling the invocation did not reach its attempt")
		}
		if !errors.Is(a.Cause(), ErrRevoked) {
			t.Fatalf("attempt cause %v, want ErrRevoked", a.Cause())
		}
	}
}

// Cancelling takes no lock unless something waits, so a Done or AfterFunc
// that races with the cancellation must still see it: the channel closes
// and the callback runs, exactly once, whichever side gets there first.
func TestCancelRacesWithWaiters(t *testing.T) {
	tests := []struct {
		name string
		wait func(c *Context, fired chan<- struct{})
	}{
		{"Done", func(c *Context, fired chan<- struct{}) {
			<-c.Done()
			fired <- struct{}{}
		}},
		{"AfterFunc", func(c *Context, fired chan<- struct{}) {
			c.AfterFunc(func() { fired <- struct{}{} })
		}},
		{"parent", func(c *Context, fired chan<- struct{}) {
			// A child made while the parent is being cancelled.
			child := NewContext(c, "child")
			<-child.Done()
			fired <- struct{}{}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := 0; i < 2000; i++ {
				c := NewContext(context.Background(), "k")
				fired := make(chan struct{}, 2)
				go tt.wait(c, fired)
				go c.Cancel(ErrRevoked)
				select {
				case <-fired:
				case <-time.After(5 * time.Second):
					t.Fatalf("round %d: the waiter never saw the cancellation", i)
				}
				select {
				case <-fired:
					t.Fatalf("round %d: the waiter fired twice", i)
				case <-time.After(time.Microsecond):
				}
				if !errors.Is(c.Cause(), ErrRevoked) {
					t.Fatalf("round %d: Cause = %v", i, c.Cause())
				}
			}
		})
	}
}

// A Done or AfterFunc call that races with the cancellation may finish
// firing it, but must not run the callbacks itself: its caller may hold a
// lock a callback takes (found in review: the first version of lock-free
// cancellation deadlocked here within a thousand rounds).
func TestRacingDoneDoesNotRunCallbacks(t *testing.T) {
	for i := 0; i < 50000; i++ {
		c := NewContext(context.Background(), "k")
		var mu sync.Mutex
		ran := make(chan struct{})
		c.AfterFunc(func() { mu.Lock(); mu.Unlock(); close(ran) })
		start := make(chan struct{})
		go func() { <-start; c.Cancel(ErrRevoked) }()
		out := make(chan struct{})
		go func() {
			mu.Lock()
			close(start)
			<-c.Done()
			mu.Unlock()
			close(out)
		}()
		select {
		case <-out:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: Done's caller ran a callback that takes a lock it holds", i)
		}
		<-ran
	}
}
