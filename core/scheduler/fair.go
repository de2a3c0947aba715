package scheduler

import (
	"math"
	mathbits "math/bits"
	"time"
)

// Fair is the documented scheduler (core-behavior.md §4.10). Among the
// attempts waiting for a permit it picks, for each demand class, the one
// with the lowest priority
//
//	priority = key's virtual time (seconds, decayed) − wait_weight × min(waited / max_wait, 1)²
//
// (the key's virtual time as it was when the attempt started waiting), and
// between the two classes the one whose handler time, divided by its
// weight (1 − failure_weight for normal demand, failure_weight for
// failure demand), is lower. A key's virtual time is the handler time of
// its attempts under a permit (Charge), decaying with HalfLife, so a key
// that has kept a permit busy waits behind keys that have not, and a
// retry storm gets failure_weight of the handler time while fresh
// messages wait.
//
// Each class keeps its waiting attempts in heaps by virtual time, one per
// slice of max_wait/64 of their start, plus one for those that have
// waited max_wait or more (their boost is full, so virtual time alone
// orders them). A pick looks at the best of each non-empty heap, at most
// 66, and pops one: O(log n) for n waiting attempts. Within one slice the
// older attempt's larger boost is not looked at, which can favour a
// younger attempt of lower virtual time by at most wait_weight × (2/64 +
// 1/64²) of priority (6.3 s of virtual time with the defaults), for any
// max_wait of 64 µs or more; between slices, and
// for every attempt compared, the boost is exact.
//
// A timer's first attempt (Callbacks.Due) waits as if it had waited half
// of max_wait already: it starts with a quarter of the full boost (50 s of
// virtual time with the defaults), which puts it ahead of the messages of
// its class that have waited less than half of max_wait, unless its key
// has had that much more handler time than theirs. This is ours, not the
// original's, which lets a due timer wait its turn behind every message
// of a busy consumer, so that timers fired seconds late while the
// handlers that scheduled them were busy. A timer's due time is the
// deadline its handler was written for; a message has none. Messages do
// not starve behind timers: one that has waited max_wait has four times a
// fresh timer's boost, and goes first unless the timer's key has had
// three quarters of the full boost (150 s) less handler time. Timers still
// wait behind their own key's messages (per-key order), and the split
// between the demand classes is unchanged.
type Fair[W any] struct {
	permits[W]
	keys    *keyTimes
	classes [2]classTimes
	start   int64 // the clock when the scheduler was made: lv's origin
	o       *fairOrder[W]
}

// NewFair returns a fair scheduler.
func NewFair[W any](opts Options, cb Callbacks[W]) *Fair[W] {
	f := &Fair[W]{keys: newKeyTimes(opts.CacheSize)}
	o := &fairOrder[W]{
		failureWeight: opts.FailureWeight,
		waitWeight:    opts.WaitWeight,
		maxWait:       max(int64(opts.MaxWait), 1),
		times:         &f.classes,
	}
	o.width = max(o.maxWait/slices, 1)
	f.o = o
	f.permits = newPermits[W](opts.Permits, cb, opts.Clock, o)
	f.start = f.clock()
	o.start = f.start
	return f
}

// Acquire implements Scheduler.
func (f *Fair[W]) Acquire(w W, d Demand) bool { return f.acquire(w, d, f.lv) }

// lv is key's virtual time at now as log2 of seconds plus the half-lives
// since the scheduler started: decaying it later subtracts the same from
// every attempt's, so the order between attempts never changes while
// they wait.
func (f *Fair[W]) lv(key Key, now int64) float64 {
	vt := f.keys.at(key, now)
	if vt <= 0 {
		return math.Inf(-1)
	}
	return math.Log2(vt) + halvings(now-f.start)
}

func halvings(d int64) float64 { return float64(d) / float64(HalfLife) }

// TryAcquire implements Scheduler.
func (f *Fair[W]) TryAcquire() bool { return f.leaseable() }

// Release implements Scheduler.
func (f *Fair[W]) Release() { f.release() }

// Charge implements Scheduler.
func (f *Fair[W]) Charge(w W, d Demand, used int64) {
	if used <= 0 {
		return
	}
	key := f.cb.Key(w)
	now := f.clock()
	secs := time.Duration(used).Seconds()
	f.keys.add(key, secs, now)
	f.classes[d&1].add(key, secs, now)
}

// Cancel implements Scheduler.
func (f *Fair[W]) Cancel() { f.cancel() }

// KeyTime is key's virtual time now, in seconds.
func (f *Fair[W]) KeyTime(key Key) float64 { return f.keys.at(key, f.clock()) }

// ClassTime is the handler time of demand class d now, in seconds
// (decayed).
func (f *Fair[W]) ClassTime(d Demand) float64 { return f.classes[d&1].at(f.clock()) }

// slices is how many parts of max_wait the start times of waiting
// attempts are grouped in.
const slices = 64

// ring holds the slices of one class: the slice under way, the 64 of the
// max_wait before it, and the one max_wait reaches into.
const ring = slices + 2

type fairOrder[W any] struct {
	failureWeight float64
	waitWeight    float64
	maxWait       int64 // ns
	width         int64 // ns of a slice
	start         int64
	times         *[2]classTimes
	q             [2]classQueue[W]
}

