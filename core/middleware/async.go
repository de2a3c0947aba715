package middleware

import (
	"sync/atomic"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
)

// Starter begins one attempt of an event and calls done with its outcome
// when it ends, without blocking (see event.AsyncHandler).
type Starter func(ctx *event.Context, ev event.Event, done func(error))

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
	Start    Starter
}

// Run starts ev in the invocation ctx and calls done once with its final
// outcome. It never blocks.
func (a *Async) Run(ctx *event.Context, ev event.Event, done func(error)) {
	a.attempt(ctx, ev, 1, done)
}

func (a *Async) attempt(ctx *event.Context, ev event.Event, n int, done func(error)) {
	// The Cancellation layer: no attempt starts once the invocation is
	// cancelled.
	if err := ctx.Check(); err != nil {
		done(err)
		return
	}
	a.Limiter.acquireAsync(ctx, func(err error) {
		if err != nil {
			done(err)
			return
		}
		// The invocation may have been cancelled while it waited.
		if err := ctx.Check(); err != nil {
			a.Limiter.release()
			done(err)
			return
		}
		attempt, end := a.Timeouts.start(ctx)
		a.Start(attempt, ev, func(err error) {
			err = end(err)
			a.Limiter.release()
			a.after(ctx, ev, n, err, done)
		})
	})
}

// after retries attempt n's failure when the policy says so, after its
// backoff, or ends the event. A cancellation during the backoff ends it at
// once with the cancellation cause.
func (a *Async) after(ctx *event.Context, ev event.Event, n int, err error, done func(error)) {
	delay, again := a.Retry.after(ctx, n, err)
	if !again {
		done(err)
		return
	}
	var once atomic.Bool
	var timer atomic.Pointer[time.Timer]
	stop := ctx.AfterFunc(func() {
		if once.CompareAndSwap(false, true) {
			if t := timer.Load(); t != nil {
				t.Stop()
			}
			done(ctx.Cause())
		}
	})
	timer.Store(time.AfterFunc(delay, func() {
		if once.CompareAndSwap(false, true) {
			stop()
			a.attempt(ctx, ev, n+1, done)
		}
	}))
}
