// Package invocation is the engine's side of a handler's context: the
// memory of an invocation and its attempts, cancellation with a cause,
// invalidation when the handler returns, the services of the partition
// (timers, the blocking hint) and the concurrency permit lent to it.
//
// Handlers see the same memory as an *event.Context, a type defined on
// this one that exposes only the handler API; the engine converts between
// the two with a plain conversion, which code outside the module cannot
// write because it cannot import this package.
package invocation

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prosody-events/prosody-go/core/fault"
)

// Why an invocation was cancelled. Context.Cause returns one of these.
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
//
// One or two Contexts are made per event on the hot path, so they are built
// to cost little when nobody waits on them: the Done channel, and the
// subscription to the parent's cancellation, are created only when first
// needed, in a separate part (waiters) that most contexts never allocate.
type Context struct {
	parent context.Context
	key    string
	valid  atomic.Bool
	// permit is the id of the scheduler whose permit the
	// goroutine invoking the handler lends this invocation (Lend), 0 when
	// none. Plain: only that goroutine reads and writes it.
	permit uint32
	// trace tells the trace context of the event being handled, which
	// timers scheduled from it store (see Trace); nil when there is none.
	trace Trace
	// state is why the context was cancelled, nil while it is not. It is
	// set once, by compare-and-swap: cancelling (which every event does
	// twice, when its attempt and its invocation end) takes no lock unless
	// something waits on the context.
	state atomic.Pointer[cancelState]
	// waiting is set once a Done channel, an AfterFunc or a timer exists;
	// cancel then takes mu to fire them. Set after they are registered and
	// before state is read again, so that cancel (which sets state, then
	// reads waiting) or the registering call sees the other.
	waiting atomic.Bool
	// heldSince is when the lent permit was granted, in the scheduler's
	// units, for a permit held before the invocation (LendHeld); 0 when
	// its time counts from the first attempt. Beside waiting, in what was
	// padding.
	heldSince uint32
	// spare is an attempt context allocated with this one (NewInvocation),
	// handed out by the first Attempt; nil once used or when there is none.
	// A plain field: the attempts of an invocation come one at a time, and
	// an atomic store here was a measurable part of every event.
	spare *Context
	// env is what the engine offers the handler (timers, the blocking
	// hint); shared by all contexts of a partition.
	env *Env

	mu sync.Mutex
	w  *waiters // made on first Done, AfterFunc or timeout
}

// cancelState is a cancellation's cause and the error Err returns
// (context.Canceled or DeadlineExceeded).
type cancelState struct{ cause, err error }

// invalidated is the state of every context whose handler returned, shared
// so that ending an event allocates nothing.
var invalidated = &cancelState{ErrInvalidContext, context.Canceled}

// waiters is the part of a Context needed only once something waits on it.
type waiters struct {
	fired      bool              // done closed and callbacks run, once
	done       chan struct{}     // made on first Done
	callbacks  map[uint64]func() // AfterFunc registrations
	nextID     uint64            //
	stopParent func() bool       // our subscription to parent, once made
}

// waitersLocked returns c.w, making it first. The caller holds c.mu.
func (c *Context) waitersLocked() *waiters {
	if c.w == nil {
		c.w = &waiters{}
	}
	return c.w
}

// closedChan is returned by Done once cancelled before anyone asked.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// NewContext returns a valid Context for an invocation on key, cancelled
// when parent is.
func NewContext(parent context.Context, key string) *Context {
	c := &Context{parent: parent, key: key}
	c.valid.Store(true)
	return c
}

// NewInvocation is NewContext for an invocation whose middleware will run
// it in attempts (Attempt): the context of the first attempt is allocated
// together with it, so the common single-attempt event costs one
// allocation, not two.
func NewInvocation(parent context.Context, key string) *Context {
	return new(Invocation).Init(parent, key)
}

// Invocation is the memory of an invocation's context and of its first
// attempt's. The engine embeds it in per-event state it allocates anyway,
// so that an event's contexts cost no allocation of their own.
type Invocation struct{ c, attempt Context }

// Context is the invocation's context, once Init has made it.
func (inv *Invocation) Context() *Context { return &inv.c }

// Init is NewInvocation in inv, which must be zero and used only once.
func (inv *Invocation) Init(parent context.Context, key string) *Context {
	c := &inv.c
	c.parent, c.key = parent, key
	c.spare = &inv.attempt
	c.valid.Store(true)
	return c
}

