// Package middleware holds the layers between the key queue and the user's
// handler, and the runner that walks them.
//
// A Layer has two halves: Before runs as an attempt passes inward, After
// as its outcome passes outward. Each half returns a Step: go on inward,
// an outcome to pass outward, run the layers inside again after a delay
// (a retry), or Wait, when the layer finishes the step later, from any
// goroutine, with Run.Resume (a concurrency slot that another event will
// hand over, a dead letter the broker has yet to acknowledge).
//
// Because no layer blocks, one walk serves both ways a handler can run. A
// Go handler (or a C host's on_event) returns its outcome on the calling
// goroutine: Stack.Invoke walks the layers and blocks the caller only
// where a step waits. A handler in a host language finishes later, from
// the host's thread: Stack.Start walks until a step waits and returns,
// and whoever resumes the step walks on, on their own goroutine or thread,
// so no goroutine is parked per event. Both drive the same walk, so a
// layer behaves the same under either (parity_test.go checks that).
//
// Stacks list layers outermost first, in the order a request passes
// through them (see stacks.go for the stack of each mode):
//
//	NewStack(Handler(h), NewRetry(policy), Cancellation{}, scheduler, timeouts)
package middleware

import (
	"context"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
)

// Layer is one step on the path between the key queue and the handler.
// Layers are shared by every run of a stack (and may appear in several
// stacks); what one run needs to remember lives in its Slot.
type Layer interface {
	// Before runs as an attempt passes inward. It returns Continue, an
	// outcome (Result: the layers inside do not run, nor does this
	// layer's After), or Wait.
	Before(r *Run) Step
	// After runs as the outcome err of the layers inside passes outward,
	// for layers whose Before continued. It returns an outcome (Result,
	// err or another), RetryAfter (run the layers inside again), or Wait.
	After(r *Run, err error) Step
}

// Releaser is a layer that holds something (a concurrency permit) past
// its After: its After calls Run.ReleaseLater, and the runner calls
// Release once the run's outcome has left the stack, or before the run
// waits, whichever comes first. A key's next event, started from the
// outcome, is then first in line for what is released.
type Releaser interface {
	Release(r *Run)
}

// Stateful is a layer that keeps state per run in Run.Slot. A stack gives
// only these layers a slot. A run's slots are not cleared between runs:
// the layer's Before sets what its After reads.
type Stateful interface {
	UsesSlot()
}

// WaitCanceller is a layer whose waiting runs end early when their
// invocation is cancelled, once CancelWaiting is called (the owner of the
// invocations' parent context calls it on cancellation; see
// Stack.CancelWaiting). Watching every waiter's context instead would cost
// a subscription per event.
type WaitCanceller interface {
	CancelWaiting()
}

// Prefetcher is a layer that starts, as messages are admitted to their
// partition, what its Before will need (a deduplication lookup), so that
// the answer is there, or on its way, when each message runs. It is
// given a burst at a time, so that it can start their lookups together.
type Prefetcher interface {
	Prefetch(msgs []*event.Message)
	// Released is told, once a partition's claim has ended and it has
	// drained, that its admitted messages will not run here any more: it
	// drops what it prefetched for them, which the partition's next owner
	// may make stale, and waits, until ctx ends, for the writes its
	// handled messages left under way, so that the final commit follows
	// them.
	Released(ctx context.Context, topic string, partition int32) error
}

// Target is what the innermost layer runs: the handler.
type Target interface {
	// Start begins one attempt of r's event in the context of the attempt. It returns the
	// attempt's outcome (Result), or Wait and later calls r.Resume with
	// the outcome, exactly once, from any goroutine.
	Start(r *Run) Step
	// Async reports whether Start of ev returns Wait, so that its caller
	// may return instead of blocking (Stack.StartsAsync).
	Async(ev event.Event) bool
}

// Step is what a layer or the handler tells the runner to do next.
type Step struct {
	err   error
	delay time.Duration
	op    op
}

type op uint8

const (
	opContinue op = iota // Before: go on inward
	opResult             // an outcome, passed outward
	opRetry              // After: run the layers inside again after delay
	opWait               // finished later with Run.Resume
	opEnter              // internal: a retry's delay is over; enter the layer inside
)

// Continue goes on inward (Before only).
var Continue = Step{op: opContinue}

// Wait says the layer finishes its step later with Run.Resume.
var Wait = Step{op: opWait}

// Result passes the outcome err (nil: success) outward.
func Result(err error) Step { return Step{op: opResult, err: err} }

// RetryAfter runs the layers inside again once delay has passed (After
// only). A cancellation of the invocation during the delay ends the run
// with the cancellation cause instead.
func RetryAfter(delay time.Duration) Step { return Step{op: opRetry, delay: delay} }
