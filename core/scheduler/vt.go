package scheduler

import (
	"math"
	"math/bits"
	"sync/atomic"
)

// Virtual time decays: v(t) = v0 × 2^(−(t − t0) / HalfLife), and adding
// to it first decays it to now. A value is one word, updated with a
// compare-and-swap, because every handler call of the consumer adds to
// two of them (its key's and its class's) from the handlers' goroutines:
// the seconds as a float32 in the high half, t0 in the low half in ticks
// of 2^24 ns (17 ms, next to a half-life of two minutes; the ticks wrap
// after 2.3 years, and a difference is read as a signed 32-bit count, so
// a value untouched for over 1.1 years in a process running that long
// reads as decayed by the time modulo that: accepted, as the only cost
// is one key's priority for a while).
type decaying struct {
	bits atomic.Uint64
}

const (
	tickShift    = 24
	tickSeconds  = float64(1<<tickShift) / 1e9
	halfLifeSecs = float64(HalfLife) / 1e9
)

func packVT(v float64, now int64) uint64 {
	return uint64(math.Float32bits(float32(v)))<<32 | uint64(uint32(now>>tickShift))
}

// later is the later of b's time and now, as a time to pack: an add that
// read the clock a moment before another's must not move t0 back.
func later(b uint64, now int64) int64 {
	if int32(uint32(now>>tickShift)-uint32(b)) < 0 {
		return int64(uint32(b)) << tickShift
	}
	return now
}

// unpackVT is the value of b decayed to now.
func unpackVT(b uint64, now int64) float64 {
	if b == 0 {
		return 0
	}
	v := float64(math.Float32frombits(uint32(b >> 32)))
	ticks := int32(uint32(now>>tickShift) - uint32(b))
	if ticks <= 0 {
		return v // an add that read the clock a moment later got there first
	}
	return v * math.Exp2(-float64(ticks)*tickSeconds/halfLifeSecs)
}

func (d *decaying) at(now int64) float64 { return unpackVT(d.bits.Load(), now) }

func (d *decaying) add(secs float64, now int64) {
	for {
		old := d.bits.Load()
		if d.bits.CompareAndSwap(old, packVT(unpackVT(old, now)+secs, later(old, now))) {
			return
		}
	}
}

// keyTimes is the virtual time of recently active keys: a table of the
// next power of two of cacheSize slots, a key's slot picked by its hash.
// A key whose slot another key holds takes it over, and the other key
// starts again from zero: a bounded cache without a lock, which every
// handler call would take; losing the time of a key not seen for a while
// is what a cache of recent keys does anyway.
type keyTimes struct {
	mask  uint64
	slots []keySlot
}

type keySlot struct {
	key atomic.Uint64 // the key counted, 0 when free
	vt  decaying
}

func newKeyTimes(cacheSize int) *keyTimes {
	n := uint64(1) << bits.Len64(uint64(max(cacheSize, 1))-1)
	return &keyTimes{mask: n - 1, slots: make([]keySlot, n)}
}

func slotKey(k Key) uint64 {
	if k == 0 {
		return 1 // 0 marks a free slot
	}
	return uint64(k)
}

// at is k's virtual time at now, in seconds.
func (t *keyTimes) at(k Key, now int64) float64 {
	s := &t.slots[uint64(k)&t.mask]
	if s.key.Load() != slotKey(k) {
		return 0
	}
	return s.vt.at(now)
}

// add adds secs to k's virtual time.
func (t *keyTimes) add(k Key, secs float64, now int64) {
	sk := slotKey(k)
	s := &t.slots[uint64(k)&t.mask]
	if old := s.key.Load(); old != sk {
		if !s.key.CompareAndSwap(old, sk) {
			return // taken over by another key this instant
		}
		s.vt.bits.Store(packVT(secs, now))
		return
	}
	s.vt.add(secs, now)
}

// classTimes is the handler time of one demand class, striped so that
// the handlers of different keys mostly add to different cache lines.
type classTimes struct {
	stripes [classStripes]struct {
		decaying
		_ [56]byte
	}
}

const classStripes = 8

func (c *classTimes) add(k Key, secs float64, now int64) {
	c.stripes[uint64(k)%classStripes].add(secs, now)
}

func (c *classTimes) at(now int64) float64 {
	var sum float64
	for i := range c.stripes {
		sum += c.stripes[i].at(now)
	}
	return sum
}
