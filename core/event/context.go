package event

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/prosody-events/prosody-go/core/fault"
)

// Why an invocation was cancelled. context.Cause(ctx) returns one of these.
var (
	// ErrTimeout: the handler ran longer than the configured timeout. A
	// timeout is transient: the mode's retry policy decides what follows.
	ErrTimeout = fault.Transient(errors.New("prosody: handler timed out"))
	// ErrRevoked: the partition is being handed to another consumer and the
	// shutdown budget is nearly spent. The event will not be committed here.
	ErrRevoked = fault.Terminal(errors.New("prosody: partition revoked"))
	// ErrInvalidContext: the context was used after its handler returned.
	ErrInvalidContext = fault.Permanent(errors.New("prosody: the context is no longer valid because the event has already been processed"))
)

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
type Context struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	key    string
	valid  atomic.Bool
}

// NewContext returns a valid Context for an invocation on key, cancelled
// when parent is.
func NewContext(parent context.Context, key string) *Context {
	ctx, cancel := context.WithCancelCause(parent)
	c := &Context{ctx: ctx, cancel: cancel, key: key}
	c.valid.Store(true)
	return c
}

// WithTimeout returns a child Context for one attempt, cancelled with
// ErrTimeout after d (d <= 0 means no limit). Call the returned function
// when the attempt ends.
func (c *Context) WithTimeout(d time.Duration) (*Context, func()) {
	child := NewContext(c.ctx, c.key)
	if d <= 0 {
		return child, child.Invalidate
	}
	timer := time.AfterFunc(d, func() { child.cancel(ErrTimeout) })
	return child, func() {
		timer.Stop()
		child.Invalidate()
	}
}

// Key is the key of the event being handled.
func (c *Context) Key() string { return c.key }

// ShouldCancel reports whether the handler should stop as soon as it can.
func (c *Context) ShouldCancel() bool { return c.ctx.Err() != nil }

// OnCancel returns a channel closed on cancellation (the same as Done).
func (c *Context) OnCancel() <-chan struct{} { return c.ctx.Done() }

// Cancel cancels the invocation with the given cause.
func (c *Context) Cancel(cause error) { c.cancel(cause) }

// Valid reports whether the invocation is still running.
func (c *Context) Valid() bool { return c.valid.Load() }

// Check returns nil while the context may be used, ErrInvalidContext after
// its handler returned, and the cancellation cause once cancelled.
func (c *Context) Check() error {
	if !c.valid.Load() {
		return ErrInvalidContext
	}
	if c.ctx.Err() != nil {
		return context.Cause(c.ctx)
	}
	return nil
}

// Invalidate ends the invocation: the context is cancelled and every later
// operation on it fails with ErrInvalidContext. The engine calls it when the
// handler returns.
func (c *Context) Invalidate() {
	c.valid.Store(false)
	c.cancel(ErrInvalidContext)
}

// Deadline implements context.Context.
func (c *Context) Deadline() (time.Time, bool) { return c.ctx.Deadline() }

// Done implements context.Context.
func (c *Context) Done() <-chan struct{} { return c.ctx.Done() }

// Err implements context.Context.
func (c *Context) Err() error { return c.ctx.Err() }

// Value implements context.Context.
func (c *Context) Value(key any) any { return c.ctx.Value(key) }

// Cause returns why the invocation was cancelled, or nil while it runs.
func (c *Context) Cause() error { return context.Cause(c.ctx) }
