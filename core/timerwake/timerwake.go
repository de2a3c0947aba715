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
// 5–10 % of a core at 200 µs on a virtual machine, whether or not a
// handler is waiting on a timer, which is why it is a choice.
//
// Only Linux has the millisecond wait (epoll); elsewhere the runtime
// waits with nanosecond timeouts and a Waker does nothing.
package timerwake

import (
	"sync"
	"sync/atomic"
	"time"
)

// idleCheck is how often a Waker looks whether handlers run while none
// do.
const idleCheck = 10 * time.Millisecond

// MinPeriod and MaxPeriod bound the period: shorter costs a core's worth
// of wake-ups, and a millisecond or more is no better than the runtime's
// own wait (a Waker's Stop also waits up to a period).
const (
	MinPeriod = 20 * time.Microsecond
	MaxPeriod = time.Millisecond
)

// running counts the Wakers whose goroutine runs (Running).
var running atomic.Int64

// Running is the number of Wakers of the process whose goroutine runs.
func Running() int { return int(running.Load()) }

// Waker wakes the scheduler every period while busy reports true.
type Waker struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Start starts a Waker that wakes the scheduler every period (clamped to
// MinPeriod–MaxPeriod) while busy() is true, and looks every 10 ms
// otherwise. Where the runtime's timers are precise already (not Linux)
// the Waker does nothing.
func Start(period time.Duration, busy func() bool) *Waker {
	w := &Waker{stop: make(chan struct{}), done: make(chan struct{})}
	if !needed {
		close(w.done)
		return w
	}
	running.Add(1)
	go w.run(min(max(period, MinPeriod), MaxPeriod), busy)
	return w
}

func (w *Waker) run(period time.Duration, busy func() bool) {
	defer close(w.done)
	defer running.Add(-1)
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
		wake(period)
	}
}

// Stop stops w and waits for its goroutine to end, at most a period. It
// may be called more than once.
func (w *Waker) Stop() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}
