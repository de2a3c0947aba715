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

// A layer's panic gives the run's permit back, whether the layer is
// outside the scheduler (found in review: its release was dropped) or
// inside it (its After would never ask for the release): one lost is
// lost for good, and max_concurrency of them stop the consumer.
func TestALayerPanicGivesItsPermitBack(t *testing.T) {
	for _, tt := range []struct {
		name   string
		layers func(sched *Scheduler) []Layer
	}{
		{"outside the scheduler", func(s *Scheduler) []Layer { return []Layer{panicking{after: true}, Cancellation{}, s} }},
		{"inside the scheduler", func(s *Scheduler) []Layer { return []Layer{Cancellation{}, s, panicking{before: true}} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sched := NewFIFOScheduler(1)
			ctx, cancel := newInv()
			defer cancel(nil)
			target := hostTarget{started: make(chan *Run, 1)}
			layers := tt.layers(sched)
			out := start(NewStack(target, layers...), ctx, &event.Message{})
			if _, ok := layers[0].(panicking); ok {
				(<-target.started).Done(nil)
			}
			if err := <-out; !errors.As(err, new(*LayerPanic)) {
				t.Fatalf("outcome %v, want a LayerPanic", err)
			}
			if sched.InUse() != 0 {
				t.Fatalf("%d permit(s) still taken after the event ended", sched.InUse())
			}
		})
	}
}
