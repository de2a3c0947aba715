package middleware

import (
	"sync"
	"sync/atomic"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/permit"
)

// Limiter bounds how many handler attempts run at once across every
// partition of a client (max_concurrency). It sits inside Retry, so an
// event waiting out a backoff holds no slot.
//
// A free slot is taken with one atomic compare-and-swap; only when none is
// free does an attempt queue (under a mutex) and sleep until a slot is
// handed to it. A release hands its slot straight to the oldest sleeper, if
// any, so sleepers are served in order (an attempt arriving meanwhile may
// still take a slot freed without sleepers first).
type Limiter struct {
	id      uint32 // tells a permit of this limiter lent to an invocation (Lease)
	size    int64
	used    atomic.Int64
	waiting atomic.Int64 // len(queue) + len(ahead), readable without the lock

	mu    sync.Mutex
	queue waitQueue
	ahead waitQueue // served before queue (acquireAsync with front)
}

// waitQueue is a FIFO of waiters that reuses its array: waiters come and go
// once per event when slots are scarce.
type waitQueue struct {
	buf  []waiter
	head int // buf[head:] waits, oldest first
}

func (q *waitQueue) len() int        { return len(q.buf) - q.head }
func (q *waitQueue) push(w waiter)   { q.buf = append(q.buf, w) }
func (q *waitQueue) items() []waiter { return q.buf[q.head:] }

func (q *waitQueue) pop() waiter {
	w := q.buf[q.head]
	q.buf[q.head] = waiter{}
	q.head++
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
		if cap(q.buf) > 1<<12 {
			q.buf = nil // a burst: do not keep its array
		}
	}
	return w
}

// keep drops the waiters for which keep returns false, in place.
func (q *waitQueue) keep(keep func(waiter) bool) {
	kept := q.buf[:q.head]
	for _, w := range q.items() {
		if keep(w) {
			kept = append(kept, w)
		}
	}
	clear(q.buf[len(kept):])
	q.buf = kept
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	}
}

// waiter is an attempt waiting for a slot: a sleeping goroutine (ch) or an
// asynchronous attempt (async, ctx) started when its slot is handed over.
type waiter struct {
	ch    chan struct{}
	async slotWaiter
	ctx   *event.Context
}

// slotWaiter is an asynchronous attempt waiting for a slot: slot(nil) when
// one is handed over, slot(cause) when its wait is cancelled.
type slotWaiter interface {
	slot(err error)
}

// NewLimiter returns a Limiter with n slots (n >= 1).
func NewLimiter(n int) *Limiter {
	if n < 1 {
		n = 1
	}
	return &Limiter{id: limiterIDs.Add(1), size: int64(n)}
}

// limiterIDs numbers limiters from 1: 0 means no lent permit.
var limiterIDs atomic.Uint32

// ID identifies the limiter's permits lent to an invocation (Lease).
func (l *Limiter) ID() uint32 { return l.id }

// Lease takes a permit for a goroutine that runs handlers one after
// another (a partition's driver), if one is free and nobody waits for it.
// The goroutine lends it to each invocation it runs (internal/permit),
// whose first attempt then takes no permit of its own: two atomic
// operations on one shared word per event, which both CPUs kept writing,
// become two per series of events. End the lease with EndLease once the
// series is over, unless an invocation dropped it (permit.Lent is 0 after
// the handler): its attempt failed, and a retry's backoff must hold no
// permit.
func (l *Limiter) Lease() bool {
	return l.waiting.Load() == 0 && l.tryAcquire()
}

// EndLease releases a leased permit.
func (l *Limiter) EndLease() { l.release() }

// shortWait reports whether an attempt asking for a slot now would wait
// behind no more than a few rounds of the slots (16 times as many attempts
// as there are slots).
func (l *Limiter) shortWait() bool { return l.waiting.Load() < 16*l.size }

// InUse is the number of slots taken.
func (l *Limiter) InUse() int { return int(l.used.Load()) }

func (l *Limiter) tryAcquire() bool {
	for {
		u := l.used.Load()
		if u >= l.size {
			return false
		}
		if l.used.CompareAndSwap(u, u+1) {
			return true
		}
	}
}

