// Package monopolization tracks how much of a recent window each key's
// handlers have been running, so that one hot key cannot hold the
// consumer's concurrency for itself (core-behavior.md §4.8): a key whose
// handler time exceeds a share of the window is refused (transiently, so
// pipeline mode defers it) and the permits go to other keys.
package monopolization

import (
	"sync"
	"time"

	"github.com/prosody-events/prosody-go/core/telemetry"
)

// buckets is how many parts of the window a key's handler time is kept
// in: time is summed per part rather than kept as intervals, so a key
// that runs a million short calls in a window costs the same few hundred
// bytes as one that ran once. A part leaves the window whole, so the time
// counted can include up to window/buckets from before the window.
const buckets = 16

// TPK names a key of a partition.
type TPK struct {
	Topic     string
	Partition int32
	Key       string
}

// Tracker keeps the handler time of the most recently active keys
// (cacheSize of them; the least recently active key is forgotten first).
// It is fed by the telemetry broadcast: a handler's invocation opens an
// interval, its outcome closes it. Handler time is measured inside the
// concurrency permit (the telemetry layer is innermost), so time spent
// queueing for a permit does not count against a key.
type Tracker struct {
	window time.Duration
	gran   int64 // ns per bucket
	limit  int

	mu    sync.Mutex
	keys  map[TPK]*keyTime
	newer *keyTime // most recently active (the list's head)
	older *keyTime // least recently active (its tail)
}

type keyTime struct {
	tpk        TPK
	open       int64 // start (ns) of the call under way; 0 when none
	epochs     [buckets]int64
	busy       [buckets]int64 // ns of handler time in each part
	prev, next *keyTime       // towards newer, towards older
}

// NewTracker returns a tracker over window for up to cacheSize keys
// (monopolization_window, monopolization_cache_size).
func NewTracker(window time.Duration, cacheSize int) *Tracker {
	gran := int64(window / buckets)
	if gran <= 0 {
		gran = 1
	}
	return &Tracker{window: window, gran: gran, limit: max(cacheSize, 1), keys: make(map[TPK]*keyTime)}
}

// Observe implements telemetry.Observer.
func (t *Tracker) Observe(e telemetry.Event) {
	tpk := TPK{e.Topic, e.Partition, e.Key}
	at := e.At.UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	k := t.keys[tpk]
	if e.Kind == telemetry.HandlerInvoked {
		if k == nil {
			k = t.addLocked(tpk)
		} else {
			t.touchLocked(k)
		}
		k.open = at
		return
	}
	if k == nil || k.open == 0 {
		return // forgotten while it ran
	}
	t.closeLocked(k, at)
}

// closeLocked adds the call under way, ending at end, to k's parts.
func (t *Tracker) closeLocked(k *keyTime, end int64) {
	start := max(k.open, end-int64(t.window))
	k.open = 0
	for start < end {
		epoch := start / t.gran
		stop := min(end, (epoch+1)*t.gran)
		i := uint64(epoch) % buckets
		if k.epochs[i] != epoch {
			k.epochs[i], k.busy[i] = epoch, 0
		}
		k.busy[i] += stop - start
		start = stop
	}
}

// Share is the part of the window ending at now that tpk's handlers have
// run, the call under way included.
func (t *Tracker) Share(tpk TPK, now time.Time) float64 {
	at := now.UnixNano()
	t.mu.Lock()
	k := t.keys[tpk]
	if k == nil {
		t.mu.Unlock()
		return 0
	}
	epoch := at / t.gran
	var used int64
	for i := range k.epochs {
		if e := k.epochs[i]; e <= epoch && e > epoch-buckets {
			used += k.busy[i]
		}
	}
	if k.open != 0 && at > k.open {
		used += at - max(k.open, at-int64(t.window))
	}
	t.mu.Unlock()
	return float64(used) / float64(t.window)
}

func (t *Tracker) addLocked(tpk TPK) *keyTime {
	var k *keyTime
	if len(t.keys) >= t.limit {
		k = t.older // reuse the least recently active key's memory
		t.unlinkLocked(k)
		delete(t.keys, k.tpk)
		*k = keyTime{}
	} else {
		k = &keyTime{}
	}
	k.tpk = tpk
	t.keys[tpk] = k
	t.pushLocked(k)
	return k
}

func (t *Tracker) touchLocked(k *keyTime) {
	if t.newer != k {
		t.unlinkLocked(k)
		t.pushLocked(k)
	}
}

func (t *Tracker) pushLocked(k *keyTime) {
	k.prev, k.next = nil, t.newer
	if t.newer != nil {
		t.newer.prev = k
	}
	t.newer = k
	if t.older == nil {
		t.older = k
	}
}

func (t *Tracker) unlinkLocked(k *keyTime) {
	if k.prev != nil {
		k.prev.next = k.next
	} else {
		t.newer = k.next
	}
	if k.next != nil {
		k.next.prev = k.prev
	} else {
		t.older = k.prev
	}
	k.prev, k.next = nil, nil
}

// Len is how many keys are tracked.
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.keys)
}
