// Package keyqueue orders events per key: at most one event of a key is in
// flight, later events of that key wait in a FIFO, and events of different
// keys run concurrently. Messages and timers share one Queue, so a key's
// timer waits behind its messages and the reverse.
//
// The queue starts nothing itself. Push reports whether the caller should
// start the event now; Done hands back the key's next event, if any. This
// keeps the queue a plain data structure that is easy to test, and lets the
// partition decide how events run.
package keyqueue

import "sync"

// Queue is safe for concurrent use.
type Queue[E any] struct {
	mu     sync.Mutex
	keys   map[string]*fifo[E] // present while the key has an event in flight
	free   []*fifo[E]          // recycled FIFOs, so hot keys do not allocate
	queued int
	closed bool
}

type fifo[E any] struct {
	items []E
	head  int
}

// New returns an empty Queue.
func New[E any]() *Queue[E] { return &Queue[E]{keys: make(map[string]*fifo[E])} }

// Push adds e for key. It returns true when the key was idle: the caller
// must start e now. Otherwise e waits until the key's earlier events are
// done. After Close, Push returns false and keeps nothing.
func (q *Queue[E]) Push(key string, e E) (startNow bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	f, busy := q.keys[key]
	if !busy {
		q.keys[key] = q.newFIFO()
		return true
	}
	f.items = append(f.items, e)
	q.queued++
	return false
}

// Done records that key's in-flight event finished. If another event of the
// key is waiting, it is returned and is now in flight: the caller must start
// it. After Close nothing more is started.
func (q *Queue[E]) Done(key string) (next E, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	f, busy := q.keys[key]
	if !busy {
		return next, false
	}
	if q.closed || f.head == len(f.items) {
		delete(q.keys, key)
		q.recycle(f)
		return next, false
	}
	next = f.items[f.head]
	var zero E
	f.items[f.head] = zero // let the event be collected once it has run
	f.head++
	q.queued--
	return next, true
}

// Close stops the queue starting anything: events still waiting are
// returned, in no particular order, so the caller can account for them
// (their offsets stay uncommitted and the next owner redelivers them).
// Events in flight still report Done.
func (q *Queue[E]) Close() (dropped []E) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for _, f := range q.keys {
		dropped = append(dropped, f.items[f.head:]...)
		var zero E
		for i := range f.items {
			f.items[i] = zero
		}
		f.items, f.head = f.items[:0], 0
	}
	q.queued = 0
	return dropped
}

// InFlight is the number of keys with an event in flight.
func (q *Queue[E]) InFlight() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.keys)
}

// Waiting is the number of events queued behind an in-flight event.
func (q *Queue[E]) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.queued
}

func (q *Queue[E]) newFIFO() *fifo[E] {
	if n := len(q.free); n > 0 {
		f := q.free[n-1]
		q.free = q.free[:n-1]
		return f
	}
	return &fifo[E]{}
}

// recycle keeps a bounded number of empty FIFOs; large ones are dropped so
// one burst on a hot key does not pin its memory forever.
func (q *Queue[E]) recycle(f *fifo[E]) {
	if cap(f.items) > 64 || len(q.free) >= 256 {
		return
	}
	f.items, f.head = f.items[:0], 0
	q.free = append(q.free, f)
}
