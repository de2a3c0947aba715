package emitter

import (
	"sync"
	"sync/atomic"

	"github.com/prosody-events/prosody-go/core/internal/fifo"
)

// queue is the bounded buffer between Observe and the emitter's goroutine.
//
// A channel of Capacity records would do the same, but its whole array
// (9 MiB at the default capacity) is allocated up front and, since a
// channel's ring advances through all of it, becomes resident in every
// client after the first Capacity events, however few wait at a time. This
// queue's array grows with what actually waits and is let go once a burst
// has drained.
type queue struct {
	mu    sync.Mutex
	items fifo.Queue[record]
	limit int
	size  atomic.Int64 // items.Len(), for reads without the lock
	// ready holds a token while records may be queued: a push into an
	// empty queue leaves one, and the consumer takes it before it pops and
	// leaves one again if it stops popping while records remain.
	ready chan struct{}
}

func newQueue(limit int) *queue {
	return &queue{limit: limit, ready: make(chan struct{}, 1)}
}

// push queues r; false when the queue is full.
func (q *queue) push(r record) bool {
	q.mu.Lock()
	if q.items.Len() >= q.limit {
		q.mu.Unlock()
		return false
	}
	q.items.Push(r)
	q.size.Store(int64(q.items.Len()))
	first := q.items.Len() == 1
	q.mu.Unlock()
	if first {
		q.signal()
	}
	return true
}

func (q *queue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *queue) pop() (record, bool) {
	q.mu.Lock()
	r, ok := q.items.Pop()
	q.size.Store(int64(q.items.Len()))
	q.mu.Unlock()
	return r, ok
}

func (q *queue) len() int { return int(q.size.Load()) }

func (q *queue) full() bool { return q.len() >= q.limit }

// clear empties the queue and returns how many records it dropped.
func (q *queue) clear() int {
	q.mu.Lock()
	n := q.items.Len()
	q.items = fifo.Queue[record]{}
	q.size.Store(0)
	q.mu.Unlock()
	return n
}
