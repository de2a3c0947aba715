package event

import (
	"context"
	"time"

	"github.com/prosody-events/prosody-go/core/internal/invocation"
)

// Why an invocation was cancelled. Context.Cause returns one of these.
var (
	// ErrTimeout: the handler ran longer than the configured timeout. A
	// timeout is transient: the mode's retry policy decides what follows.
	ErrTimeout = invocation.ErrTimeout
	// ErrRevoked: the partition is being handed to another consumer and the
	// shutdown budget is nearly spent. The event will not be committed here.
	ErrRevoked = invocation.ErrRevoked
	// ErrInvalidContext: the context was used after its handler returned.
	ErrInvalidContext = invocation.ErrInvalidContext
	// ErrNoTimers is returned by timer operations on a context that has
	// no timers, such as one made with NewContext.
	ErrNoTimers = invocation.ErrNoTimers
)

// ErrNotStarted is the outcome of an event whose handler never started
// because this process is letting go of the work (its partition is
// stopping, or the host library that would run it was released). It is
// terminal but not a failure: the offset stays uncommitted, nothing is
// retried, deferred, dead-lettered or logged above debug, and the
// partition's next owner handles the event.
var ErrNotStarted = invocation.ErrNotStarted

// Context is the context of one handler invocation. It is a
// context.Context, so it can be passed to any call that should stop when
// the invocation is cancelled: its Done channel closes on timeout, when the
// partition is revoked (near the end of the shutdown budget), and when the
// client shuts down.
//
// A Context is valid only while its handler runs. Once the handler returns
// it is cancelled and invalidated: operations on a copy kept by user code
// fail with ErrInvalidContext instead of touching a partition this process
// may no longer own.
//
// The engine's side of the same memory (cancelling, invalidating, the
// services of the partition) is not part of this type.
type Context invocation.Context

// NewContext returns a valid Context for key, cancelled when parent is,
// with no timers: for testing a handler outside the engine.
func NewContext(parent context.Context, key string) *Context {
	return (*Context)(invocation.NewContext(parent, key))
}

func (c *Context) inv() *invocation.Context { return (*invocation.Context)(c) }

// Key is the key of the event being handled.
func (c *Context) Key() string { return c.inv().Key() }

// ShouldCancel reports whether the handler should stop as soon as it can.
func (c *Context) ShouldCancel() bool { return c.inv().ShouldCancel() }

// OnCancel returns a channel closed on cancellation (the same as Done).
func (c *Context) OnCancel() <-chan struct{} { return c.inv().Done() }

// Cause returns why the invocation was cancelled (ErrTimeout, ErrRevoked,
// ErrInvalidContext, or the client's shutdown), or nil while it runs.
func (c *Context) Cause() error { return c.inv().Cause() }

// Check returns nil while the context may be used, ErrInvalidContext once
// its handler returned, and the cancellation cause once it is cancelled.
func (c *Context) Check() error { return c.inv().Check() }

// Blocking tells the engine that the handler is about to wait for
// something outside this process (a host language runtime, a remote call)
// so that other ready events need not wait for this one's goroutine. Call
// the returned function when the wait is over. It is only a hint: handlers
// that never call it are still correct.
func (c *Context) Blocking() (resume func()) { return c.inv().Blocking() }

// Schedule adds a timer for this event's key at t. Times have whole-second
// precision: t rounds to the nearest second. A time in the past fires as
// soon as possible. The timer keeps the trace context of the event being
// handled, and its handler runs in it.
func (c *Context) Schedule(t time.Time) error { return c.inv().Schedule(t) }

// ClearAndSchedule replaces every timer of this event's key with one at t.
func (c *Context) ClearAndSchedule(t time.Time) error { return c.inv().ClearAndSchedule(t) }

// Unschedule removes this key's timer at t (rounded to the second).
func (c *Context) Unschedule(t time.Time) error { return c.inv().Unschedule(t) }

// ClearScheduled removes every timer of this event's key.
func (c *Context) ClearScheduled() error { return c.inv().ClearScheduled() }

// Scheduled lists this key's pending timers, earliest first. The timer
// being handled right now is not listed unless it was scheduled again.
func (c *Context) Scheduled() ([]time.Time, error) { return c.inv().Scheduled() }

// Deadline implements context.Context.
func (c *Context) Deadline() (time.Time, bool) { return c.inv().Deadline() }

// Done implements context.Context.
func (c *Context) Done() <-chan struct{} { return c.inv().Done() }

// Err implements context.Context.
func (c *Context) Err() error { return c.inv().Err() }

// Value implements context.Context.
func (c *Context) Value(key any) any { return c.inv().Value(key) }

// AfterFunc arranges for f to run once c is cancelled, and returns a
// function that unregisters it. context.AfterFunc and the contexts derived
// from c use it to follow c without a goroutine each.
func (c *Context) AfterFunc(f func()) (stop func() bool) { return c.inv().AfterFunc(f) }
