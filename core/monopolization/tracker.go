// Package monopolization tracks how much of a recent window each key's
// handlers have been running, so that one hot key cannot hold the
// consumer's concurrency for itself (core-behavior.md §4.8): a key whose
// handler time exceeds a share of the window is refused (transiently, so
// pipeline mode defers it) and the permits go to other keys.
package monopolization

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/prosody-events/prosody-go/core/telemetry"
)

// buckets is how many parts of the window handler time is kept in: time
// is summed per part rather than kept as intervals, so a key that runs a
// million short calls in a window costs the same few hundred bytes as one
// that ran once. The part under way is kept besides (ring), and a part
// leaves the window whole, so the time counted can include up to
// window/buckets from before the window, and never leaves out any of it.
const (
	buckets = 16
	ring    = buckets + 1
)

// TPK names a key of a partition.
type TPK struct {
	Topic     string
	Partition int32
	Key       string
}

// Tracker keeps the handler time of recently active keys, in a table of
// at least cacheSize slots. It is fed by the telemetry broadcast: each
// outcome carries its call's start, and the call's interval is added to
// its key. The invocation of a call need not be seen: a key's events run
// one at a time, so its next event is checked only once the call before
// it has ended.
//
// Every handler call of the consumer passes through Observe, on the
// handlers' goroutines, so the table takes no lock: a key's slot is the
// one its hash picks, a key whose hash picks a slot in use takes it over
// (the key that had it is forgotten), and the slot's parts are atomic
// counters, reset by whoever first sees that their time has come. A call
// counted in the instant of a reset or a take-over may be lost, which a
// heuristic over minutes of handler time does not notice; a lock here,
// taken by every call, measurably slowed the engine. Keys are told apart
// by a 64-bit hash of topic, partition and key.
//
// Handler time is measured inside the concurrency permit (the telemetry
// layer is innermost), so time spent queueing for a permit does not count
// against a key.
//
// A check (Exceeds) reads no clock for a key that was below the threshold
// at its last outcome: its share can only have fallen since, as its next
// call is the one being checked. Only a key that was above it is looked
// at again.
type Tracker struct {
	window time.Duration
	gran   int64 // ns per part
	limit  int64 // ns of the window above which a key is refused
	seed   maphash.Seed
	mask   uint64
	slots  []slot
	// busyBits is how many low bits of a part hold its handler time: room
	// for four times a part's length, so that a sum never reaches the
	// epoch above it (Observe saturates besides).
	busyBits uint
	// hot counts the slots whose key was above the limit at its last
	// outcome: while none is, a check is one load.
	hot atomic.Int64
}

type slot struct {
	hash  atomic.Uint64 // of the key it counts; 0 when free
	hot   atomic.Bool   // above the limit at the key's last outcome
	parts [ring]atomic.Uint64
}

// A part is one word: the epoch of the window part it counts in the high
// bits (modulo their range), its handler time (ns) in the low busyBits.
// One word rather than two halves the table, which a consumer with many
// keys has wholly resident (8,192 slots: 1.2 MiB instead of 2.4), and
// lets a part be reset and counted in one compare-and-swap. The epochs'
// range spans decades of the window for any window length, so two epochs
// that compare equal modulo it are the same.

func (t *Tracker) pack(epoch, busy int64) uint64 {
	return uint64(epoch)<<t.busyBits | uint64(busy)
}

// epochOf is a part's epoch, modulo the range of its bits.
func (t *Tracker) epochOf(p uint64) uint64 { return p >> t.busyBits }

func (t *Tracker) busyOf(p uint64) int64 { return int64(p & (1<<t.busyBits - 1)) }

// behind is how many epochs the part p's epoch lies before epoch, in the
// range of the bits (a part ahead of epoch is far behind, modulo it).
func (t *Tracker) behind(p uint64, epoch int64) uint64 {
	return (uint64(epoch) - t.epochOf(p)) & (1<<(64-t.busyBits) - 1)
}

// NewTracker returns a tracker over window for about cacheSize keys that
// refuses keys above threshold of the window (monopolization_window,
// monopolization_cache_size, monopolization_threshold; the table has the
// next power of two of slots).
func NewTracker(window time.Duration, cacheSize int, threshold float64) *Tracker {
	gran := int64(window / buckets)
	if gran <= 0 {
		gran = 1
	}
	n := uint64(1) << bits.Len64(uint64(max(cacheSize, 1))-1)
	return &Tracker{window: window, gran: gran, limit: int64(threshold * float64(window)),
		seed: maphash.MakeSeed(), mask: n - 1, slots: make([]slot, n),
		busyBits: uint(bits.Len64(uint64(gran))) + 2}
}

