package scheduler

import "github.com/prosody-events/prosody-go/core/internal/fifo"

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

// fifoOrder is the waiting attempts, oldest first.
type fifoOrder[W any] struct{ q fifo.Queue[task[W]] }

func (o *fifoOrder[W]) len() int                { return o.q.Len() }
func (o *fifoOrder[W]) push(t task[W], _ int64) { o.q.Push(t) }

func (o *fifoOrder[W]) pop(int64) task[W] {
	t, _ := o.q.Pop()
	return t
}

func (o *fifoOrder[W]) remove(drop func(W) bool, out []W) []W {
	o.q.Remove(func(t *task[W]) bool {
		if drop(t.w) {
			out = append(out, t.w)
			return true
		}
		return false
	})
	return out
}
