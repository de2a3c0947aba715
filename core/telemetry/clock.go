package telemetry

import (
	"sync/atomic"
	"time"

	"github.com/prosody-events/prosody-go/core/watchdog"
)

// ClockTick is the resolution of a broadcast's clock (NewBroadcast).
const ClockTick = time.Millisecond

// coarseClock is a clock read with an atomic load: a goroutine of its own
// stores the time every ClockTick while the clock is read, and sleeps
// while it is not. Reading the system clock at both ends of every handler
// call cost the engine more than the rest of the telemetry together (a
// clock read is tens of nanoseconds on a virtual machine).
//
// A call shorter than a tick mostly reads one time at both ends, and now
// and then two a tick apart: over many calls the sum of their durations
// is still right, which is what the observers of durations (the
// monopolization tracker) use, and a call that reads no difference costs
// them nothing.
type coarseClock struct {
	at     atomic.Int64
	read   atomic.Bool // read since the last tick
	ticker *watchdog.Ticker
	stop   chan struct{}
	done   chan struct{}
}

func startClock() *coarseClock {
	c := &coarseClock{ticker: watchdog.NewTicker(ClockTick), stop: make(chan struct{}), done: make(chan struct{})}
	c.at.Store(Now())
	go func() {
		defer close(c.done)
		c.ticker.Run(c.stop, func(bool) bool {
			c.at.Store(Now())
			return c.read.Swap(false)
		})
	}()
	return c
}

func (c *coarseClock) now() int64 {
	if !c.read.Load() {
		c.read.Store(true)
	}
	if c.ticker.Asleep() {
		// The stored time is as old as the ticker's sleep: read the clock,
		// and wake the ticker for the reads to come.
		now := Now()
		c.at.Store(now)
		c.ticker.Wake()
		return now
	}
	return c.at.Load()
}

func (c *coarseClock) close() {
	close(c.stop)
	<-c.done
}
