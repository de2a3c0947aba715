package deferral

import (
	"sync/atomic"
	"time"

	"github.com/prosody-events/prosody-go/core/telemetry"
)

// MinSample is how many outcomes the gate's window must hold before it can
// switch deferral off: with fewer, one failure in a quiet system would be
// a failure rate of 1 (core-behavior.md §1(d)).
const MinSample = 10

// gateBuckets is how many parts the window is kept in. Outcomes are
// counted per part rather than kept one by one, so a busy consumer's
// window (hundreds of thousands of outcomes) costs a fixed few hundred
// bytes; an outcome leaves the window up to window/gateBuckets late.
const gateBuckets = 64

// Gate is the failure-rate gate (the original's failure tracker): it
// watches every handler outcome of the consumer on the telemetry
// broadcast and allows a first deferral only while the share of failures
// among the outcomes of the last window is below the threshold. When most
// calls fail (a database is down), deferring each failure would only move
// the outage into a storm of retries; the key then retries in place and
// the partition's backpressure carries the outage upstream.
//
// Every handler outcome passes through Observe, so it takes no lock: a
// part's counts are reset by whoever first sees that its time has come,
// and an outcome counted in the instant of a reset may be lost, which a
// rate over a window of thousands of outcomes does not notice.
//
// The counts are kept in a few copies, an outcome counting in the one of
// its partition, so that handlers of different partitions on different
// CPUs do not write one cache line for every call.
type Gate struct {
	threshold float64
	gran      time.Duration
	copies    [gateCopies][gateBuckets]gateBucket
}

const gateCopies = 8

type gateBucket struct {
	epoch     atomic.Int64 // which part of time the counts are for
	successes atomic.Uint64
	failures  atomic.Uint64
}

// NewGate returns a gate over window with threshold (defer_failure_window,
// defer_failure_threshold).
func NewGate(threshold float64, window time.Duration) *Gate {
	gran := window / gateBuckets
	if gran <= 0 {
		gran = 1
	}
	return &Gate{threshold: threshold, gran: gran}
}

// OutcomesOnly implements telemetry.OutcomeObserver.
func (g *Gate) OutcomesOnly() {}

// Observe implements telemetry.Observer.
func (g *Gate) Observe(e telemetry.Event) {
	if e.Kind == telemetry.HandlerInvoked {
		return
	}
	epoch := e.At / int64(g.gran)
	b := &g.copies[uint32(e.Partition)%gateCopies][uint64(epoch)%gateBuckets]
	if cur := b.epoch.Load(); cur != epoch {
		if cur > epoch {
			return // older than the window
		}
		if b.epoch.CompareAndSwap(cur, epoch) {
			b.successes.Store(0)
			b.failures.Store(0)
		}
	}
	if e.Kind == telemetry.HandlerSucceeded {
		b.successes.Add(1)
	} else {
		b.failures.Add(1)
	}
}

// Rate is the share of failures among the outcomes of the window ending at
// now (on the telemetry clock), and how many outcomes that is.
func (g *Gate) Rate(now int64) (rate float64, outcomes uint64) {
	epoch := now / int64(g.gran)
	var s, f uint64
	for c := range g.copies {
		for i := range g.copies[c] {
			b := &g.copies[c][i]
			if e := b.epoch.Load(); e <= epoch && e > epoch-gateBuckets {
				s += b.successes.Load()
				f += b.failures.Load()
			}
		}
	}
	if s+f == 0 {
		return 0, 0
	}
	return float64(f) / float64(s+f), s + f
}

// Allows reports whether a first failure may be deferred now.
func (g *Gate) Allows() bool { return g.AllowsAt(telemetry.Now()) }

// AllowsAt reports whether a first failure may be deferred at now (on the
// telemetry clock).
func (g *Gate) AllowsAt(now int64) bool {
	rate, n := g.Rate(now)
	return n < MinSample || rate < g.threshold
}
