package scheduler

import (
	"sync"
	"sync/atomic"
)

// order is a policy: which waiting attempt goes next. Its methods are
// called under the scheduler's mutex.
type order[W any] interface {
	push(t task[W], now int64)
	// pop removes and returns the attempt that goes next; len() > 0.
	pop(now int64) task[W]
	len() int
	// remove drops the attempts for which drop reports true, appending
	// them to out.
	remove(drop func(W) bool, out []W) []W
}

// task is a waiting attempt.
type task[W any] struct {
	w   W
	key Key
	d   Demand
	// lv is the key's virtual time when the attempt started waiting, as
	// log2 of seconds plus the half-lives since the scheduler's start
	// (see Fair): comparable between attempts without decaying either.
	lv  float64
	enq int64 // when it started waiting
	seq uint64
	due bool // a timer's first attempt (Callbacks.Due)
}

// permits counts a scheduler's permits and runs its policy over the
// attempts that wait for one.
type permits[W any] struct {
	size    int64
	used    atomic.Int64
	waiting atomic.Int64 // order.len(), readable without the lock
	cb      Callbacks[W]
	clock   func() int64

	mu    sync.Mutex
	order order[W]
	seq   uint64
}

func newPermits[W any](n int, cb Callbacks[W], clock func() int64, o order[W]) permits[W] {
	if clock == nil {
		clock = systemClock
	}
	return permits[W]{size: int64(max(n, 1)), cb: cb, clock: clock, order: o}
}

func (p *permits[W]) tryAcquire() bool {
	for {
		u := p.used.Load()
		if u >= p.size {
			return false
		}
		if p.used.CompareAndSwap(u, u+1) {
			return true
		}
	}
}

// acquire is Scheduler.Acquire, with lv the fair policy's snapshot of the
// key's virtual time.
func (p *permits[W]) acquire(w W, d Demand, lv func(key Key, now int64) float64) bool {
	if p.waiting.Load() == 0 && p.tryAcquire() {
		return true
	}
	// Every acquire and release of a busy scheduler takes p.mu, so what
	// needs no lock is done before it: the key's hash and its virtual time
	// (a lock-free table; lv does not depend on when it is read, the
	// decay being in its origin). The policy's own clock is read under the
	// lock: its slices and a due timer's start assume that the attempts
	// it is given start in the order they come.
	t := task[W]{w: w, d: d}
	if lv != nil {
		t.key = p.cb.Key(w)
		t.lv = lv(t.key, p.clock())
		t.due = p.cb.Due != nil && p.cb.Due(w)
	}
	p.mu.Lock()
	now := p.clock()
	t.enq = now
	p.seq++
	mine := p.seq
	t.seq = mine
	p.order.push(t, now)
	p.waiting.Add(1)
	// A permit may have been freed by a release that did not see this
	// attempt wait yet: the policy picks who gets it, this attempt or one
	// that waited before it.
	self := p.dispatchLocked(now, mine)
	return self
}

// release is Scheduler.Release.
func (p *permits[W]) release() {
	p.used.Add(-1)
	if p.waiting.Load() == 0 {
		return
	}
	p.mu.Lock()
	p.dispatchLocked(p.clock(), 0)
}

// dispatchLocked hands free permits to the attempts the policy picks, and
// unlocks p.mu. It reports whether the attempt numbered self got one: that
// attempt is the caller's, which goes on without a callback.
func (p *permits[W]) dispatchLocked(now int64, self uint64) (selfGranted bool) {
	var grantBuf, goneBuf [2]W
	granted, gone := grantBuf[:0], goneBuf[:0]
	for p.order.len() > 0 && p.tryAcquire() {
		t := p.order.pop(now)
		p.waiting.Add(-1)
		switch {
		case t.seq == self:
			selfGranted = true
		case p.cb.Gone(t.w):
			p.used.Add(-1) // the permit goes back to the pool
			gone = append(gone, t.w)
		default:
			granted = append(granted, t.w)
		}
	}
	p.mu.Unlock()
	defer callEach(p.cb.Dismissed, gone) // even if a Granted panics
	callEach(p.cb.Granted, granted)
	return selfGranted
}

// callEach calls f for every w, in order. Should f panic, the rest are
// still called before the panic goes on: each of them holds a permit, or
// has left the queue, and nothing else would ever tell it.
func callEach[W any](f func(W), ws []W) {
	for i, w := range ws {
		completed := false
		func() {
			defer func() {
				if !completed {
					callEach(f, ws[i+1:])
				}
			}()
			f(w)
			completed = true
		}()
	}
}

// cancel is Scheduler.Cancel.
func (p *permits[W]) cancel() {
	p.mu.Lock()
	gone := p.order.remove(p.cb.Gone, nil)
	p.waiting.Add(-int64(len(gone)))
	p.mu.Unlock()
	callEach(p.cb.Dismissed, gone)
}

func (p *permits[W]) leaseable() bool { return p.waiting.Load() == 0 && p.tryAcquire() }

// Waiting implements Scheduler.
func (p *permits[W]) Waiting() int { return int(p.waiting.Load()) }

// InUse implements Scheduler.
func (p *permits[W]) InUse() int { return int(p.used.Load()) }

// Size implements Scheduler.
func (p *permits[W]) Size() int { return int(p.size) }

// Now implements Scheduler.
func (p *permits[W]) Now() int64 { return p.clock() }
