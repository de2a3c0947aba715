package middleware

import (
	"sync"
	"sync/atomic"

	"github.com/prosody-events/prosody-go/core/event"
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
	size    int64
	used    atomic.Int64
	waiting atomic.Int64 // len(queue) + len(ahead), readable without the lock

	mu    sync.Mutex
	queue []waiter // oldest first
	ahead []waiter // served before queue (acquireAsync with front), oldest first
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
	return &Limiter{size: int64(n)}
}

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
	l.queue = append(l.queue, waiter{ch: ch})
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
		l.ahead = append(l.ahead, waiter{async: w, ctx: ctx})
	} else {
		l.queue = append(l.queue, waiter{async: w, ctx: ctx})
	}
	l.mu.Unlock()
}

// CancelWaiting ends the waits of asynchronous attempts whose context is
// cancelled: each is called with the cancellation cause, without a slot.
func (l *Limiter) CancelWaiting() {
	var cancelled []waiter
	l.mu.Lock()
	l.ahead = l.dropCancelledLocked(l.ahead, &cancelled)
	l.queue = l.dropCancelledLocked(l.queue, &cancelled)
	l.mu.Unlock()
	for _, w := range cancelled {
		w.async.slot(w.ctx.Cause())
	}
}

// dropCancelledLocked moves the cancelled asynchronous waiters of q to
// cancelled and returns the rest. The caller holds l.mu.
func (l *Limiter) dropCancelledLocked(q []waiter, cancelled *[]waiter) []waiter {
	kept := q[:0]
	for _, w := range q {
		if w.async != nil && w.ctx.Err() != nil {
			*cancelled = append(*cancelled, w)
			l.waiting.Add(-1)
			continue
		}
		kept = append(kept, w)
	}
	clear(q[len(kept):])
	return kept
}

// popLocked takes the next waiter: ahead first. The caller holds l.mu and
// knows one waits.
func (l *Limiter) popLocked() waiter {
	q := &l.queue
	if len(l.ahead) > 0 {
		q = &l.ahead
	}
	w := (*q)[0]
	(*q)[0] = waiter{}
	*q = (*q)[1:]
	if len(*q) == 0 {
		*q = (*q)[:0:0] // let the emptied array go
	}
	return w
}

// remove takes the sleeper waiting on ch out of the queue, reporting
// whether it was still there (false: a slot was handed to it).
func (l *Limiter) remove(ch chan struct{}) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, q := range l.queue {
		if q.ch == ch {
			l.queue = append(l.queue[:i], l.queue[i+1:]...)
			l.waiting.Add(-1)
			return true
		}
	}
	return false
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
	for len(l.ahead)+len(l.queue) > 0 && l.tryAcquire() {
		w := l.popLocked()
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
			if err := l.acquire(ctx); err != nil {
				return err
			}
			defer l.release()
			return next(ctx, ev)
		}
	}
}
