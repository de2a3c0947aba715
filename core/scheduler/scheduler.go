// Package scheduler decides which handler attempt runs next: it hands out
// a consumer's max_concurrency permits, and when attempts wait for one, it
// alone picks the attempt that gets the permit a release frees
// (core-behavior.md §4.10).
//
// Two policies share the permit counting:
//
//   - Fair, the documented scheduler: per-key virtual time that decays,
//     a split of handler time between first attempts (normal demand) and
//     retries (failure demand), and a boost for attempts that have waited,
//     so that none starves.
//   - FIFO, first come first served: a baseline for benchmarks and a
//     plain limit for tests.
//
// A permit is taken without a lock when one is free and no attempt waits
// (one compare-and-swap); only attempts that must wait go through the
// policy, under the scheduler's mutex. The scheduler is work-conserving:
// a free permit never stays unused while an attempt waits for one.
package scheduler

import (
	"hash/maphash"
	"time"
)

// Demand is the class of an attempt: Normal for an event's first attempt,
// Failure for its retries (immediate or deferred). The fair scheduler
// divides handler time between the two.
type Demand uint8

const (
	Normal Demand = iota
	Failure
)

func (d Demand) String() string {
	if d == Failure {
		return "failure"
	}
	return "normal"
}

// Key names what the scheduler keeps virtual time for: a key of a
// partition (KeyOf).
type Key uint64

var keySeed = maphash.MakeSeed()

// KeyOf is the scheduler key of key in a topic's partition.
func KeyOf(topic string, partition int32, key string) Key {
	var h maphash.Hash
	h.SetSeed(keySeed)
	h.WriteString(topic)
	h.WriteByte(byte(partition))
	h.WriteByte(byte(partition >> 8))
	h.WriteByte(byte(partition >> 16))
	h.WriteByte(byte(partition >> 24))
	h.WriteString(key)
	return Key(h.Sum64())
}

// Scheduler hands out permits to attempts of type W (the engine's runs).
// Every method may be called from any goroutine.
type Scheduler[W any] interface {
	// Acquire asks for a permit for attempt w with demand d. It
	// returns true when the attempt holds one at once. Otherwise w waits,
	// and later exactly one of the callbacks is called for it: Granted
	// (it holds a permit) or Dismissed (it was gone when its turn came,
	// or Cancel removed it).
	//
	// Acquire, Release and Cancel may call other attempts' callbacks on
	// the calling goroutine (a permit freed meanwhile goes to whoever the
	// policy picks), after the scheduler's lock is released: a caller
	// must not hold a lock that a callback takes.
	Acquire(w W, d Demand) bool
	// TryAcquire takes a permit only if one is free and no attempt waits
	// (a lease for a run of quick attempts; see Idle).
	TryAcquire() bool
	// Release returns a permit. If attempts wait, the scheduler picks one
	// and grants it the permit, on the calling goroutine after its lock is
	// released.
	Release()
	// Charge adds used (nanoseconds of handler time under a permit) to
	// the virtual time of w's key and to the time of demand class d.
	Charge(w W, d Demand, used int64)
	// Cancel dismisses the waiting attempts that are gone (Callbacks.Gone).
	Cancel()
	// Waiting is the number of attempts waiting for a permit.
	Waiting() int
	// InUse is the number of permits taken.
	InUse() int
	// Size is the number of permits (max_concurrency).
	Size() int
	// Now is the time on the scheduler's clock, in nanoseconds, for the
	// handler time passed to Charge.
	Now() int64
}

// Callbacks are how a scheduler tells a waiting attempt how its wait
// ended. Granted and Dismissed are called without the scheduler's lock.
type Callbacks[W any] struct {
	// Key is w's key, asked only when the scheduler needs it (the fair
	// one, for an attempt that waits and for a charge).
	Key func(w W) Key
	// Granted: w holds a permit now.
	Granted func(w W)
	// Gone reports whether w no longer wants a permit (its invocation was
	// cancelled). It is called under the scheduler's lock.
	Gone func(w W) bool
	// Dismissed: w was gone; it holds no permit.
	Dismissed func(w W)
	// Due reports whether w is the first attempt of a timer that has come
	// due, asked only when w must wait. The fair scheduler counts such an
	// attempt as one that has waited half of max_wait already (see Fair);
	// nil means no attempt is.
	Due func(w W) bool
}

// Options configure the fair scheduler (the scheduler_* options).
type Options struct {
	// Permits is max_concurrency.
	Permits int
	// FailureWeight is the share of handler time that retries get while
	// both classes wait (scheduler_failure_weight, 0–1).
	FailureWeight float64
	// MaxWait is how long an attempt waits before its boost is full
	// (scheduler_max_wait).
	MaxWait time.Duration
	// WaitWeight is the full boost in seconds of virtual time
	// (scheduler_wait_weight).
	WaitWeight float64
	// CacheSize is how many keys' virtual times are kept
	// (scheduler_cache_size).
	CacheSize int
	// Clock is the time in nanoseconds, monotonic; nil uses the system's.
	Clock func() int64
}

// HalfLife is how fast virtual time decays: a key's time, and each
// class's, halves every HalfLife.
const HalfLife = 120 * time.Second

var clockBase = time.Now()

// systemClock is monotonic nanoseconds from a base far enough from zero
// that no time read is zero.
func systemClock() int64 { return int64(time.Since(clockBase)) + 1<<40 }
