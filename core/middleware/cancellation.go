package middleware

import (
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
)

// Cancellation refuses to start an attempt whose invocation is already
// cancelled (the partition is being revoked, or the client is shutting
// down), returning the cancellation cause so that its class decides what
// follows: a revocation is terminal and leaves the event uncommitted for
// the next owner. Without it, a retry woken by its backoff could start one
// more attempt after shutdown began.
//
// A transient failure that comes back once the invocation is cancelled is
// passed outward as terminal (with the failure in its chain): the handler
// most likely failed because it was told to stop, and a retry must not
// follow.
//
// It also refuses to start an event's handler for the first time once the
// partition has stopped starting work (invocation.Context.Stopping), with
// invocation.ErrNotStarted: an event admitted before the drain began may
// still be on its way through the outer layers (a deduplication lookup,
// a deferral check, a retry's backoff after an outer layer refused it, a
// deferred message being loaded for its retry), and reaching the handler
// from there would start new work after Unsubscribe or a revocation said
// none would start. The event's offset (or its retry timer) stays for
// the next owner. A retry of a handler that did start is not refused
// here; one that is waiting for a permit when the drain begins is
// dismissed by the scheduler, and left for the next owner the same way.
type Cancellation struct{}

// Before implements Layer.
func (Cancellation) Before(r *Run) Step {
	if err := r.ctx.Check(); err != nil {
		return Result(err)
	}
	if !r.reached && r.ctx.Stopping() {
		return Result(invocation.ErrNotStarted)
	}
	return Continue
}

// After implements Layer.
func (Cancellation) After(r *Run, err error) Step {
	if err != nil && r.ctx.Err() != nil && fault.ClassOf(err) == fault.ClassTransient {
		return Result(fault.Terminal(shutdownAfterInner{err: err, cause: r.ctx.Cause()}))
	}
	return Result(err)
}

// shutdownAfterInner is a transient failure that ended an attempt of an
// invocation cancelled meanwhile (marked terminal where it is made), with
// the cancellation's cause and the failure in its chain.
type shutdownAfterInner struct{ err, cause error }

func (e shutdownAfterInner) Error() string {
	return e.err.Error() + " (while shutting down: " + e.cause.Error() + ")"
}
func (e shutdownAfterInner) Unwrap() []error { return []error{e.cause, e.err} }
