package probe

import (
	"sync/atomic"
	"time"
)

// Heartbeat lets a long-running loop prove it is still making progress. The
// loop calls Beat on every iteration and wakes at least every Interval, so
// an idle loop still beats; a heartbeat that has not been beaten for longer
// than its threshold is stalled.
//
// Beat and Stalled are lock-free: the last beat is an atomic count of
// nanoseconds since the heartbeat's creation, measured on the clock's
// monotonic reading (time.Now carries one), so wall-clock jumps do not fake
// or hide a stall.
type Heartbeat struct {
	name      string
	threshold time.Duration
	clock     func() time.Time
	origin    time.Time

	last     atomic.Int64 // nanoseconds from origin to the last beat
	reported atomic.Bool  // a stall has been logged and not yet cleared
}

// NewHeartbeat creates a heartbeat whose first beat is its creation. A nil
// clock means time.Now.
func NewHeartbeat(name string, threshold time.Duration, clock func() time.Time) *Heartbeat {
	if clock == nil {
		clock = time.Now
	}
	return &Heartbeat{name: name, threshold: threshold, clock: clock, origin: clock()}
}

// Name is the heartbeat's name as used in logs and stall reports.
func (h *Heartbeat) Name() string { return h.name }

// Beat records progress now.
func (h *Heartbeat) Beat() {
	h.last.Store(int64(h.clock().Sub(h.origin)))
}

// Stalled reports whether more than the threshold has passed since the last
// beat (strictly more, as in the original).
func (h *Heartbeat) Stalled() bool {
	return h.SinceBeat() > h.threshold
}

// SinceBeat is the time elapsed since the last beat.
func (h *Heartbeat) SinceBeat() time.Duration {
	return h.clock().Sub(h.origin) - time.Duration(h.last.Load())
}

// Interval is the longest a beating loop may sleep: a fifth of the
// threshold, so a healthy but idle loop beats several times per threshold.
func (h *Heartbeat) Interval() time.Duration { return h.threshold / 5 }
