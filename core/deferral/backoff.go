package deferral

import (
	"math"
	"math/rand/v2"
	"time"
)

// Backoff is the delay before a deferred key's retry (core-behavior.md
// §4.6), in whole seconds like the timers that carry it.
type Backoff struct {
	Base, MaxDelay time.Duration // defer_base, defer_max_delay
	// Jitter draws a uniform integer in [0, n); nil uses math/rand/v2.
	Jitter func(n int64) int64
}

// Delay is the wait before the retry that follows retries failed retries:
// none for the first (0), else a uniform whole number of seconds in
// [1, cap] where cap = min(base × 2^(retries−1), max) (at least 1),
// computed in whole seconds and saturating like the original's unsigned
// 32-bit arithmetic, so that mixed fleets space retries alike.
func (b Backoff) Delay(retries uint32) time.Duration {
	if retries == 0 {
		return 0
	}
	base := uint64(b.Base / time.Second)
	maxDelay := uint64(b.MaxDelay / time.Second)
	capS := uint64(math.MaxUint32)
	if shift := retries - 1; base == 0 {
		capS = 0
	} else if shift < 32 && base <= math.MaxUint32>>shift {
		capS = base << shift
	}
	capS = max(min(capS, maxDelay, math.MaxUint32), 1)
	jitter := b.Jitter
	if jitter == nil {
		jitter = rand.Int64N
	}
	return time.Duration(1+jitter(int64(capS))) * time.Second
}
