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
	waiting atomic.Int64 // len(queue), readable without the lock

	mu    sync.Mutex
	queue []*waiter // oldest first
}

// waiter is an attempt waiting for a slot: a sleeping goroutine (ch) or an
// asynchronous attempt to start when its slot is handed over (fn).
type waiter struct {
	ch chan struct{}
	fn func(error)
}

// NewLimiter returns a Limiter with n slots (n >= 1).
func NewLimiter(n int) *Limiter {
	if n < 1 {
		n = 1
	}
	return &Limiter{size: int64(n)}
}

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
	w := &waiter{ch: make(chan struct{}, 1)}
	l.queue = append(l.queue, w)
	l.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
	}
	if l.remove(w) {
		return ctx.Cause()
	}
	// A slot was handed over just as the wait ended: pass it on.
	<-w.ch
	l.release()
	return ctx.Cause()
}

// acquireAsync calls start once a slot is taken for it, at once if one is
// free, otherwise on the goroutine or thread of the release that hands it
// one. If ctx is cancelled first, start gets the cancellation cause and no
// slot. It never blocks.
func (l *Limiter) acquireAsync(ctx *event.Context, start func(error)) {
	if l.tryAcquire() {
		start(nil)
		return
	}
	l.mu.Lock()
	l.waiting.Add(1)
	if l.tryAcquire() {
		l.waiting.Add(-1)
		l.mu.Unlock()
		start(nil)
		return
	}
	w := &waiter{fn: start}
	l.queue = append(l.queue, w)
	l.mu.Unlock()
	// Registered after queueing: if the slot comes first, remove fails and
	// the callback does nothing; it goes away with the invocation.
	ctx.AfterFunc(func() {
		if l.remove(w) {
			start(ctx.Cause())
		}
	})
}

// remove takes w out of the queue, reporting whether it was still there
// (false: a slot was handed to it).
func (l *Limiter) remove(w *waiter) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, q := range l.queue {
		if q == w {
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
	var start []func(error)
	l.mu.Lock()
	for len(l.queue) > 0 && l.tryAcquire() {
		w := l.queue[0]
		l.queue[0] = nil
		l.queue = l.queue[1:]
		l.waiting.Add(-1)
		if w.fn != nil {
			start = append(start, w.fn)
		} else {
			w.ch <- struct{}{}
		}
	}
	if len(l.queue) == 0 {
		l.queue = nil
	}
	l.mu.Unlock()
	for _, fn := range start {
		fn(nil)
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
