package deferral

import (
	"sync"
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
type Gate struct {
	threshold float64
	gran      time.Duration

	mu      sync.Mutex
	buckets [gateBuckets]gateBucket
}

type gateBucket struct {
	epoch     int64 // which part of time the counts are for
	successes uint64
	failures  uint64
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

// Observe implements telemetry.Observer.
func (g *Gate) Observe(e telemetry.Event) {
	if e.Kind == telemetry.HandlerInvoked {
		return
	}
	epoch := e.At.UnixNano() / int64(g.gran)
	g.mu.Lock()
	b := &g.buckets[uint64(epoch)%gateBuckets]
	if b.epoch != epoch {
		if b.epoch > epoch {
			g.mu.Unlock()
			return // older than the window
		}
		*b = gateBucket{epoch: epoch}
	}
	if e.Kind == telemetry.HandlerSucceeded {
		b.successes++
	} else {
		b.failures++
	}
	g.mu.Unlock()
}

// Rate is the share of failures among the outcomes of the window ending at
// now, and how many outcomes that is.
func (g *Gate) Rate(now time.Time) (rate float64, outcomes uint64) {
	epoch := now.UnixNano() / int64(g.gran)
	var s, f uint64
	g.mu.Lock()
	for i := range g.buckets {
		b := &g.buckets[i]
		if b.epoch <= epoch && b.epoch > epoch-gateBuckets {
			s += b.successes
			f += b.failures
		}
	}
	g.mu.Unlock()
	if s+f == 0 {
		return 0, 0
	}
	return float64(f) / float64(s+f), s + f
}

// Allows reports whether a first failure may be deferred at now.
func (g *Gate) Allows(now time.Time) bool {
	rate, n := g.Rate(now)
	return n < MinSample || rate < g.threshold
}
