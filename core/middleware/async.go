package middleware

import (
	"sync/atomic"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
)

// Starter begins one prepared attempt of an event and reports its outcome
// to done when it ends, without blocking (see event.AsyncHandler).
type Starter func(ctx *event.Context, ev event.Event, prepared event.Prepared, done event.Done)

// Preparer readies an attempt of ev ahead of its start.
type Preparer func(ev event.Event) event.Prepared

// Async runs events through the same layers as the synchronous chain built
// by the client (retry policy, cancellation check, concurrency slot,
// attempt timeout) for a handler that finishes events elsewhere. Nothing
// waits on a goroutine: a slot is handed over by the release that frees it,
// a backoff is a runtime timer, and each layer's exit work runs when the
// handler reports its outcome, on whatever thread reports it. The layers
// are the same objects the synchronous chain uses, so both kinds of events
// share one max_concurrency and one timeout watchdog.
type Async struct {
	Retry    *RetryPolicy // nil: a single attempt
	Limiter  *Limiter
	Timeouts *Timeouts
	Prepare  Preparer // nil: attempts need no preparing
	Start    Starter
}

// CancelWaiting ends the waits for a concurrency slot of attempts whose
// invocation is cancelled; the owner of the invocations' parent context
// calls it when that context is cancelled (see Limiter.CancelWaiting).
func (a *Async) CancelWaiting() { a.Limiter.CancelWaiting() }

// AsyncRun is the state of one event going through Async. The caller
// provides it (embedded in its own per-event state), so an event costs one
// allocation here rather than a closure per layer.
type AsyncRun struct {
	a     *Async
	ctx   *event.Context
	ev    event.Event
	n     int // the attempt number, from 1
	out   event.Done
	timer attemptTimer
	prep  event.Prepared // the next attempt, readied
	next  bool           // continues started work: waits at the front
}

// Run starts ev in the invocation ctx, keeping its state in r, and reports
// its final outcome to out once. It never blocks.
func (a *Async) Run(r *AsyncRun, ctx *event.Context, ev event.Event, out event.Done) {
	*r = AsyncRun{a: a, ctx: ctx, ev: ev, n: 1, out: out}
	r.attempt()
}

// RunNext is Run for an event that continues work already under way (the
// next event of a key whose previous one just ended, from that event's
// outcome): it waits for a slot ahead of events not yet started, and gets
// the slot of the event whose outcome started it. Finishing what was
// started first keeps a partition's oldest offsets moving, so its window
// of uncommitted offsets is not held by a key's next event waiting behind
// every other event.
func (a *Async) RunNext(r *AsyncRun, ctx *event.Context, ev event.Event, out event.Done) {
	*r = AsyncRun{a: a, ctx: ctx, ev: ev, n: 1, out: out, next: true}
	r.attempt()
}

func (r *AsyncRun) attempt() {
	// The Cancellation layer: no attempt starts once the invocation is
	// cancelled.
	if err := r.ctx.Check(); err != nil {
		r.out.Done(err)
		return
	}
	// Prepared now, off the thread that will start it, if it will wait
	// briefly; an attempt far back in the queue is prepared when its slot
	// comes, so that thousands of waiting attempts do not each hold a copy.
	if r.a.Prepare != nil && r.a.Limiter.shortWait() {
		r.prep = r.a.Prepare(r.ev)
	}
	r.a.Limiter.acquireAsync(r.ctx, r, r.next)
}

// slot is the Limiter's hand-over of a slot (or the end of the wait).
func (r *AsyncRun) slot(err error) {
	if err == nil {
		// The invocation may have been cancelled while it waited.
		if err = r.ctx.Check(); err != nil {
			r.a.Limiter.release()
		}
	}
	if err != nil {
		if r.prep != nil {
			r.prep.Discard()
			r.prep = nil
		}
		r.out.Done(err)
		return
	}
	r.timer = r.a.Timeouts.startAttempt(r.ctx)
	prep := r.prep
	r.prep = nil
	if prep == nil && r.a.Prepare != nil {
		prep = r.a.Prepare(r.ev)
	}
	r.a.Start(r.timer.ctx(), r.ev, prep, r)
}

// Done implements event.Done: the handler's outcome of the attempt.
func (r *AsyncRun) Done(err error) {
	err = r.timer.end(err)
	// The outcome goes out before the slot is released, so an event it
	// starts (RunNext) is first in line for the slot.
	r.after(err)
	r.a.Limiter.release()
}

// after retries the attempt's failure when the policy says so, after its
// backoff, or ends the event. A cancellation during the backoff ends it at
// once with the cancellation cause.
func (r *AsyncRun) after(err error) {
	delay, again := r.a.Retry.after(r.ctx, r.n, err)
	if !again {
		r.out.Done(err)
		return
	}
	r.n++
	var once atomic.Bool
	var timer atomic.Pointer[time.Timer]
	stop := r.ctx.AfterFunc(func() {
		if once.CompareAndSwap(false, true) {
			if t := timer.Load(); t != nil {
				t.Stop()
			}
			r.out.Done(r.ctx.Cause())
		}
	})
	timer.Store(time.AfterFunc(delay, func() {
		if once.CompareAndSwap(false, true) {
			stop()
			r.attempt()
		}
	}))
}
