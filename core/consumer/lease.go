package consumer

import (
	"github.com/prosody-events/prosody-go/core/internal/invocation"
	"github.com/prosody-events/prosody-go/core/middleware"
)

// permitLease is a concurrency permit that a partition's driver holds
// across the events it runs one after another (runReady), lent to each
// invocation so that quick events do not each take and return a permit of
// the scheduler both CPUs share (middleware.Scheduler.Lease). It is taken at
// the first message invoked synchronously (timers and messages started
// asynchronously never lend it, so such a series holds none), and ends
// with the series.
type permitLease struct {
	scheduler *middleware.Scheduler // nil: no leases
	held      bool
	// since is the grant's mark of a permit reserved ahead of its
	// invocation (middleware.Scheduler.GrantMark), 0 for a driver's lease,
	// whose series of events is charged event by event.
	since uint32
}

// lend lends the lease's permit to ctx, taking one first if needed. A nil
// lease lends nothing, and none is lent when no permit is free (the
// attempt then queues for one of its own).
func (l *permitLease) lend(ctx *invocation.Context) {
	if l == nil || l.scheduler == nil {
		return
	}
	if !l.held {
		if l.held = l.scheduler.Lease(); !l.held {
			return
		}
	}
	if l.since != 0 {
		ctx.LendHeld(l.scheduler.ID(), l.since)
		return
	}
	ctx.Lend(l.scheduler.ID())
}

// settle follows an invocation lend was called for: a held permit that the
// invocation dropped is the scheduler's again, and the lease is over.
func (l *permitLease) settle(ctx *invocation.Context) {
	if l != nil && l.held && ctx.Lent() == 0 {
		l.held = false
	}
}

// end gives the permit back once the series of events is over, or before
// an event that must not run on it. A nil lease has nothing to give back.
func (l *permitLease) end() {
	if l != nil && l.held {
		l.scheduler.EndLease()
		l.held = false
	}
}
