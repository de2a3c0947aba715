package scheduler

// taskHeap is a binary min-heap of waiting attempts by (lv, seq): lowest
// virtual time first, and in arrival order among equals.
type taskHeap[W any] struct {
	items []task[W]
}

func less[W any](a, b *task[W]) bool {
	return a.lv < b.lv || a.lv == b.lv && a.seq < b.seq
}

func (h *taskHeap[W]) push(t task[W]) {
	h.items = append(h.items, t)
	h.up(len(h.items) - 1)
}

func (h *taskHeap[W]) pop() task[W] {
	t := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	h.items[last] = task[W]{}
	h.items = h.items[:last]
	if last > 0 {
		h.down(0)
	}
	return t
}

func (h *taskHeap[W]) clear() {
	clear(h.items)
	h.items = h.items[:0]
}

func (h *taskHeap[W]) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !less(&h.items[i], &h.items[parent]) {
			return
		}
		h.items[i], h.items[parent] = h.items[parent], h.items[i]
		i = parent
	}
}

func (h *taskHeap[W]) down(i int) {
	n := len(h.items)
	for {
		small := i
		if l := 2*i + 1; l < n && less(&h.items[l], &h.items[small]) {
			small = l
		}
		if r := 2*i + 2; r < n && less(&h.items[r], &h.items[small]) {
			small = r
		}
		if small == i {
			return
		}
		h.items[i], h.items[small] = h.items[small], h.items[i]
		i = small
	}
}

// remove drops the attempts for which drop reports true, appending them to
// out, and restores the heap.
func (h *taskHeap[W]) remove(drop func(W) bool, out []W) []W {
	kept := h.items[:0]
	for _, t := range h.items {
		if drop(t.w) {
			out = append(out, t.w)
		} else {
			kept = append(kept, t)
		}
	}
	if len(kept) == len(h.items) {
		return out
	}
	clear(h.items[len(kept):])
	h.items = kept
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
	return out
}
