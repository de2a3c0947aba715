package config

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"100ms", 100 * time.Millisecond},
		{"30s", 30 * time.Second},
		{"5m", 5 * time.Minute},
		{"2h 30m", 150 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"1h 30m 15s", time.Hour + 30*time.Minute + 15*time.Second},
		{"7d", 7 * 24 * time.Hour},
		{"2w", 14 * 24 * time.Hour},
		{"1M", 2_630_016 * time.Second},  // 30.44 days
		{"1y", 31_557_600 * time.Second}, // 365.25 days
		{"1y", time.Duration(365.25 * 24 * float64(time.Hour))},
		{"5 m", 5 * time.Minute},
		{"  45s  ", 45 * time.Second},
		{"0s", 0},
		{"10ns", 10},
		{"3nsec", 3},
		{"3nanos", 3},
		{"7us", 7 * time.Microsecond},
		{"7usec", 7 * time.Microsecond},
		{"7µs", 7 * time.Microsecond},
		{"8msec", 8 * time.Millisecond},
		{"8millis", 8 * time.Millisecond},
		{"2sec", 2 * time.Second},
		{"2secs", 2 * time.Second},
		{"1second", time.Second},
		{"2seconds", 2 * time.Second},
		{"2min", 2 * time.Minute},
		{"2mins", 2 * time.Minute},
		{"1minute", time.Minute},
		{"2minutes", 2 * time.Minute},
		{"1hr", time.Hour},
		{"2hrs", 2 * time.Hour},
		{"1hour", time.Hour},
		{"2hours", 2 * time.Hour},
		{"1day", 24 * time.Hour},
		{"2days", 48 * time.Hour},
		{"1week", 7 * 24 * time.Hour},
		{"2weeks", 14 * 24 * time.Hour},
		{"1month", 2_630_016 * time.Second},
		{"2months", 2 * 2_630_016 * time.Second},
		{"1year", 31_557_600 * time.Second},
		{"2years", 2 * 31_557_600 * time.Second},
		{"1d 2h 3m 4s 5ms 6us 7ns", 24*time.Hour + 2*time.Hour + 3*time.Minute + 4*time.Second +
			5*time.Millisecond + 6*time.Microsecond + 7},
	}
	for _, tc := range tests {
		got, err := ParseDuration(tc.in)
		if err != nil {
			t.Errorf("ParseDuration(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestParseDurationRejects(t *testing.T) {
	tests := []struct {
		in     string
		reason string
	}{
		{"", "empty"},
		{"   ", "empty"},
		{"5", "a unit must follow 5"},
		{"1h 30", "a unit must follow 30"},
		{"1.5h", "a unit must follow 1"},
		{"-5s", "expected a number"},
		{"s", "expected a number"},
		{"5x", `unknown unit "x"`},
		{"5 S", `unknown unit "S"`}, // units are case-sensitive
		{"5H", `unknown unit "H"`},
		{"none", "expected a number"},
		{"300y", "too long"},
		{"99999999999999999999s", "too long"},
		{"200y 200y", "too long"},
		{"5s,", "expected a number"},
	}
	for _, tc := range tests {
		_, err := ParseDuration(tc.in)
		var de *DurationError
		if !errors.As(err, &de) {
			t.Errorf("ParseDuration(%q): got %v, want a *DurationError", tc.in, err)
			continue
		}
		if de.Input != tc.in || !strings.Contains(de.Reason, tc.reason) {
			t.Errorf("ParseDuration(%q): %v, want reason containing %q", tc.in, err, tc.reason)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{500 * time.Millisecond, "500ms"},
		{90 * time.Minute, "1h 30m"},
		{7 * 24 * time.Hour, "7d"},
		{31_557_600 * time.Second, "365d 6h"},
		{-time.Second, "-1s"},
		{time.Second + 1, "1s 1ns"},
		{math.MinInt64, "-106751d 23h 47m 16s 854ms 775us 808ns"},
	}
	for _, tc := range tests {
		if got := FormatDuration(tc.in); got != tc.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tc.in, got, tc.want)
		}
		if tc.in >= 0 {
			back, err := ParseDuration(tc.want)
			if err != nil || back != tc.in {
				t.Errorf("ParseDuration(FormatDuration(%v)) = %v, %v", tc.in, back, err)
			}
		}
	}
}
