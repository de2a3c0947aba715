package middleware

import (
	"errors"
	"testing"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
)

// panicking is a layer with a bug: it panics in its Before or its After.
type panicking struct{ before, after bool }

func (l panicking) Before(*Run) Step {
	if l.before {
		panic("before")
	}
	return Continue
}

func (l panicking) After(_ *Run, err error) Step {
	if l.after {
		panic("after")
	}
	return Result(err)
}

// hostTarget starts every attempt asynchronously, as a host binding
// does, and hands the run to the test, which reports its outcome.
type hostTarget struct {
	started chan *Run
	panics  bool
}

func (t hostTarget) Start(r *Run) Step {
	if t.panics {
		panic("target")
	}
	t.started <- r
	return Wait
}

func (hostTarget) Async(event.Event) bool { return true }

// A layer that panics in a run of Start, on the goroutine that starts it
// or on the host's thread that reports the outcome, ends the event with a
// terminal LayerPanic (left uncommitted, as on Invoke's path) instead of
// ending the process or leaving the event without an outcome.
func TestStartRecoversALayersPanic(t *testing.T) {
	for _, tt := range []struct {
		name  string
		layer panicking
	}{
		{"before, on the starting goroutine", panicking{before: true}},
		{"after, on the host's thread", panicking{after: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := newInv()
			defer cancel(nil)
			target := hostTarget{started: make(chan *Run, 1)}
			out := start(NewStack(target, tt.layer, Cancellation{}), ctx, &event.Message{})
			if tt.layer.after {
				r := <-target.started
				go r.Done(nil)
			}
			err := <-out
			var lp *LayerPanic
			if !errors.As(err, &lp) || !fault.IsTerminal(err) || len(lp.Stack) == 0 {
				t.Fatalf("outcome %v (%v): want a terminal LayerPanic with its stack", err, fault.ClassOf(err))
			}
			select {
			case err := <-out:
				t.Fatalf("a second outcome: %v", err)
			default:
			}
		})
	}
}

// A panic in the target's own Start is not taken for the event's outcome:
// the target may have handed the attempt to a host already.
func TestStartLeavesATargetsPanicAlone(t *testing.T) {
	ctx, cancel := newInv()
	defer cancel(nil)
	defer func() {
		if rec := recover(); rec != "target" {
			t.Fatalf("recovered %v, want the target's own panic", rec)
		}
	}()
	out := start(NewStack(hostTarget{panics: true}, Cancellation{}), ctx, &event.Message{})
	t.Fatalf("Start returned (outcome %v); want the target's panic to go on", <-out)
}
