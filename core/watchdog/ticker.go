// Package watchdog holds the ticker that the engine's watchdogs share (the
// handler-timeout scan, the rescuer of stuck partition drivers): a periodic
// scan that sleeps while there is nothing to watch, so an idle client costs
// no wake-ups, and that the first piece of new work wakes without a lock.
package watchdog

import (
	"sync/atomic"
	"time"
)

// Ticker runs a scan every period while the scan finds something to watch.
type Ticker struct {
	period time.Duration
	asleep atomic.Bool   // Run waits on wake
	wake   chan struct{} // work was published while Run slept
}

// NewTicker returns a Ticker for period. Start it with Run.
func NewTicker(period time.Duration) *Ticker {
	return &Ticker{period: period, wake: make(chan struct{}, 1)}
}

// Wake makes a sleeping Run tick again. Call it after publishing what the
// scan is to find: either Run's last scan before it sleeps finds the work,
// or Wake finds Run asleep.
func (t *Ticker) Wake() {
	if t.asleep.Load() && t.asleep.CompareAndSwap(true, false) {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

// Asleep reports whether Run sleeps until the next Wake.
func (t *Ticker) Asleep() bool { return t.asleep.Load() }

// Run calls scan(true) every period until stop closes. When a scan reports
// nothing to watch, Run announces its sleep, calls scan(false) once more
// for work published without seeing the announcement, and sleeps until
// Wake if that finds nothing either. scan(false) is not a tick: no period
// has passed since the previous call.
func (t *Ticker) Run(stop <-chan struct{}, scan func(tick bool) (busy bool)) {
	ticker := time.NewTicker(t.period)
	defer ticker.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ticker.C:
		}
		if scan(true) {
			continue
		}
		t.asleep.Store(true)
		if scan(false) && t.asleep.CompareAndSwap(true, false) {
			continue
		}
		// Asleep, or a Wake already claimed the wake-up (consumed below).
		ticker.Stop()
		select {
		case <-stop:
			return
		case <-t.wake:
		}
		ticker.Reset(t.period)
	}
}