// OutcomesOnly implements telemetry.OutcomeObserver.
func (t *Tracker) OutcomesOnly() {}

// Observe implements telemetry.Observer.
func (t *Tracker) Observe(e telemetry.Event) {
	if e.Kind == telemetry.HandlerInvoked || e.Start == 0 || e.At <= e.Start {
		return // nothing to add (a call within one tick of the clock)
	}
	h := t.hash(TPK{e.Topic, e.Partition, e.Key})
	s := &t.slots[h&t.mask]
	if old := s.hash.Load(); old != h {
		if !s.hash.CompareAndSwap(old, h) {
			return // taken over by another key this instant
		}
		for i := range s.parts {
			s.parts[i].Store(0)
		}
		if s.hot.CompareAndSwap(true, false) {
			t.hot.Add(-1)
		}
	}
	end := e.At
	for start := max(e.Start, end-int64(t.window)); start < end; {
		epoch := start / t.gran
		stop := min(end, (epoch+1)*t.gran)
		t.add(&s.parts[uint64(epoch)%ring], epoch, stop-start)
		start = stop
	}
	hot := t.used(s, end/t.gran) > t.limit
	if hot != s.hot.Load() && s.hot.CompareAndSwap(!hot, hot) {
		if hot {
			t.hot.Add(1)
		} else {
			t.hot.Add(-1)
		}
	}
}

// add counts busy ns in the part p for epoch: a part still counting an
// earlier epoch is reset to it, one counting a later epoch (the call
// began before another call's reset) is left alone.
func (t *Tracker) add(p *atomic.Uint64, epoch, busy int64) {
	full := int64(1)<<t.busyBits - 1
	for {
		var cur int64
		old := p.Load()
		switch d := t.behind(old, epoch); {
		case old == 0:
			// free: counted from nothing, whatever epoch its zero bits say
		case d == 0:
			cur = t.busyOf(old)
		case d > 1<<(63-t.busyBits):
			return // a part ahead: this interval is older than its window
		}
		if p.CompareAndSwap(old, t.pack(epoch, min(cur+busy, full))) {
			return
		}
	}
}

// used is the handler time the slot holds for the window whose last part
// is epoch (a free part, all zero, adds nothing whatever its epoch).
func (t *Tracker) used(s *slot, epoch int64) int64 {
	var used int64
	for i := range s.parts {
		if p := s.parts[i].Load(); t.behind(p, epoch) < ring {
			used += t.busyOf(p)
		}
	}
	return used
}

func (t *Tracker) hash(tpk TPK) uint64 {
	h := maphash.String(t.seed, tpk.Key) ^ bits.RotateLeft64(maphash.String(t.seed, tpk.Topic), 17) ^ uint64(uint32(tpk.Partition))*0x9e3779b97f4a7c15
	if h == 0 {
		h = 1 // 0 marks a free slot
	}
	return h
}

// Exceeds reports whether tpk's handlers ran more than the threshold of
// the window ending now, and the part of it they ran.
func (t *Tracker) Exceeds(tpk TPK) (bool, float64) {
	if t.hot.Load() == 0 {
		return false, 0
	}
	h := t.hash(tpk)
	s := &t.slots[h&t.mask]
	if s.hash.Load() != h || !s.hot.Load() {
		return false, 0
	}
	used := t.used(s, telemetry.Now()/t.gran)
	return used > t.limit, float64(used) / float64(t.window)
}

// Share is the part of the window ending at now (on the telemetry clock)
// that tpk's handlers have run.
func (t *Tracker) Share(tpk TPK, now int64) float64 {
	h := t.hash(tpk)
	s := &t.slots[h&t.mask]
	if s.hash.Load() != h {
		return 0
	}
	return float64(t.used(s, now/t.gran)) / float64(t.window)
}

// Len is how many keys are tracked.
func (t *Tracker) Len() int {
	n := 0
	for i := range t.slots {
		if t.slots[i].hash.Load() != 0 {
			n++
		}
	}
	return n
}
