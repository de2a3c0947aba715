package middleware

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
)

// waitingLayer returns Wait from its Before and resumes the run itself:
// at once, before returning (early), or from another goroutine.
type waitingLayer struct{ early bool }

func (l waitingLayer) Before(r *Run) Step {
	if l.early {
		r.Resume(Continue)
	} else {
		go r.Resume(Continue)
	}
	return Wait
}

func (waitingLayer) After(_ *Run, err error) Step { return Result(err) }

// A step may be resumed before its layer has returned Wait, or after, from
// any goroutine; either way the run goes on once, under either drive.
func TestResumeBeforeOrAfterWait(t *testing.T) {
	for _, early := range []bool{true, false} {
		for _, drive := range []string{"Invoke", "Start"} {
			t.Run(drive, func(t *testing.T) {
				calls := 0
				s := NewStack(Handler(handlerFunc(func(*event.Context, event.Event) error { calls++; return nil }), nil),
					waitingLayer{early}, waitingLayer{early}, waitingLayer{early})
				for i := 0; i < 1000; i++ {
					ctx, cancel := newInv()
					var err error
					if drive == "Invoke" {
						err = invoke(s, ctx, &event.Message{})
					} else {
						err = <-start(s, ctx, &event.Message{})
					}
					cancel(nil)
					if err != nil {
						t.Fatal(err)
					}
				}
				if calls != 1000 {
					t.Fatalf("%d handler calls for 1000 runs", calls)
				}
			})
		}
	}
}

// releaseRecorder asks for Release in its After, and notes when it comes.
type releaseRecorder struct {
	mu    *sync.Mutex
	trail *[]string
}

func (l releaseRecorder) note(s string)  { l.mu.Lock(); *l.trail = append(*l.trail, s); l.mu.Unlock() }
func (releaseRecorder) Before(*Run) Step { return Continue }
func (l releaseRecorder) After(r *Run, err error) Step {
	l.note("after")
	r.ReleaseLater()
	return Result(err)
}
func (l releaseRecorder) Release(*Run) { l.note("release") }

// A layer's Release comes after the outcome has left the stack (so that
// what the outcome starts is first in line for it), and before a retry's
// backoff (so that the backoff holds nothing).
func TestReleaseOrder(t *testing.T) {
	var mu sync.Mutex
	var trail []string
	rec := releaseRecorder{&mu, &trail}
	attempts := 0
	h := handlerFunc(func(*event.Context, event.Event) error {
		if attempts++; attempts == 1 {
			return errors.New("flaky")
		}
		return nil
	})
	clock := newFakeClock()
	s := NewStack(Handler(h, nil), NewRetry(RetryPolicy{MaxRetries: 1, Base: time.Millisecond, MaxDelay: time.Millisecond}), rec).WithClock(clock)
	ctx, cancel := newInv()
	defer cancel(nil)
	done := make(chan struct{})
	s.Start(new(Run), ctx, &event.Message{}, doneFunc(func(err error) { rec.note("outcome"); close(done) }))
	<-clock.added
	rec.note("backoff")
	clock.fire()
	<-done
	eventually(t, "the last release", func() bool { mu.Lock(); defer mu.Unlock(); return len(trail) == 6 })
	if got, want := strings.Join(trail, " "), "after release backoff after outcome release"; got != want {
		t.Fatalf("order %q, want %q", got, want)
	}
}

type doneFunc func(error)

func (f doneFunc) Done(err error) { f(err) }

// A panicking Go handler is a transient failure, and the layers' After
// still run: its permit comes back.
func TestHandlerPanicIsATransientFailure(t *testing.T) {
	l := NewFIFOScheduler(1)
	ctx, cancel := newInv()
	defer cancel(nil)
	err := invoke(NewStack(Handler(handlerFunc(func(*event.Context, event.Event) error { panic("oops") }), l), l), ctx, &event.Message{})
	if err == nil || !strings.Contains(err.Error(), "handler panicked: oops") || fault.ClassOf(err) != fault.ClassTransient {
		t.Fatalf("err = %v, want a transient panic error", err)
	}
	if l.InUse() != 0 {
		t.Fatalf("%d permits taken after the panic", l.InUse())
	}
}

// statefulLayer counts its Before calls in its slot.
type statefulLayer struct{}

func (statefulLayer) UsesSlot()                    {}
func (statefulLayer) Before(r *Run) Step           { r.Slot().N++; return Continue }
func (statefulLayer) After(r *Run, err error) Step { return Result(err) }

func TestStackSlots(t *testing.T) {
	layers := make([]Layer, MaxSlots)
	for i := range layers {
		layers[i] = statefulLayer{}
	}
	s := NewStack(Func(func(*event.Context, event.Event) error { return nil }), layers...)
	var r Run
	ctx, cancel := newInv()
	defer cancel(nil)
	if err := s.Invoke(&r, ctx, &event.Message{}); err != nil {
		t.Fatal(err)
	}
	for i, sl := range r.slots {
		if sl.N != 1 {
			t.Fatalf("slot %d counted %d, want 1: layers share a slot", i, sl.N)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a stack with too many stateful layers was built")
		}
	}()
	NewStack(Func(nil), append(layers, statefulLayer{})...)
}
