package invocation

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/prosody-events/prosody-go/core/fault"
)

// Env is what the engine offers the handlers of one partition through
// their contexts. The engine sets it; a nil field means the service is not
// available.
type Env struct {
	// Timers are the partition's durable timers.
	Timers Timers
	// Block is called by Context.Blocking; it returns the function that
	// ends the blocking section.
	Block func() (resume func())
	// Deferral is the partition's deferral state in pipeline mode (a
	// *deferral.Partition, which cannot be named here without an import
	// cycle); nil when keys are not deferred.
	Deferral any
	// State is the partition's keyed state (a *state.Partition, for the
	// same reason); nil when the client has no state collections.
	State any
	// Stopping is set once the partition stops starting work (it is being
	// revoked, or the consumer stops): an attempt that waits for a permit
	// then leaves without one, with ErrNotStarted. Nil: never.
	Stopping *atomic.Bool
}

// ErrNotStarted ends an event whose handler did not start because its
// partition stopped starting work (Env.Stopping) while it waited for a
// permit. Its offset stays uncommitted: the next owner handles it.
var ErrNotStarted = fault.Terminal(errors.New("prosody: not started: the partition is going away; the next owner handles the event"))

// Stopping reports whether the invocation's partition has stopped starting
// work (Env.Stopping).
func (c *Context) Stopping() bool {
	return c.env != nil && c.env.Stopping != nil && c.env.Stopping.Load()
}

// Env is what the engine offers the invocation (nil outside the engine).
func (c *Context) Env() *Env { return c.env }

// Timers is the view of a partition's timers that a context needs: the
// application timers of one key, in wall-clock time. A timer is stored
// with the trace context (span) of the event that scheduled it.
type Timers interface {
	Schedule(ctx context.Context, key string, at time.Time, span map[string]string) error
	ClearAndSchedule(ctx context.Context, key string, at time.Time, span map[string]string) error
	Unschedule(ctx context.Context, key string, at time.Time) error
	ClearScheduled(ctx context.Context, key string) error
	Scheduled(ctx context.Context, key string) ([]time.Time, error)
}

// ErrNoTimers is returned by timer operations on a context that has no
// timers, such as one made outside the engine.
var ErrNoTimers = fault.Permanent(errors.New("prosody: timers are not available in this context"))

// Trace is the trace context of the event an invocation handles, in the
// form timers store it (traceparent, tracestate, baggage, as present); nil
// when it has none.
type Trace interface {
	TraceSpan() map[string]string
}

// SetEnv attaches the engine's services and the trace context of the
// event being handled. The engine calls it before the handler runs.
func (c *Context) SetEnv(e *Env, trace Trace) { c.env, c.trace = e, trace }

// span is the trace context a timer scheduled now stores.
func (c *Context) span() map[string]string {
	if c.trace == nil {
		return nil
	}
	return c.trace.TraceSpan()
}

// Blocking tells the engine that the handler is about to wait for
// something outside this process (a host language runtime, a remote call)
// so that other ready events need not wait for this one's worker. Call the
// returned function when the wait is over. It is only a hint: handlers that
// never call it are still correct.
func (c *Context) Blocking() (resume func()) {
	if c.env == nil || c.env.Block == nil {
		return func() {}
	}
	return c.env.Block()
}

// timers checks the context the way every timer operation must: an
// invalidated context fails with ErrInvalidContext, a cancelled one with its
// cause (terminal when the partition is going away, transient on a
// timeout).
func (c *Context) timers() (Timers, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	if c.env == nil || c.env.Timers == nil {
		return nil, ErrNoTimers
	}
	return c.env.Timers, nil
}

// Schedule adds a timer for this event's key at t. Times have whole-second
// precision: t rounds to the nearest second. A time in the past fires as
// soon as possible.
func (c *Context) Schedule(t time.Time) error {
	tm, err := c.timers()
	if err != nil {
		return err
	}
	return tm.Schedule(c, c.key, t, c.span())
}

// ClearAndSchedule replaces every timer of this event's key with one at t.
func (c *Context) ClearAndSchedule(t time.Time) error {
	tm, err := c.timers()
	if err != nil {
		return err
	}
	return tm.ClearAndSchedule(c, c.key, t, c.span())
}

// Unschedule removes this key's timer at t (rounded to the second).
func (c *Context) Unschedule(t time.Time) error {
	tm, err := c.timers()
	if err != nil {
		return err
	}
	return tm.Unschedule(c, c.key, t)
}

// ClearScheduled removes every timer of this event's key.
func (c *Context) ClearScheduled() error {
	tm, err := c.timers()
	if err != nil {
		return err
	}
	return tm.ClearScheduled(c, c.key)
}

// Scheduled lists this key's pending timers, earliest first. The timer
// being handled right now is not listed unless it was scheduled again.
func (c *Context) Scheduled() ([]time.Time, error) {
	tm, err := c.timers()
	if err != nil {
		return nil, err
	}
	return tm.Scheduled(c, c.key)
}