// Attempt returns a child Context for one attempt, cancelled when c is but
// not the reverse: cancelling the attempt (CancelTimeout) leaves c usable
// for a later attempt. Invalidate it when the attempt ends. The attempts of
// an invocation must not overlap: calls of Attempt on one Context must not
// be concurrent.
func (c *Context) Attempt() *Context {
	child := c.spare
	c.spare = nil
	if child == nil {
		child = &Context{}
	}
	child.parent, child.key, child.env, child.trace = c, c.key, c.env, c.trace
	child.valid.Store(true)
	return child
}

// Lend records that the goroutine about to invoke the handler holds a
// permit of the scheduler with this id for the invocation (see
// middleware.Scheduler.Lease). Only that goroutine may call it, before the
// handler runs.
func (c *Context) Lend(scheduler uint32) { c.permit, c.heldSince = scheduler, 0 }

// LendHeld is Lend for a permit granted before the invocation began, at
// since (in the scheduler's units, non-zero), so that the scheduler charges
// the time it was held before the attempt reached it.
func (c *Context) LendHeld(scheduler, since uint32) { c.permit, c.heldSince = scheduler, since }

// TakeHeldSince returns LendHeld's since, once: 0 after the first call,
// and for a permit lent with Lend.
func (c *Context) TakeHeldSince() uint32 {
	s := c.heldSince
	c.heldSince = 0
	return s
}

// Lent is the id of the scheduler whose permit the invocation was lent and
// still has, 0 if none.
func (c *Context) Lent() uint32 { return c.permit }

// DropPermit records that the scheduler took the lent permit back, so that
// later attempts take their own.
func (c *Context) DropPermit() { c.permit = 0 }

// NewScope returns a cancellable Context that is not tied to any event, to
// be the parent of invocation contexts (a partition's, for example).
//
// Using a Context rather than context.WithCancelCause as the parent keeps
// context.Cause truthful for user code: given a custom context, the standard
// library looks up the nearest standard cancel context through Value and
// would report that parent's cause (nil) for a cancelled invocation. With no
// standard cancel context in the chain it falls back to Err instead.
func NewScope() *Context { return NewContext(context.Background(), "") }

// CancelTimeout cancels the context because its time limit ran out: Cause
// becomes ErrTimeout and Err context.DeadlineExceeded.
func (c *Context) CancelTimeout() { c.cancel(ErrTimeout, context.DeadlineExceeded) }

// Key is the key of the event being handled.
func (c *Context) Key() string { return c.key }

// ShouldCancel reports whether the handler should stop as soon as it can.
func (c *Context) ShouldCancel() bool { return c.Err() != nil }

// OnCancel returns a channel closed on cancellation (the same as Done).
func (c *Context) OnCancel() <-chan struct{} { return c.Done() }

// Cancel cancels the invocation with the given cause.
func (c *Context) Cancel(cause error) { c.cancel(cause, context.Canceled) }

// Valid reports whether the invocation is still running.
func (c *Context) Valid() bool { return c.valid.Load() }

// Check returns nil while the context may be used, ErrInvalidContext after
// its handler returned, and the cancellation cause once cancelled.
func (c *Context) Check() error {
	if !c.valid.Load() {
		return ErrInvalidContext
	}
	if c.Err() != nil {
		return c.Cause()
	}
	return nil
}

// Invalidate ends the invocation: the context is cancelled and every later
// operation on it fails with ErrInvalidContext. The engine calls it when the
// handler returns.
func (c *Context) Invalidate() {
	c.valid.Store(false)
	c.cancel(ErrInvalidContext, context.Canceled)
}

// Cause returns why the invocation was cancelled, or nil while it runs.
func (c *Context) Cause() error {
	if st := c.state.Load(); st != nil {
		return st.cause
	}
	if c.parent.Err() != nil {
		return causeOf(c.parent)
	}
	return nil
}

func causeOf(ctx context.Context) error {
	if c, ok := ctx.(*Context); ok {
		return c.Cause()
	}
	return context.Cause(ctx)
}

// Deadline implements context.Context.
func (c *Context) Deadline() (time.Time, bool) { return c.parent.Deadline() }

// Err implements context.Context.
func (c *Context) Err() error {
	if st := c.state.Load(); st != nil {
		return st.err
	}
	return c.parent.Err()
}

