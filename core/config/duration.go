package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Calendar units follow the Rust humantime crate, which the original Prosody
// uses to read durations: a month is 30.44 days and a year is 365.25 days.
const (
	day   = 24 * time.Hour
	week  = 7 * day
	month = 2_630_016 * time.Second  // 30.44 days
	year  = 31_557_600 * time.Second // 365.25 days
)

// durationUnits maps every unit spelling the original accepts to its length.
// Unit names are case-sensitive: "m" is a minute and "M" a month.
var durationUnits = map[string]time.Duration{
	"nanos": time.Nanosecond, "nsec": time.Nanosecond, "ns": time.Nanosecond,
	"micros": time.Microsecond, "usec": time.Microsecond, "us": time.Microsecond, "µs": time.Microsecond,
	"millis": time.Millisecond, "msec": time.Millisecond, "ms": time.Millisecond,
	"seconds": time.Second, "second": time.Second, "secs": time.Second, "sec": time.Second, "s": time.Second,
	"minutes": time.Minute, "minute": time.Minute, "mins": time.Minute, "min": time.Minute, "m": time.Minute,
	"hours": time.Hour, "hour": time.Hour, "hrs": time.Hour, "hr": time.Hour, "h": time.Hour,
	"days": day, "day": day, "d": day,
	"weeks": week, "week": week, "w": week,
	"months": month, "month": month, "M": month,
	"years": year, "year": year, "y": year,
}

// DurationError is the error ParseDuration returns.
type DurationError struct {
	Input  string // the text given
	Reason string // what is wrong with it
}

func (e *DurationError) Error() string {
	return fmt.Sprintf("invalid duration %q: %s", e.Input, e.Reason)
}

// ParseDuration reads a human-written duration in the syntax of the original
// Prosody environment variables: one or more "<whole number><unit>" pairs,
// for example "100ms", "30s", "2h 30m", "1h30m" or "7d". Spaces may separate
// pairs and may sit between a number and its unit. Every number needs a unit;
// fractions and signs are not accepted.
func ParseDuration(s string) (time.Duration, error) {
	fail := func(format string, args ...any) (time.Duration, error) {
		return 0, &DurationError{Input: s, Reason: fmt.Sprintf(format, args...)}
	}
	rest := strings.TrimSpace(s)
	if rest == "" {
		return fail("empty")
	}
	var total time.Duration
	for rest != "" {
		digits := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
		if digits < 0 {
			digits = len(rest)
		}
		if digits == 0 {
			return fail("expected a number at %q", rest)
		}
		number := rest[:digits]
		rest = strings.TrimLeftFunc(rest[digits:], unicode.IsSpace)

		letters := strings.IndexFunc(rest, func(r rune) bool { return !unicode.IsLetter(r) })
		if letters < 0 {
			letters = len(rest)
		}
		unitName := rest[:letters]
		rest = strings.TrimLeftFunc(rest[letters:], unicode.IsSpace)
		if unitName == "" {
			return fail("a unit must follow %s, as in %ss", number, number)
		}
		unit, ok := durationUnits[unitName]
		if !ok {
			return fail("unknown unit %q", unitName)
		}

		n, err := strconv.ParseInt(number, 10, 64)
		if err != nil || n > int64(math.MaxInt64/unit) {
			return fail("%s%s is too long", number, unitName)
		}
		part := time.Duration(n) * unit
		if total > math.MaxInt64-part {
			return fail("too long")
		}
		total += part
	}
	return total, nil
}

// FormatDuration prints d in the syntax ParseDuration reads, using days as
// the largest unit so the result is exact, for example "1h 30m" or "500ms".
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	sign := ""
	// Work on the magnitude as an unsigned number so that the minimum
	// Duration, which has no positive counterpart, still prints.
	rest := uint64(d)
	if d < 0 {
		sign = "-"
		rest = -rest
	}
	units := []struct {
		name string
		size time.Duration
	}{
		{"d", day}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second},
		{"ms", time.Millisecond}, {"us", time.Microsecond}, {"ns", time.Nanosecond},
	}
	var parts []string
	for _, u := range units {
		if n := rest / uint64(u.size); n > 0 {
			parts = append(parts, strconv.FormatUint(n, 10)+u.name)
			rest -= n * uint64(u.size)
		}
	}
	return sign + strings.Join(parts, " ")
}
