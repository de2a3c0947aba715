package consumer

import (
	"runtime"
	"sync"
	"time"

	"github.com/prosody-events/prosody-go/core/internal/fifo"
	"github.com/prosody-events/prosody-go/core/middleware"
)

// task is one key's run: an event and the partition it belongs to.
type task struct {
	p  *partition
	it item
}

// starvationTick is how often the executor checks, while runs are queued,
// that they are being picked up (see executor).
const starvationTick = time.Millisecond

// executor runs key runs on a pool of reusable goroutines fed by one
// consumer-wide run queue.
//
// Handing each run to its own goroutine cost a park and a wake-up per
// event, more than a no-op handler itself. Instead a worker that finishes a
// run takes the next queued one without sleeping, and an idle worker is
// woken only when runs are queued and no other worker is already on its way
// to them (a woken worker wakes the next idle one if runs remain, so a
// burst wakes each needed worker once).
//
// Up to eager workers (a few per CPU) are started as soon as runs wait with
// none idle. Beyond that, a watchdog ticking every starvationTick while
// runs wait starts a worker for each worker stuck in one run for a whole
// tick or two, as long as runs queued before then still wait: such a worker
// is blocked in a handler (or waiting for a concurrency slot, or backing
// off between retries), and ready keys must not wait for it. Runs that wait
// only because the CPUs are busy start nothing. Workers live until the
// consumer stops; they are started only while runs wait, so their number
// stays below the number of runs that can be in flight at once
// (partitions × max_uncommitted).
type executor struct {
	mu       sync.Mutex
	queue    ring
	idle     []*worker // parked workers, most recent last
	workers  int
	waking   int // workers woken or started that have not yet looked at the queue
	eager    int
	blocked  int // workers whose run said it waits outside the process (block)
	closed   bool
	pushed   uint64    // runs ever queued
	popped   uint64    // runs ever taken from the queue
	watching bool      // the watchdog is ticking (it sleeps while the queue is empty)
	tick     uint64    // watchdog ticks so far
	all      []*worker // every worker started, for the watchdog

	wakeWatch chan struct{}
	stopWatch chan struct{}
	watchDone chan struct{}
}

type worker struct {
	wake chan struct{}
	// run is the worker's way through the middleware stack, reused by
	// every event it invokes.
	run middleware.Run
	// since is e.tick when the worker took its current run, 0 while it
	// has none. Guarded by e.mu.
	since uint64
}

func newExecutor() *executor {
	e := &executor{
		eager:     2 * runtime.GOMAXPROCS(0),
		wakeWatch: make(chan struct{}, 1),
		stopWatch: make(chan struct{}),
		watchDone: make(chan struct{}),
	}
	go e.watch()
	return e
}

// submitLocked queues runs and makes sure a worker will take them. The
// caller holds e.mu.
func (e *executor) submitLocked(ts []task) {
	if len(ts) == 0 {
		return
	}
	for _, t := range ts {
		e.queue.Push(t)
	}
	e.pushed += uint64(len(ts))
	if e.waking == 0 {
		e.wakeOneLocked()
	}
	if !e.watching {
		e.watching = true
		select {
		case e.wakeWatch <- struct{}{}:
		default:
		}
	}
}

// submit is submitLocked for a caller that does not hold e.mu.
func (e *executor) submit(ts ...task) {
	e.mu.Lock()
	e.submitLocked(ts)
	e.mu.Unlock()
}

// wakeOneLocked wakes an idle worker, or starts one if fewer than eager
// exist. Otherwise the busy workers take the queued runs when they finish.
func (e *executor) wakeOneLocked() bool {
	if n := len(e.idle); n > 0 {
		w := e.idle[n-1]
		e.idle[n-1] = nil
		e.idle = e.idle[:n-1]
		e.waking++
		w.wake <- struct{}{}
		return true
	}
	if e.workers < e.eager+e.blocked {
		e.startLocked()
		return true
	}
	return false
}

// block is the executor's side of event.Context.Blocking: the calling
// worker's run is about to wait for something outside the process (a host
// language completing the event, a remote call), so it stops counting
// against the eager workers and, if runs are queued, another worker takes
// them now rather than after the starvation watchdog notices.
func (e *executor) block() (resume func()) {
	e.mu.Lock()
	e.blocked++
	if e.queue.Len() > 0 && e.waking == 0 {
		e.wakeOneLocked()
	}
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		e.blocked--
		e.mu.Unlock()
	}
}

func (e *executor) startLocked() {
	e.workers++
	e.waking++
	w := &worker{wake: make(chan struct{}, 1)}
	e.all = append(e.all, w)
	go e.work(w)
}

func (e *executor) work(w *worker) {
	e.mu.Lock()
	e.waking--
	for !e.closed {
		t, ok := e.queue.Pop()
		if !ok {
			w.since = 0
			e.idle = append(e.idle, w)
			e.mu.Unlock()
			<-w.wake
			e.mu.Lock()
			e.waking--
			continue
		}
		e.popped++
		w.since = e.tick + 1 // never 0
		if e.queue.Len() > 0 && e.waking == 0 {
			// More runs wait: get the next worker going before this one
			// disappears into a handler that may take its time.
			e.wakeOneLocked()
		}
		e.mu.Unlock()
		t.p.run(t.it, &w.run)
		e.mu.Lock()
	}
	e.workers--
	w.since = 0
	e.mu.Unlock()
}

// purge removes p's queued runs, which must not start: p is draining. It
// returns how many there were, and how many of them were retries holding
// a reserved permit (fireTimer), which the caller gives back. The caller
// holds p.mu.
func (e *executor) purge(p *partition) (purged, reserved int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	purged = e.queue.Remove(func(t *task) bool {
		if t.p != p {
			return false
		}
		if ti, ok := t.it.ev.(*timerItem); ok && ti.reserved {
			reserved++
		}
		return true
	})
	return purged, reserved
}

// watch starts workers while queued runs are not being picked up.
func (e *executor) watch() {
	defer close(e.watchDone)
	ticker := time.NewTicker(starvationTick)
	defer ticker.Stop()
	var mark uint64 // e.pushed at the previous tick
	for {
		select {
		case <-e.stopWatch:
			return
		case <-ticker.C:
		}
		e.mu.Lock()
		if e.queue.Len() == 0 {
			e.watching = false
			e.mu.Unlock()
			ticker.Stop()
			select {
			case <-e.stopWatch:
				return
			case <-e.wakeWatch:
			}
			e.mu.Lock()
			mark = e.pushed
			e.mu.Unlock()
			ticker.Reset(starvationTick)
			continue
		}
		e.tick++
		// Runs queued before the previous tick still wait: replace the
		// workers stuck in one run since before it.
		if e.popped < mark && e.waking == 0 && !e.closed {
			stuck := 0
			for _, w := range e.all {
				if w.since != 0 && w.since+1 < e.tick {
					stuck++
				}
			}
			n := min(int(mark-e.popped), stuck, 8)
			for i := 0; i < n; i++ {
				if !e.wakeOneLocked() {
					e.startLocked()
				}
			}
		}
		mark = e.pushed
		e.mu.Unlock()
	}
}

// close ends the workers once they are idle and stops the watchdog. It must
// be called only after every partition has drained, when nothing submits.
// A worker still inside a handler ends when its run returns.
func (e *executor) close() {
	e.mu.Lock()
	e.closed = true
	for _, w := range e.idle {
		e.waking++
		w.wake <- struct{}{}
	}
	e.idle = nil
	e.mu.Unlock()
	close(e.stopWatch)
	<-e.watchDone
}

// ring is a FIFO of tasks.
type ring = fifo.Queue[task]
