package timers

import "container/heap"

// delayQueue orders timer ids by time (then key and type, so equal times
// fire in a stable order). Removal is lazy: the Manager marks entries and
// skips stale ids when they come due.
type delayQueue struct{ h idHeap }

// push adds id and reports whether it became the earliest.
func (q *delayQueue) push(id ID) bool {
	heap.Push(&q.h, id)
	return q.h[0] == id
}

func (q *delayQueue) peek() (ID, bool) {
	if len(q.h) == 0 {
		return ID{}, false
	}
	return q.h[0], true
}

func (q *delayQueue) pop() ID { return heap.Pop(&q.h).(ID) }

func (q *delayQueue) len() int { return len(q.h) }

// compact drops the ids keep refuses (stale copies) and restores the
// order: lazy removal would otherwise let the queue grow with every
// schedule and unschedule, not with the timers there are.
func (q *delayQueue) compact(keep func(ID) bool) {
	kept := q.h[:0]
	for _, id := range q.h {
		if keep(id) {
			kept = append(kept, id)
		}
	}
	clear(q.h[len(kept):]) // the keys of dropped ids
	q.h = kept
	heap.Init(&q.h)
}

type idHeap []ID

func (h idHeap) Len() int { return len(h) }
func (h idHeap) Less(i, j int) bool {
	if h[i].Time != h[j].Time {
		return h[i].Time < h[j].Time
	}
	if h[i].Key != h[j].Key {
		return h[i].Key < h[j].Key
	}
	return h[i].Type < h[j].Type
}
func (h idHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *idHeap) Push(x any)   { *h = append(*h, x.(ID)) }
func (h *idHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
