package middleware

import (
	"fmt"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
)

// Handler is the target that runs a user's handler. A message for an
// event.AsyncHandler starts asynchronously: the handler reports its
// outcome later, from any thread (a host language behind the C ABI).
// Timers, and the messages of every other handler, call h on the run's
// goroutine; a panic there counts as a transient failure.
//
// l is the stack's scheduler, or nil: an asynchronous handler's message
// is prepared (its copy for the host made) when its run starts, off the
// thread that will start it, if it will wait briefly for a permit, and
// otherwise when its permit comes, so that thousands of waiting attempts
// do not each hold a copy.
func Handler(h event.Handler, l *Scheduler) Target {
	t := &handlerTarget{scheduler: l, call: func(ctx *event.Context, ev event.Event) error {
		switch e := ev.(type) {
		case *event.Message:
			return h.OnMessage(ctx, e)
		case *event.Timer:
			return h.OnTimer(ctx, e)
		}
		return fault.Permanent(fmt.Errorf("no handler for an event of type %T", ev))
	}}
	t.async, _ = h.(event.AsyncHandler)
	return t
}

type handlerTarget struct {
	call      Func               // h, called on the run's goroutine
	async     event.AsyncHandler // h, when it is one
	scheduler *Scheduler
}

// Async implements Target.
func (t *handlerTarget) Async(ev event.Event) bool {
	_, ok := ev.(*event.Message)
	return ok && t.async != nil
}

// Start implements Target.
func (t *handlerTarget) Start(r *Run) Step {
	ctx := (*event.Context)(r.call)
	if m, ok := r.ev.(*event.Message); ok && t.async != nil {
		prep := r.prep
		r.prep = nil
		if prep == nil {
			prep = t.async.PrepareMessage(m)
		}
		t.async.StartMessage(ctx, m, prep, r)
		return Wait
	}
	return t.call.Start(r)
}

// preparer is a target that readies a run's first attempt when it starts.
type preparer interface {
	prepare(r *Run)
}

func (t *handlerTarget) prepare(r *Run) {
	if m, ok := r.ev.(*event.Message); ok && t.async != nil && (t.scheduler == nil || t.scheduler.shortWait()) {
		r.prep = t.async.PrepareMessage(m)
	}
}

// Func is a target that calls f on the run's goroutine, for Go programs
// and tests that run events without an event.Handler. A panic in f counts
// as a transient failure.
type Func func(ctx *event.Context, ev event.Event) error

// Async implements Target.
func (Func) Async(event.Event) bool { return false }

// Start implements Target.
func (f Func) Start(r *Run) Step { return Result(f.call((*event.Context)(r.call), r.ev)) }

func (f Func) call(ctx *event.Context, ev event.Event) (err error) {
	defer func() {
		// A panicking handler must not take the process down with it, nor
		// skip the layers' After (its permit, its timeout entry).
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return f(ctx, ev)
}
