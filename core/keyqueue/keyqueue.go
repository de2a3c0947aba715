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

import (
	"hash/maphash"
	"sync"
)

// Queue is safe for concurrent use.
type Queue[E any] struct {
	mu   sync.Mutex
	keys Keys[E]
}

// New returns an empty Queue.
func New[E any]() *Queue[E] { return &Queue[E]{keys: MakeKeys[E]()} }

// Push adds e for key. It returns true when the key was idle: the caller
// must start e now. Otherwise e waits until the key's earlier events are
// done. After Close, Push returns false and keeps nothing.
func (q *Queue[E]) Push(key string, e E) (startNow bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.keys.Push(q.keys.Hash(key), e)
}

// Done records that key's in-flight event finished. If another event of the
// key is waiting, it is returned and is now in flight: the caller must start
// it. After Close nothing more is started.
func (q *Queue[E]) Done(key string) (next E, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.keys.Done(q.keys.Hash(key))
}

// Close stops the queue starting anything: events still waiting are
// returned, in no particular order, so the caller can account for them
// (their offsets stay uncommitted and the next owner redelivers them).
// Events in flight still report Done.
func (q *Queue[E]) Close() (dropped []E) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.keys.Close()
}

// InFlight is the number of keys with an event in flight.
func (q *Queue[E]) InFlight() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.keys.InFlight()
}

// Waiting is the number of events queued behind an in-flight event.
func (q *Queue[E]) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.keys.Waiting()
}

// Keys is Queue without its lock, for callers that already serialise
// access under a lock of their own (and so take one lock, not two, per
// event). Make it with MakeKeys.
//
// Keys identifies a key by its 64-bit hash (Hash, seeded per Keys), which
// the caller computes once per event: distinct keys whose hashes collide
// simply run one after another, which keeps every guarantee and costs no
// string comparisons.
type Keys[E any] struct {
	seed   maphash.Seed
	keys   map[uint64]*fifo[E] // present while the key has an event in flight; nil: none waiting
	free   []*fifo[E]          // recycled FIFOs, so hot keys do not allocate
	queued int
	closed bool
}

type fifo[E any] struct {
	items []E
	head  int
}

// MakeKeys returns an empty Keys.
func MakeKeys[E any]() Keys[E] {
	return Keys[E]{seed: maphash.MakeSeed(), keys: make(map[uint64]*fifo[E])}
}

// Hash is the hash that identifies key in Push and Done. It needs no lock.
func (q *Keys[E]) Hash(key string) uint64 { return maphash.String(q.seed, key) }

// Push is Queue.Push for the key with hash h.
func (q *Keys[E]) Push(h uint64, e E) (startNow bool) {
	if q.closed {
		return false
	}
	f, busy := q.keys[h]
	if !busy {
		q.keys[h] = nil
		return true
	}
	if f == nil {
		f = q.newFIFO()
		q.keys[h] = f
	}
	f.items = append(f.items, e)
	q.queued++
	return false
}

// Done is Queue.Done for the key with hash h.
func (q *Keys[E]) Done(h uint64) (next E, ok bool) {
	f, busy := q.keys[h]
	if !busy {
		return next, false
	}
	if f == nil || q.closed || f.head == len(f.items) {
		delete(q.keys, h)
		if f != nil {
			q.recycle(f)
		}
		return next, false
	}
	next = f.items[f.head]
	var zero E
	f.items[f.head] = zero // let the event be collected once it has run
	f.head++
	q.queued--
	return next, true
}

// Close is Queue.Close.
func (q *Keys[E]) Close() (dropped []E) {
	q.closed = true
	for _, f := range q.keys {
		if f == nil {
			continue
		}
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

// InFlight is Queue.InFlight.
func (q *Keys[E]) InFlight() int { return len(q.keys) }

// Waiting is Queue.Waiting.
func (q *Keys[E]) Waiting() int { return q.queued }

func (q *Keys[E]) newFIFO() *fifo[E] {
	if n := len(q.free); n > 0 {
		f := q.free[n-1]
		q.free = q.free[:n-1]
		return f
	}
	return &fifo[E]{}
}

// recycle keeps a bounded number of empty FIFOs; large ones are dropped so
// one burst on a hot key does not pin its memory forever.
func (q *Keys[E]) recycle(f *fifo[E]) {
	if cap(f.items) > 64 || len(q.free) >= 256 {
		return
	}
	f.items, f.head = f.items[:0], 0
	q.free = append(q.free, f)
}