// classQueue is the waiting attempts of one demand class.
type classQueue[W any] struct {
	byStart  [ring]taskHeap[W] // slice s (started in [s·width, (s+1)·width)) at s % ring
	first    int64             // the oldest slice that may hold attempts
	inSlices int
	// occupied has bit i set while byStart[i] holds attempts: a pick
	// looks at those heaps only, usually one or two of the 66.
	occupied [2]uint64
	full     taskHeap[W] // waited max_wait or more
}

// slot is the ring index of slice s, which may be negative.
func slot(s int64) int { return int((s%ring + ring) % ring) }

func (q *classQueue[W]) mark(i int)   { q.occupied[i>>6] |= 1 << (i & 63) }
func (q *classQueue[W]) unmark(i int) { q.occupied[i>>6] &^= 1 << (i & 63) }

func (o *fairOrder[W]) len() int { return o.q[Normal].len() + o.q[Failure].len() }

func (o *fairOrder[W]) push(t task[W], now int64) {
	q := &o.q[t.d&1]
	o.age(q, now)
	if t.due {
		t.enq = now - o.maxWait/2
	}
	// A due attempt's start lies before the clock's; early in a process
	// with a long max_wait, before zero.
	s := floorDiv(t.enq, o.width)
	if q.inSlices == 0 || t.due && s < q.first {
		// A due attempt's slice lies half of max_wait back, and every
		// attempt waiting started since then, so the ring still holds
		// them all from there.
		q.first = s
	}
	// The clock only moves forward, and age keeps the slices within the
	// ring; this keeps a clock that does not from losing an attempt.
	s = min(max(s, q.first), q.first+ring-1)
	i := slot(s)
	q.byStart[i].push(t)
	q.mark(i)
	q.inSlices++
}

// age moves the slices whose every attempt has waited max_wait to the
// full heap.
func (o *fairOrder[W]) age(q *classQueue[W], now int64) {
	if q.inSlices == 0 {
		return
	}
	if end := floorDiv(now-o.maxWait, o.width); end-q.first > ring {
		// Every slice the ring holds is past max_wait: one pass over the
		// ring rather than one step per slice since the last look (a class
		// left waiting under a tiny max_wait could be millions behind).
		q.first = end - ring
	}
	for (q.first+1)*o.width <= now-o.maxWait {
		i := slot(q.first)
		h := &q.byStart[i]
		for _, t := range h.items {
			q.full.push(t)
		}
		q.inSlices -= len(h.items)
		h.clear()
		q.unmark(i)
		q.first++
		if q.inSlices == 0 {
			return
		}
	}
}

func (o *fairOrder[W]) pop(now int64) task[W] {
	var d Demand
	switch {
	case o.q[Normal].len() == 0:
		d = Failure
	case o.q[Failure].len() == 0:
		d = Normal
	default:
		d = o.pickClass(now)
	}
	q := &o.q[d]
	o.age(q, now)
	decay := halvings(now - o.start)
	best, bestAt, bestPri := (*taskHeap[W])(nil), -1, math.Inf(1)
	consider := func(h *taskHeap[W], at int) {
		t := &h.items[0]
		pri := o.priority(t, now, decay)
		if best == nil || pri < bestPri || pri == bestPri && t.seq < best.items[0].seq {
			best, bestAt, bestPri = h, at, pri
		}
	}
	if len(q.full.items) > 0 {
		consider(&q.full, -1)
	}
	for w, bits := range q.occupied {
		for ; bits != 0; bits &= bits - 1 {
			i := w*64 + mathbits.TrailingZeros64(bits)
			consider(&q.byStart[i], i)
		}
	}
	t := best.pop()
	if bestAt >= 0 {
		q.inSlices--
		if len(best.items) == 0 {
			q.unmark(bestAt)
		}
	}
	return t
}

// priority is t's priority at now in seconds (lower goes first); decay is
// the half-lives since the scheduler started.
func (o *fairOrder[W]) priority(t *task[W], now int64, decay float64) float64 {
	vt := 0.0
	if !math.IsInf(t.lv, -1) {
		vt = math.Exp2(t.lv - decay)
	}
	ratio := min(float64(now-t.enq)/float64(o.maxWait), 1)
	return vt - o.waitWeight*ratio*ratio
}

// pickClass chooses between the classes when both have attempts waiting:
// the one that has had less handler time for its weight (a weight of 0
// makes a class go only when the other has nothing waiting).
func (o *fairOrder[W]) pickClass(now int64) Demand {
	normal := score(o.times[Normal].at(now), 1-o.failureWeight)
	failure := score(o.times[Failure].at(now), o.failureWeight)
	if normal <= failure {
		return Normal
	}
	return Failure
}

func score(time, weight float64) float64 {
	if weight <= 0 {
		return math.Inf(1)
	}
	return time / weight
}

func (q *classQueue[W]) len() int { return q.inSlices + len(q.full.items) }

func (o *fairOrder[W]) remove(drop func(W) bool, out []W) []W {
	for d := range o.q {
		q := &o.q[d]
		for i := range q.byStart {
			n := len(out)
			out = q.byStart[i].remove(drop, out)
			q.inSlices -= len(out) - n
			if len(q.byStart[i].items) == 0 {
				q.unmark(i)
			}
		}
		out = q.full.remove(drop, out)
	}
	return out
}

// WaitingFor is the number of attempts of demand class d waiting.
func (f *Fair[W]) WaitingFor(d Demand) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.o.q[d&1].len()
}

// floorDiv is a/b rounded down, for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
