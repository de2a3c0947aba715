package monopolization

import (
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/telemetry"
)

// t0 is a whole second on the telemetry clock, where the parts of the
// tests' 16-second windows begin.
var t0 = telemetry.Now() / int64(time.Second) * int64(time.Second)

// call tells tr of one call of key from start to end (after t0).
func call(tr *Tracker, key string, start, end time.Duration) { callFrom(tr, t0, key, start, end) }

// callFrom is call on a clock whose parts begin at origin.
func callFrom(tr *Tracker, origin int64, key string, start, end time.Duration) {
	tr.Observe(telemetry.Event{Kind: telemetry.HandlerInvoked, At: origin + int64(start), Topic: "t", Key: key})
	tr.Observe(telemetry.Event{Kind: telemetry.HandlerSucceeded, Start: origin + int64(start), At: origin + int64(end), Topic: "t", Key: key})
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// apart is a tracker in which none of keys share a slot: the slot is
// picked by a hash with a random seed, so a test of two keys would
// otherwise fail whenever they happen to collide.
func apart(window time.Duration, size int, threshold float64, keys ...TPK) *Tracker {
	for {
		tr := NewTracker(window, size, threshold)
		seen := map[uint64]bool{}
		ok := true
		for _, k := range keys {
			slot := tr.hash(k) & tr.mask
			ok = ok && !seen[slot]
			seen[slot] = true
		}
		if ok {
			return tr
		}
	}
}

func TestTrackerShare(t *testing.T) {
	window := 16 * time.Second // one second per part
	tests := []struct {
		name  string
		calls [][2]time.Duration
		at    time.Duration
		want  float64
	}{
		{"idle key", nil, 10 * time.Second, 0},
		{"one call of a quarter window", [][2]time.Duration{{0, 4 * time.Second}}, 10 * time.Second, 0.25},
		{"calls add up", [][2]time.Duration{{0, 2 * time.Second}, {3 * time.Second, 5 * time.Second}}, 10 * time.Second, 0.25},
		{"a call longer than the window counts for the window", [][2]time.Duration{{0, 40 * time.Second}}, 40 * time.Second, 1},
		{"old calls leave the window", [][2]time.Duration{{0, 8 * time.Second}}, 30 * time.Second, 0},
		{"a part leaves the window whole", [][2]time.Duration{{0, 2 * time.Second}}, 17500 * time.Millisecond, 1.0 / 16},
		// 34 s is two rings of parts later: the second call's part is the
		// first's, and must start again from nothing.
		{"a part of an old call is reset for a new one", [][2]time.Duration{{0, time.Second}, {34 * time.Second, 35 * time.Second}}, 35 * time.Second, 1.0 / 16},
		// Told late of a call from before the window, the tracker must not
		// take the part back from the newer call that has it.
		{"a late call does not reset a newer part", [][2]time.Duration{{34 * time.Second, 35 * time.Second}, {0, time.Second}}, 35 * time.Second, 1.0 / 16},
	}
	// A part keeps its epoch modulo the range of its bits (2^32 parts of a
	// second here): the same calls count the same on the clock's start,
	// where epochs are small, and where they fill the bits and wrap.
	wrap := int64(1<<32) * int64(time.Second)
	origins := []struct {
		name   string
		origin int64
	}{
		{"clock start", t0},
		{"epochs in the upper half of their bits", wrap / 4 * 3},
		{"epochs wrapping within the window", wrap - int64(5*time.Second)},
	}
	for _, o := range origins {
		for _, tt := range tests {
			t.Run(o.name+"/"+tt.name, func(t *testing.T) {
				tr := NewTracker(window, 10, 0.5)
				for _, c := range tt.calls {
					callFrom(tr, o.origin, "k", c[0], c[1])
				}
				if got := tr.Share(TPK{"t", 0, "k"}, o.origin+int64(tt.at)); !near(got, tt.want) {
					t.Fatalf("Share = %v, want %v", got, tt.want)
				}
			})
		}
	}
}

// A part's time saturates below its epoch's bits: however long a call a
// part is told of, its epoch stays what it was.
func TestTrackerPartSaturates(t *testing.T) {
	tr := NewTracker(16*time.Second, 8, 0.5)
	epoch := t0 / tr.gran
	var p atomic.Uint64
	for i := 0; i < 8; i++ {
		tr.add(&p, epoch, 1<<62)
	}
	if d := tr.behind(p.Load(), epoch); d != 0 {
		t.Fatalf("the part moved %d epochs", d)
	}
	if got, full := tr.busyOf(p.Load()), int64(1)<<tr.busyBits-1; got != full {
		t.Fatalf("busy %d, want the most its bits hold, %d", got, full)
	}
}

func TestTrackerKeysApart(t *testing.T) {
	tr := apart(16*time.Second, 10, 0.5, TPK{"t", 0, "hot"}, TPK{"t", 0, "cold"})
	call(tr, "hot", 0, 15*time.Second)
	call(tr, "cold", 0, time.Second)
	if s := tr.Share(TPK{"t", 0, "hot"}, t0+int64(15*time.Second)); s < 0.9 {
		t.Fatalf("hot key share %v", s)
	}
	if s := tr.Share(TPK{"t", 0, "cold"}, t0+int64(15*time.Second)); !near(s, 1.0/16) {
		t.Fatalf("cold key share %v", s)
	}
	if s := tr.Share(TPK{"t", 1, "hot"}, t0+int64(15*time.Second)); s != 0 {
		t.Fatalf("the same key of another partition has share %v", s)
	}
	if s := tr.Share(TPK{"u", 0, "hot"}, t0+int64(15*time.Second)); s != 0 {
		t.Fatalf("the same key of another topic has share %v", s)
	}
}

func TestTrackerExceeds(t *testing.T) {
	now := telemetry.Now()
	hot, cold := TPK{"t", 0, "hot"}, TPK{"t", 0, "cold"}
	tr := apart(time.Minute, 100, 0.5, hot, cold)
	if refuse, _ := tr.Exceeds(hot); refuse {
		t.Fatal("an idle tracker refuses")
	}
	tr.Observe(telemetry.Event{Kind: telemetry.HandlerSucceeded, Start: now - int64(20*time.Second), At: now, Topic: "t", Key: "cold"})
	tr.Observe(telemetry.Event{Kind: telemetry.HandlerSucceeded, Start: now - int64(40*time.Second), At: now, Topic: "t", Key: "hot"})
	if refuse, share := tr.Exceeds(hot); !refuse || share < 0.6 {
		t.Fatalf("two thirds of the window: refuse %v at %v", refuse, share)
	}
	if refuse, _ := tr.Exceeds(cold); refuse {
		t.Fatal("a third of the window is below half")
	}
	// A key above the limit at its last outcome cools down as the window
	// moves on, read at the time of the check.
	tr2 := NewTracker(time.Second, 100, 0.5)
	old := telemetry.Now() - int64(time.Minute)
	tr2.Observe(telemetry.Event{Kind: telemetry.HandlerSucceeded, Start: old - int64(time.Second), At: old, Topic: "t", Key: "hot"})
	if refuse, _ := tr2.Exceeds(hot); refuse {
		t.Fatal("a key hot a minute ago in a one-second window is refused")
	}
}

// The table is bounded: keys beyond it take over slots, and a key taking
// over a slot starts from nothing.
func TestTrackerIsBounded(t *testing.T) {
	tr := NewTracker(16*time.Second, 8, 0.5)
	if len(tr.slots) != 8 {
		t.Fatalf("%d slots, want 8", len(tr.slots))
	}
	for i := 0; i < 1000; i++ {
		call(tr, fmt.Sprintf("k%d", i), 0, time.Second)
	}
	if n := tr.Len(); n > 8 {
		t.Fatalf("tracking %d keys, want at most 8", n)
	}
	kept := 0
	for i := 0; i < 1000; i++ {
		s := tr.Share(TPK{"t", 0, fmt.Sprintf("k%d", i)}, t0+int64(2*time.Second))
		if s != 0 {
			kept++
			if !near(s, 1.0/16) {
				t.Fatalf("a kept key has share %v, want its own second only", s)
			}
		}
	}
	if kept == 0 || kept > 8 {
		t.Fatalf("%d keys kept", kept)
	}
	if n := len(NewTracker(time.Second, 8192, 0.5).slots); n != 8192 {
		t.Fatalf("%d slots for 8192", n)
	}
	if n := len(NewTracker(time.Second, 5000, 0.5).slots); n != 8192 {
		t.Fatalf("%d slots for 5000", n)
	}
}

func BenchmarkObserveAndExceeds(b *testing.B) {
	tr := NewTracker(5*time.Minute, 8192, 0.9)
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%05d", i)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			k := keys[i%len(keys)]
			i++
			tr.Exceeds(TPK{"bench", 3, k})
			now := telemetry.Now()
			tr.Observe(telemetry.Event{Kind: telemetry.HandlerSucceeded, Start: now, At: telemetry.Now(), Topic: "bench", Partition: 3, Key: k})
		}
	})
}
