package middleware

import (
	"sync"
	"sync/atomic"
)

// Limiter bounds how many handler attempts run at once across every
// partition of a client (max_concurrency). It sits inside Retry, so an
// event waiting out a backoff holds no slot.
//
// A free slot is taken with one atomic compare-and-swap; only when none is
// free does a run queue (under a mutex) and wait until a slot is handed to
// it. A release hands its slot straight to the oldest waiting run, if any,
// so waiting runs are served in order (a run arriving meanwhile may still
// take a slot freed with nobody waiting first).
type Limiter struct {
	id      uint32 // tells a permit of this limiter lent to an invocation (Lease)
	size    int64
	used    atomic.Int64
	waiting atomic.Int64 // len(queue) + len(ahead), readable without the lock

	mu    sync.Mutex
	queue waitQueue
	ahead waitQueue // served before queue (runs with Run.Front)
}

// waitQueue is a FIFO of the runs waiting for a slot in the limiter's
// Before (the release that hands one a slot resumes it). It reuses its
// array: runs come and go once per event when slots are scarce.
type waitQueue struct {
	buf  []*Run
	head int // buf[head:] waits, oldest first
}

func (q *waitQueue) len() int      { return len(q.buf) - q.head }
func (q *waitQueue) push(r *Run)   { q.buf = append(q.buf, r) }
func (q *waitQueue) items() []*Run { return q.buf[q.head:] }
func (q *waitQueue) oldest() *Run  { return q.buf[q.head] }

func (q *waitQueue) pop() *Run {
	w := q.buf[q.head]
	q.buf[q.head] = nil
	q.head++
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
		if cap(q.buf) > 1<<12 {
			q.buf = nil // a burst: do not keep its array
		}
	}
	return w
}

// keep drops the runs for which keep returns false, in place.
func (q *waitQueue) keep(keep func(*Run) bool) {
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
// The goroutine lends it to each invocation it runs (invocation.Lend),
// whose first attempt then takes no permit of its own: two atomic
// operations on one shared word per event, which both CPUs kept writing,
// become two per series of events. End the lease with EndLease once the
// series is over, unless an invocation dropped it (its Lent is 0 after
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

// Before implements Layer: the run goes on with a slot, at once if one is
// free (or its invocation was lent one, see Lease), otherwise once a
// release hands it one. A run continuing a key's work under way (Run.Front)
// waits ahead of the others.
//
// A waiting run whose invocation is cancelled leaves the queue when
// CancelWaiting runs, with the cancellation cause and no slot:
// subscribing every waiter to its context's cancellation cost more than
// the rest of an event's trip through the engine, and an invocation is
// cancelled only with its partition, which calls CancelWaiting once.
func (l *Limiter) Before(r *Run) Step {
	if r.ctx.Lent() == l.id || l.tryAcquire() {
		return Continue
	}
	l.mu.Lock()
	l.waiting.Add(1)
	// Checked again after announcing the wait: a release that did not see
	// the waiter has freed its slot before this check (see release).
	if l.tryAcquire() {
		l.waiting.Add(-1)
		l.mu.Unlock()
		return Continue
	}
	if r.front {
		l.ahead.push(r)
	} else {
		l.queue.push(r)
	}
	l.mu.Unlock()
	return Wait
}

// After implements Layer. The slot is released once the run's outcome has
// left the stack (Release), so that the key's next event is first in line
// for it. A permit lent to the invocation goes back to the limiter (and
// the invocation drops it) when the attempt failed, since a retry may wait
// out a backoff first, and when attempts queue for a permit, so that they
// need not wait for the lender's series of events to end.
func (l *Limiter) After(r *Run, err error) Step {
	if r.ctx.Lent() != l.id {
		r.ReleaseLater()
	} else if err != nil || l.waiting.Load() > 0 {
		r.ctx.DropPermit()
		r.ReleaseLater()
	}
	return Result(err)
}

// Release implements Releaser.
func (l *Limiter) Release(*Run) { l.release() }

// CancelWaiting implements WaitCanceller: runs waiting for a slot whose
// invocation is cancelled end with the cancellation cause, without one.
func (l *Limiter) CancelWaiting() {
	var cancelled []*Run
	keep := func(w *Run) bool {
		if w.ctx.Err() != nil {
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
	for _, r := range cancelled {
		r.Resume(Result(r.ctx.Cause()))
	}
}

// release frees a slot, handing it to the oldest waiter if there is one
// (a waiter whose invocation was cancelled meanwhile ends instead, with
// the cause). The runs handed a slot go on on the caller's goroutine,
// after the lock is released.
func (l *Limiter) release() {
	l.used.Add(-1)
	if l.waiting.Load() == 0 {
		return
	}
	var first *Run
	var more, cancelled []*Run
	l.mu.Lock()
	for l.ahead.len()+l.queue.len() > 0 {
		q := &l.queue
		if l.ahead.len() > 0 {
			q = &l.ahead
		}
		if w := q.oldest(); w.ctx.Err() != nil {
			q.pop()
			l.waiting.Add(-1)
			cancelled = append(cancelled, w)
			continue
		}
		if !l.tryAcquire() {
			break
		}
		w := q.pop()
		l.waiting.Add(-1)
		if first == nil {
			first = w
		} else {
			more = append(more, w)
		}
	}
	l.mu.Unlock()
	if first != nil {
		first.Resume(Continue)
	}
	for _, r := range more {
		r.Resume(Continue)
	}
	for _, r := range cancelled {
		r.Resume(Result(r.ctx.Cause()))
	}
}