// acquire takes a slot, waiting for one if needed. If ctx is cancelled
// first, it returns the cancellation cause without a slot.
func (l *Limiter) acquire(ctx *event.Context) error {
	if l.tryAcquire() {
		return nil
	}
	l.mu.Lock()
	l.waiting.Add(1)
	// Checked again after announcing the wait: a release that did not see
	// the waiter has freed its slot before this check (see release).
	if l.tryAcquire() {
		l.waiting.Add(-1)
		l.mu.Unlock()
		return nil
	}
	ch := make(chan struct{}, 1)
	l.queue.push(waiter{ch: ch})
	l.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	if l.remove(ch) {
		return ctx.Cause()
	}
	// A slot was handed over just as the wait ended: pass it on.
	<-ch
	l.release()
	return ctx.Cause()
}

// acquireAsync calls start once a slot is taken for it, at once if one is
// free, otherwise on the goroutine or thread of the release that hands it
// one. It never blocks. A waiting attempt whose ctx is cancelled leaves
// the queue when CancelWaiting runs (its start then gets the cause and no
// slot): subscribing every waiter to its context's cancellation cost more
// than the rest of an event's trip through the engine, and an invocation
// is cancelled only with its partition, which calls CancelWaiting once.
//
// A waiter with front set goes ahead of every other waiter.
func (l *Limiter) acquireAsync(ctx *event.Context, w slotWaiter, front bool) {
	if l.tryAcquire() {
		w.slot(nil)
		return
	}
	l.mu.Lock()
	l.waiting.Add(1)
	if l.tryAcquire() {
		l.waiting.Add(-1)
		l.mu.Unlock()
		w.slot(nil)
		return
	}
	if front {
		l.ahead.push(waiter{async: w, ctx: ctx})
	} else {
		l.queue.push(waiter{async: w, ctx: ctx})
	}
	l.mu.Unlock()
}

// CancelWaiting ends the waits of asynchronous attempts whose context is
// cancelled: each is called with the cancellation cause, without a slot.
func (l *Limiter) CancelWaiting() {
	var cancelled []waiter
	keep := func(w waiter) bool {
		if w.async != nil && w.ctx.Err() != nil {
			cancelled = append(cancelled, w)
			l.waiting.Add(-1)
			return false
		}
		return true
	}
	l.mu.Lock()
	l.ahead.keep(keep)
	l.queue.keep(keep)
	l.mu.Unlock()
	for _, w := range cancelled {
		w.async.slot(w.ctx.Cause())
	}
}

// remove takes the sleeper waiting on ch out of the queue, reporting
// whether it was still there (false: a slot was handed to it).
func (l *Limiter) remove(ch chan struct{}) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	found := false
	l.queue.keep(func(w waiter) bool {
		if w.ch == ch {
			found = true
			return false
		}
		return true
	})
	if found {
		l.waiting.Add(-1)
	}
	return found
}

// release frees a slot, handing it to the oldest waiter if there is one.
// Asynchronous waiters start on the caller's goroutine, after the lock is
// released.
func (l *Limiter) release() {
	l.used.Add(-1)
	if l.waiting.Load() == 0 {
		return
	}
	var first slotWaiter
	var more []slotWaiter
	l.mu.Lock()
	for l.ahead.len()+l.queue.len() > 0 && l.tryAcquire() {
		var w waiter
		if l.ahead.len() > 0 {
			w = l.ahead.pop()
		} else {
			w = l.queue.pop()
		}
		l.waiting.Add(-1)
		switch {
		case w.async == nil:
			w.ch <- struct{}{}
		case first == nil:
			first = w.async
		default:
			more = append(more, w.async)
		}
	}
	l.mu.Unlock()
	if first != nil {
		first.slot(nil)
	}
	for _, w := range more {
		w.slot(nil)
	}
}

// Middleware takes a slot for the inner call. If the context is cancelled
// while it waits, the cancellation cause is returned without running.
func (l *Limiter) Middleware() Middleware {
	return func(next Invoker) Invoker {
		return func(ctx *event.Context, ev event.Event) error {
			if permit.Lent(ctx) == l.id {
				return l.lent(ctx, ev, next)
			}
			if err := l.acquire(ctx); err != nil {
				return err
			}
			defer l.release()
			return next(ctx, ev)
		}
	}
}

// lent runs an attempt on the permit its caller lent it. The permit goes
// back to the limiter (and the invocation drops it) when the attempt
// failed, since a retry may wait out a backoff first, and when attempts
// queue for a permit, so that they need not wait for the caller's series
// of events to end.
func (l *Limiter) lent(ctx *event.Context, ev event.Event, next Invoker) error {
	err := next(ctx, ev)
	if err != nil || l.waiting.Load() > 0 {
		permit.Drop(ctx)
		l.release()
	}
	return err
}
