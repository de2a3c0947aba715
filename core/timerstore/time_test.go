package timerstore

import (
	"encoding/hex"
	"math"
	"testing"
	"time"
)

func TestTimeOfRoundsHalfUp(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name string
		in   time.Time
		want Time
	}{
		{"whole second", base, 1_700_000_000},
		{"x.4999 rounds down", base.Add(499_900_000 * time.Nanosecond), 1_700_000_000},
		{"x.499999999 rounds down", base.Add(499_999_999 * time.Nanosecond), 1_700_000_000},
		{"x.5 rounds up", base.Add(500 * time.Millisecond), 1_700_000_001},
		{"x.9 rounds up", base.Add(900 * time.Millisecond), 1_700_000_001},
		{"epoch", time.Unix(0, 0), 0},
		{"before the epoch clamps to 0", time.Unix(-10, 0), 0},
		{"-0.4 s rounds to 0", time.Unix(0, 0).Add(-400 * time.Millisecond), 0},
		{"last second", time.Unix(math.MaxUint32, 0), math.MaxUint32},
		{"after 2106 clamps", time.Unix(math.MaxUint32, 600_000_000), math.MaxUint32},
		{"far future clamps", time.Unix(1<<40, 0), math.MaxUint32},
	}
	for _, tt := range tests {
		if got := TimeOf(tt.in); got != tt.want {
			t.Errorf("%s: TimeOf(%v) = %d, want %d", tt.name, tt.in, got, tt.want)
		}
	}
	if got := Time(1_700_000_000).Std(); !got.Equal(base) || got.Location() != time.UTC {
		t.Errorf("Std = %v, want %v in UTC", got, base)
	}
}

func TestSlabOf(t *testing.T) {
	tests := []struct {
		t    Time
		size uint32
		want uint32
	}{
		{0, 3600, 0},
		{3599, 3600, 0},
		{3600, 3600, 1},
		{math.MaxUint32, 1, math.MaxUint32},
		{math.MaxUint32, 3600, math.MaxUint32 / 3600},
		{12345, 0, 0},
	}
	for _, tt := range tests {
		if got := SlabOf(tt.t, tt.size); got != tt.want {
			t.Errorf("SlabOf(%d, %d) = %d, want %d", tt.t, tt.size, got, tt.want)
		}
	}
	if got := slabEnd(math.MaxUint32, 2); got != (int64(math.MaxUint32)+1)*2 {
		t.Errorf("slabEnd overflowed: %d", got)
	}
}

// Vectors computed with Python's uuid.uuid5(uuid.NAMESPACE_URL, name).
func TestSegmentIDIsUUIDv5OfURLNamespace(t *testing.T) {
	tests := []struct {
		group, topic string
		partition    int32
		want         string
	}{
		{"g", "t", 3, "a972f77d088b57b29901946b841ede81"},
		{"my-group", "my-topic", 0, "282c22324fa352b487a482924ad6307e"},
	}
	for _, tt := range tests {
		id := SegmentID(tt.group, tt.topic, tt.partition)
		if got := hex.EncodeToString(id[:]); got != tt.want {
			t.Errorf("SegmentID(%q, %q, %d) = %s, want %s", tt.group, tt.topic, tt.partition, got, tt.want)
		}
	}
	if got := segmentName("g", "t", -1); got != "g:t/-1" {
		t.Errorf("segmentName = %q", got)
	}
}

func TestTTLRules(t *testing.T) {
	now := time.Unix(1_000_000_000, 0)
	year := 365 * 24 * time.Hour
	tests := []struct {
		name      string
		now       int64 // epoch seconds; 1e9 when zero
		target    int64
		retention time.Duration
		want      int
	}{
		{"future target adds retention", 0, now.Unix() + 100, time.Hour, 3700},
		{"past target keeps retention", 0, now.Unix() - 100, time.Hour, 3600},
		{"present target keeps retention", 0, now.Unix(), year, 31_536_000},
		{"just below the limit", 0, now.Unix() + 630_719_999 - 3600, time.Hour, 630_719_999},
		{"at the limit: no TTL", 0, now.Unix() + 630_720_000 - 3600, time.Hour, 0},
		{"far beyond: no TTL, not clamped", 0, now.Unix() + 1<<40, time.Hour, 0},
		{"huge retention: no TTL", 0, now.Unix(), time.Duration(math.MaxInt64), 0},
		{"expiring on the last accepted second", 1<<31 - 10_000, 1<<31 - 10_000 + 100, 9898 * time.Second, 9998},
		{"expiring after 2038-01-19: no TTL", 1<<31 - 10_000, 1<<31 - 10_000 + 100, 9899 * time.Second, 0},
	}
	for _, tt := range tests {
		at := now
		if tt.now != 0 {
			at = time.Unix(tt.now, 0)
		}
		if got := RowTTL(tt.target, at, tt.retention); got != tt.want {
			t.Errorf("%s: RowTTL = %d, want %d", tt.name, got, tt.want)
		}
	}
}
