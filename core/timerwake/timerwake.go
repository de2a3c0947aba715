// Package timerwake keeps the Go runtime's timers precise while handlers
// run, for handlers that wait on short timers.
//
// When every goroutine of a process is blocked, the runtime waits for its
// next timer in epoll_wait, whose timeout is in whole milliseconds: a
// wait is cut to the millisecond below and anything under one becomes
// one, so a timer fires up to a millisecond late, half of one on
// average. A handler that sleeps 5 ms then takes 5.4–5.7 ms, and a
// consumer whose handlers wait on timers loses up to a tenth of its
// throughput to it. A Waker wakes the runtime's scheduler every period
// while handlers run (a nanosleep system call, which is precise, then a
// yield, on which the scheduler runs the timers that are due), so timers
// fire within about a period of their time. Its cost is the wake-ups:
// 5–12 % of a core at 100–200 µs on a virtual machine, whether
// or not a handler is waiting on a timer, which is why it is a choice.
package timerwake

import (
	"runtime"
	"sync"
	"syscall"
	"time"
)

// idleCheck is how often a Waker looks whether handlers run while none
// do.
const idleCheck = 10 * time.Millisecond

// MinPeriod is the shortest period Start accepts.
const MinPeriod = 20 * time.Microsecond

// Waker wakes the scheduler every period while busy reports true.
type Waker struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Start starts a Waker that wakes the scheduler every period (at least
// MinPeriod) while busy() is true, and looks every 10 ms otherwise.
func Start(period time.Duration, busy func() bool) *Waker {
	period = max(period, MinPeriod)
	w := &Waker{stop: make(chan struct{}), done: make(chan struct{})}
	go w.run(period, busy)
	return w
}

func (w *Waker) run(period time.Duration, busy func() bool) {
	defer close(w.done)
	ts := syscall.NsecToTimespec(int64(period))
	idle := time.NewTimer(idleCheck)
	defer idle.Stop()
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		if !busy() {
			idle.Reset(idleCheck)
			select {
			case <-w.stop:
				return
			case <-idle.C:
			}
			continue
		}
		// An interrupted sleep (EINTR) is a wake-up as good as any.
		_ = syscall.Nanosleep(&ts, nil)
		runtime.Gosched()
	}
}

// Stop stops w and waits for its goroutine to end. It may be called more
// than once.
func (w *Waker) Stop() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}
