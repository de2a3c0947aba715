// Package offsets tracks which offsets of one partition are unfinished and
// computes the watermark: the highest offset below which every taken offset
// is finished. Committing watermark+1 is therefore always safe, whatever
// order handlers finish in.
//
// Offsets are taken in increasing order (the consumer drops rewinds before
// taking), so the unfinished window is a sorted ring: taking appends,
// finishing finds the offset (directly when the window has no gaps, the
// usual case; by binary search otherwise), and the watermark advances by
// popping finished offsets from the front. Offsets that were never taken,
// such as gaps in a compacted topic, never block the watermark.
//
// A Tracker is not safe for concurrent use; its partition serialises access.
package offsets

import (
	"fmt"
	"sort"
	"time"
)

// None is the watermark before any offset is finished.
const None int64 = -1

// entry holds no pointer, so the garbage collector never scans the ring.
type entry struct {
	offset int64
	since  time.Duration // when it was taken, as time since Tracker.epoch
	done   bool
}

// Tracker holds at most Capacity unfinished offsets of one partition.
type Tracker struct {
	ring      []entry
	head, n   int
	watermark int64
	highest   int64
	epoch     time.Time // the first Take's time
}

// New returns a Tracker admitting capacity unfinished offsets (>= 1).
func New(capacity int) *Tracker {
	if capacity < 1 {
		capacity = 1
	}
	return &Tracker{ring: make([]entry, capacity), watermark: None, highest: None}
}

// Capacity is the most offsets that can be unfinished at once.
func (t *Tracker) Capacity() int { return len(t.ring) }

// Outstanding is the number of taken, unfinished offsets.
func (t *Tracker) Outstanding() int { return t.n }

// Full reports whether Take would fail for lack of room.
func (t *Tracker) Full() bool { return t.n == len(t.ring) }

// Watermark is the highest offset below which everything taken is
// finished, or None.
func (t *Tracker) Watermark() int64 { return t.watermark }

// Highest is the highest offset taken so far, or None.
func (t *Tracker) Highest() int64 { return t.highest }

// Take reserves offset as unfinished. It fails when the tracker is full or
// offset is not above every offset taken before.
func (t *Tracker) Take(offset int64, now time.Time) error {
	if t.n == len(t.ring) {
		return fmt.Errorf("offsets: cannot take %d: %d offsets already unfinished", offset, t.n)
	}
	if offset <= t.highest {
		return fmt.Errorf("offsets: cannot take %d: not above %d, the highest taken", offset, t.highest)
	}
	if t.epoch.IsZero() {
		t.epoch = now
	}
	*t.at(t.n) = entry{offset: offset, since: now.Sub(t.epoch)}
	t.n++
	t.highest = offset
	return nil
}

// Finish marks a taken offset finished and reports whether the watermark
// advanced. Finishing an offset that is not unfinished is an error (a double
// finish is a bug in the caller, never silently accepted).
func (t *Tracker) Finish(offset int64) (advanced bool, err error) {
	e := t.find(offset)
	if e == nil {
		return false, fmt.Errorf("offsets: %d is not an unfinished offset", offset)
	}
	if e.done {
		return false, fmt.Errorf("offsets: %d finished twice", offset)
	}
	e.done = true
	for t.n > 0 && t.ring[t.head].done {
		t.watermark = t.ring[t.head].offset
		t.ring[t.head] = entry{}
		t.head++
		if t.head == len(t.ring) {
			t.head = 0
		}
		t.n--
		advanced = true
	}
	return advanced, nil
}

// Oldest returns the lowest unfinished offset and when it was taken.
func (t *Tracker) Oldest() (offset int64, takenAt time.Time, ok bool) {
	if t.n == 0 {
		return None, time.Time{}, false
	}
	e := t.ring[t.head]
	return e.offset, t.epoch.Add(e.since), true
}

// Commit is the offset to commit to Kafka (the next offset to read), or
// None when nothing has been finished.
func (t *Tracker) Commit() int64 {
	if t.watermark == None {
		return None
	}
	return t.watermark + 1
}

// find returns the window's entry for offset, or nil. Consecutive offsets
// (no gaps since the oldest unfinished one) sit at their distance from the
// oldest, which is tried first; gaps (compaction, transaction markers) move
// entries towards the front, where a binary search finds them.
func (t *Tracker) find(offset int64) *entry {
	if t.n == 0 {
		return nil
	}
	d := offset - t.ring[t.head].offset
	if d < 0 {
		return nil
	}
	if d < int64(t.n) {
		if e := t.at(int(d)); e.offset == offset {
			return e
		}
	}
	hi := t.n
	if d < int64(hi) {
		hi = int(d) // an entry at distance i holds an offset >= oldest+i
	}
	if i := sort.Search(hi, func(i int) bool { return t.at(i).offset >= offset }); i < hi && t.at(i).offset == offset {
		return t.at(i)
	}
	return nil
}

// at is the window's i-th entry (0: the oldest), i < len(t.ring).
func (t *Tracker) at(i int) *entry {
	j := t.head + i
	if j >= len(t.ring) {
		j -= len(t.ring)
	}
	return &t.ring[j]
}
