// Package fifo holds Queue, a first-in-first-out queue that reuses its
// array: the executor's run queue, a driver's ready runs and the
// first-come-first-served scheduler's waiting attempts.
package fifo

// Queue is a FIFO of T. The zero value is an empty queue.
type Queue[T any] struct {
	buf        []T
	head, size int
}

// Len is the number of items queued.
func (q *Queue[T]) Len() int { return q.size }

// Push adds t at the back.
func (q *Queue[T]) Push(t T) {
	if q.size == len(q.buf) {
		buf := make([]T, max(2*len(q.buf), 64))
		k := copy(buf, q.buf[q.head:])
		copy(buf[k:], q.buf[:q.head])
		q.buf, q.head = buf, 0
	}
	q.buf[(q.head+q.size)%len(q.buf)] = t
	q.size++
}

// Pop removes and returns the front item; false when empty. A queue that
// empties holding an array of more than 4,096 items (a burst) lets it go.
func (q *Queue[T]) Pop() (T, bool) {
	var zero T
	if q.size == 0 {
		return zero, false
	}
	t := q.buf[q.head]
	q.buf[q.head] = zero
	q.head = (q.head + 1) % len(q.buf)
	q.size--
	if q.size == 0 && len(q.buf) > 1<<12 {
		q.buf, q.head = nil, 0
	}
	return t, true
}

// TakeAll empties q and returns its items in order (nil when empty).
func (q *Queue[T]) TakeAll() []T {
	if q.size == 0 {
		return nil
	}
	ts := make([]T, 0, q.size)
	for t, ok := q.Pop(); ok; t, ok = q.Pop() {
		ts = append(ts, t)
	}
	return ts
}

// Remove drops the items for which drop reports true, keeping the others
// in order, and returns how many it dropped.
func (q *Queue[T]) Remove(drop func(*T) bool) int {
	n := q.size
	kept := 0
	for i := 0; i < n; i++ {
		t, _ := q.Pop()
		if drop(&t) {
			continue
		}
		q.Push(t)
		kept++
	}
	return n - kept
}
