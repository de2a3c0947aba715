package timerstore

import (
	"fmt"
	"math"
	"time"
)

// Time is whole epoch seconds (u32), as the original stores them: it covers
// 1970 to 2106.
type Time uint32

// TimeOf converts a wall-clock instant, rounding half-up to the nearest
// second (x.5 s becomes x+1) and clamping to the representable range.
func TimeOf(t time.Time) Time {
	secs := t.Unix() // floor, also before 1970
	if t.Nanosecond() >= 500_000_000 {
		secs++
	}
	switch {
	case secs < 0:
		return 0
	case secs > math.MaxUint32:
		return math.MaxUint32
	}
	return Time(secs)
}

// MinTime and MaxTime are the first and last instants a Time holds.
var (
	MinTime = time.Unix(0, 0).UTC()
	MaxTime = time.Unix(math.MaxUint32, 0).UTC()
)

// CheckTime reports an error when t, rounded to the second as TimeOf
// rounds it, lies outside MinTime..MaxTime: TimeOf would clamp it, and a
// timer would fire at another time than the one asked for.
func CheckTime(t time.Time) error {
	secs := t.Unix()
	if t.Nanosecond() >= 500_000_000 {
		secs++
	}
	if secs < 0 || secs > math.MaxUint32 {
		return fmt.Errorf("timer time %s is out of range: timers are kept as whole seconds from %s to %s",
			t.UTC().Format(time.RFC3339Nano), MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
	}
	return nil
}

// Std returns the instant as a time.Time in UTC.
func (t Time) Std() time.Time { return time.Unix(int64(t), 0).UTC() }

// SlabOf returns the slab holding t: floor(t / size), 0 when size is 0.
func SlabOf(t Time, slabSize uint32) uint32 {
	if slabSize == 0 {
		return 0
	}
	return uint32(t) / slabSize
}

// slabEnd is the first second after slab (exclusive end of its range). It
// can exceed the u32 range for the last slabs, hence int64.
func slabEnd(slab, slabSize uint32) int64 { return (int64(slab) + 1) * int64(slabSize) }
