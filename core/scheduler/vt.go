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
// next power of two of cacheSize slots (at least two), in sets of two
// picked by a key's hash. A key new to a full set takes the slot of the
// set's key with less virtual time, which starts again from zero: the
// key that has kept a permit busy longer, and so waits behind others, is
// the one kept. A bounded cache without a lock, which every handler call
// would take. One slot per key would lose a key's time whenever another
// active key shared it (a ninth of a thousand active keys in 8,192
// slots); with two, a key is lost only to a set of three or more active
// keys, under 1 % of them there.
type keyTimes struct {
	mask  uint64 // of the first slot of a set: the slots' count − 2
	slots []keySlot
}

type keySlot struct {
	key atomic.Uint64 // the key counted, 0 when free
	vt  decaying
}

func newKeyTimes(cacheSize int) *keyTimes {
	n := uint64(1) << bits.Len64(uint64(max(cacheSize, 2))-1)
	return &keyTimes{mask: n - 2, slots: make([]keySlot, n)}
}

func slotKey(k Key) uint64 {
	if k == 0 {
		return 1 // 0 marks a free slot
	}
	return uint64(k)
}

// set is k's two slots.
func (t *keyTimes) set(k Key) *[2]keySlot {
	return (*[2]keySlot)(t.slots[uint64(k)&t.mask:])
}

// at is k's virtual time at now, in seconds.
func (t *keyTimes) at(k Key, now int64) float64 {
	sk, set := slotKey(k), t.set(k)
	for i := range set {
		if set[i].key.Load() == sk {
			return set[i].vt.at(now)
		}
	}
	return 0
}

// add adds secs to k's virtual time.
func (t *keyTimes) add(k Key, secs float64, now int64) {
	sk, set := slotKey(k), t.set(k)
	for i := range set {
		if set[i].key.Load() == sk {
			set[i].vt.add(secs, now)
			return
		}
	}
	victim := &set[0]
	if k0, k1 := set[0].key.Load(), set[1].key.Load(); k0 != 0 && (k1 == 0 || set[1].vt.at(now) < set[0].vt.at(now)) {
		victim = &set[1]
	}
	old := victim.key.Load()
	if old == sk {
		victim.vt.add(secs, now) // another charge of k took the slot this instant
		return
	}
	if !victim.key.CompareAndSwap(old, sk) {
		return // taken over by another key this instant
	}
	victim.vt.bits.Store(packVT(secs, now))
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