// Value implements context.Context. A trace that is a ValueTrace answers
// it (see SetTrace).
func (c *Context) Value(key any) any {
	if v, ok := c.trace.(ValueTrace); ok {
		return v.Value(key)
	}
	return c.parent.Value(key)
}

// ValueTrace is a Trace that carries values too: the event's span, which
// a handler's context then carries (Value answers from it), while its
// cancellation still follows the parent. Its values are the parent's
// with the span's added (see Parent). One field holds both: every event
// allocates two Contexts, whose size class a field more would change.
type ValueTrace interface {
	Trace
	Value(key any) any
}

// Parent is the context c was made from.
func (c *Context) Parent() context.Context { return c.parent }

// SetTrace replaces the trace context timers scheduled from the
// invocation store (see SetEnv), and with a ValueTrace what Value
// answers; attempts made afterwards take it.
func (c *Context) SetTrace(t Trace) { c.trace = t }

// Done implements context.Context.
func (c *Context) Done() <-chan struct{} {
	c.mu.Lock()
	if c.w != nil && c.w.done != nil {
		defer c.mu.Unlock()
		return c.w.done
	}
	if c.state.Load() != nil || (c.w != nil && c.w.fired) {
		c.mu.Unlock()
		return closedChan
	}
	w := c.waitersLocked()
	w.done = make(chan struct{})
	c.subscribeLocked()
	c.waiting.Store(true)
	c.mu.Unlock()
	if c.state.Load() != nil {
		// Cancelled meanwhile, perhaps before it saw waiting. The channel
		// closes now; callbacks run elsewhere, not on a goroutine that may
		// hold a lock they take.
		c.fire(true)
	}
	return w.done
}

// AfterFunc arranges for f to run once c is cancelled, and returns a
// function that unregisters it. Implementing it lets context.AfterFunc,
// context.WithCancel and children made by WithTimeout follow this context
// without a goroutine each.
//
// As with context.AfterFunc, f runs in a goroutine of its own when c is
// already cancelled. The standard library relies on that: it registers a
// child context here while holding that child's lock, with a callback that
// takes the lock; calling it on the spot deadlocked a handler whose first
// Done (or WithCancel) raced with its partition's revocation.
func (c *Context) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.state.Load() != nil || (c.w != nil && c.w.fired) {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	w := c.waitersLocked()
	if w.callbacks == nil {
		w.callbacks = make(map[uint64]func(), 1)
	}
	id := w.nextID
	w.nextID++
	w.callbacks[id] = f
	c.subscribeLocked()
	c.waiting.Store(true)
	c.mu.Unlock()
	if c.state.Load() != nil {
		// Cancelled meanwhile, perhaps before it saw waiting; callbacks
		// not on this goroutine, for the reason above.
		c.fire(true)
	}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := w.callbacks[id]
		delete(w.callbacks, id)
		return ok
	}
}

// subscribeLocked makes the parent's cancellation reach this context. It
// is needed only once something waits on this context.
func (c *Context) subscribeLocked() {
	w := c.waitersLocked()
	if w.stopParent != nil {
		return
	}
	parent := c.parent
	w.stopParent = context.AfterFunc(parent, func() { c.cancel(causeOf(parent), parent.Err()) })
}

// cancel records the first cause, then closes Done and runs the callbacks
// if anything waits.
func (c *Context) cancel(cause, err error) {
	if cause == nil {
		cause = err
	}
	st := invalidated
	if cause != st.cause || err != st.err {
		st = &cancelState{cause, err}
	}
	if !c.state.CompareAndSwap(nil, st) {
		return
	}
	if c.waiting.Load() {
		c.fire(false)
	}
}

// fire closes Done, runs the callbacks and drops the subscriptions of a
// cancelled context, once: cancel and a Done or AfterFunc call that raced
// with it may both call it. With elsewhere, the callbacks and the
// unsubscribing run on a new goroutine: the caller is not the canceller
// and may hold locks they take.
func (c *Context) fire(elsewhere bool) {
	c.mu.Lock()
	w := c.w
	if w == nil || w.fired {
		c.mu.Unlock()
		return
	}
	w.fired = true
	if w.done != nil {
		close(w.done)
	}
	callbacks := w.callbacks
	w.callbacks = nil
	stop := w.stopParent
	c.mu.Unlock()
	finish := func() {
		if stop != nil {
			stop()
		}
		for _, f := range callbacks {
			f()
		}
	}
	if elsewhere && (stop != nil || len(callbacks) > 0) {
		go finish()
		return
	}
	finish()
}
