package scheduler

// FIFO is the first-come-first-served scheduler: waiting attempts get
// permits in the order they asked, whatever their key or demand. It keeps
// no virtual time. The engine runs the fair scheduler; FIFO is the
// baseline it is measured against, and a plain limit for tests.
type FIFO[W any] struct {
	permits[W]
}

// NewFIFO returns a FIFO scheduler with n permits (at least 1).
func NewFIFO[W any](n int, cb Callbacks[W]) *FIFO[W] {
	f := &FIFO[W]{}
	f.permits = newPermits[W](n, cb, nil, &fifoOrder[W]{})
	return f
}

// Acquire implements Scheduler.
func (f *FIFO[W]) Acquire(w W, d Demand) bool { return f.acquire(w, d, nil) }

// TryAcquire implements Scheduler.
func (f *FIFO[W]) TryAcquire() bool { return f.leaseable() }

// Release implements Scheduler.
func (f *FIFO[W]) Release() { f.release() }

// Charge implements Scheduler: FIFO keeps no time.
func (f *FIFO[W]) Charge(W, Demand, int64) {}

// Cancel implements Scheduler.
func (f *FIFO[W]) Cancel() { f.cancel() }

// fifoOrder is a ring of waiting attempts, oldest first, that reuses its
// array.
type fifoOrder[W any] struct {
	buf        []task[W]
	head, size int
}

func (q *fifoOrder[W]) len() int { return q.size }

func (q *fifoOrder[W]) push(t task[W], _ int64) {
	if q.size == len(q.buf) {
		buf := make([]task[W], max(2*len(q.buf), 16))
		k := copy(buf, q.buf[q.head:])
		copy(buf[k:], q.buf[:q.head])
		q.buf, q.head = buf, 0
	}
	q.buf[(q.head+q.size)%len(q.buf)] = t
	q.size++
}

func (q *fifoOrder[W]) pop(int64) task[W] {
	t := q.buf[q.head]
	q.buf[q.head] = task[W]{}
	q.head = (q.head + 1) % len(q.buf)
	q.size--
	if q.size == 0 && len(q.buf) > 1<<12 {
		q.buf, q.head = nil, 0 // a burst: do not keep its array
	}
	return t
}

func (q *fifoOrder[W]) remove(drop func(W) bool, out []W) []W {
	n := q.size
	for i := 0; i < n; i++ {
		t := q.pop(0)
		if drop(t.w) {
			out = append(out, t.w)
			continue
		}
		q.push(t, 0)
	}
	return out
}
