package offsets

import (
	"math/rand"
	"testing"
	"time"
)

func TestWatermark(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name   string
		take   []int64
		finish []int64
		want   int64
		left   int
	}{
		{"nothing finished", []int64{0, 1, 2}, nil, None, 3},
		{"in order", []int64{0, 1, 2}, []int64{0, 1}, 1, 1},
		{"out of order waits for the lowest", []int64{0, 1, 2}, []int64{2, 1}, None, 3},
		{"out of order then the lowest", []int64{0, 1, 2}, []int64{2, 1, 0}, 2, 0},
		{"gaps do not block", []int64{3, 7, 20}, []int64{3, 7}, 7, 1},
		{"all finished with gaps", []int64{3, 7, 20}, []int64{20, 7, 3}, 20, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := New(8)
			for _, o := range tt.take {
				if err := tr.Take(o, now); err != nil {
					t.Fatal(err)
				}
			}
			for _, o := range tt.finish {
				if _, err := tr.Finish(o); err != nil {
					t.Fatal(err)
				}
			}
			if tr.Watermark() != tt.want || tr.Outstanding() != tt.left {
				t.Fatalf("watermark %d outstanding %d, want %d and %d", tr.Watermark(), tr.Outstanding(), tt.want, tt.left)
			}
			if tt.want != None && tr.Commit() != tt.want+1 {
				t.Fatalf("commit %d, want %d", tr.Commit(), tt.want+1)
			}
		})
	}
}

func TestMisuseIsRejected(t *testing.T) {
	now := time.Now()
	tr := New(2)
	if err := tr.Take(5, now); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
	}{
		{"rewind", tr.Take(5, now)},
		{"finish unknown", func() error { _, err := tr.Finish(4); return err }()},
	}
	for _, tt := range tests {
		if tt.err == nil {
			t.Errorf("%s: want an error", tt.name)
		}
	}
	if err := tr.Take(6, now); err != nil {
		t.Fatal(err)
	}
	if !tr.Full() || tr.Take(7, now) == nil {
		t.Fatal("a full tracker must refuse Take")
	}
	if _, err := tr.Finish(6); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Finish(6); err == nil {
		t.Fatal("double finish must be an error")
	}
}

func TestOldest(t *testing.T) {
	t0 := time.Unix(100, 0)
	tr := New(4)
	if _, _, ok := tr.Oldest(); ok {
		t.Fatal("empty tracker has no oldest")
	}
	_ = tr.Take(1, t0)
	_ = tr.Take(2, t0.Add(time.Second))
	_, _ = tr.Finish(1)
	o, at, ok := tr.Oldest()
	if !ok || o != 2 || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("oldest = %d %v %v", o, at, ok)
	}
}

// TestFindAcrossGapsAndWraps checks that every taken offset is found and
// no other, with and without gaps, for windows that wrap the ring.
func TestFindAcrossGapsAndWraps(t *testing.T) {
	tests := []struct {
		name  string
		steps []int64 // distance from the previous offset taken
	}{
		{"consecutive", []int64{1, 1, 1, 1, 1, 1, 1}},
		{"a gap at the front", []int64{1, 5, 1, 1, 1, 1, 1}},
		{"a gap at the back", []int64{1, 1, 1, 1, 1, 1, 9}},
		{"gaps everywhere", []int64{2, 3, 1, 4, 1, 7, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := New(len(tt.steps))
			now := time.Now()
			// Wrap the ring first, so the window straddles its end.
			for o := int64(0); o < 5; o++ {
				_ = tr.Take(o, now)
				_, _ = tr.Finish(o)
			}
			taken := map[int64]bool{}
			o := int64(4)
			for _, d := range tt.steps {
				o += d
				if err := tr.Take(o, now); err != nil {
					t.Fatal(err)
				}
				taken[o] = true
			}
			for q := int64(0); q <= o+2; q++ {
				if got := tr.find(q) != nil; got != taken[q] {
					t.Errorf("find(%d) = %v, want %v", q, got, taken[q])
				}
			}
			// Finishing from the back leaves the watermark until the front is done.
			for q := o; q > 4; q-- {
				if taken[q] {
					if _, err := tr.Finish(q); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tr.Watermark() != o || tr.Outstanding() != 0 {
				t.Errorf("watermark %d outstanding %d, want %d and 0", tr.Watermark(), tr.Outstanding(), o)
			}
		})
	}
}

// TestRandomOrderMatchesModel finishes offsets in random order, across many
// wraps of the ring, and checks the watermark against a direct computation.
func TestRandomOrderMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	const capacity = 16
	tr := New(capacity)
	finished := map[int64]bool{}
	var taken []int64
	next := int64(0)
	now := time.Now()
	for step := 0; step < 20000; step++ {
		if !tr.Full() && rng.Intn(2) == 0 {
			next += int64(1 + rng.Intn(3)) // gaps of up to two offsets
			if err := tr.Take(next, now); err != nil {
				t.Fatal(err)
			}
			taken = append(taken, next)
			continue
		}
		var open []int64
		for _, o := range taken {
			if !finished[o] {
				open = append(open, o)
			}
		}
		if len(open) == 0 {
			continue
		}
		o := open[rng.Intn(len(open))]
		if _, err := tr.Finish(o); err != nil {
			t.Fatal(err)
		}
		finished[o] = true
		want := None
		for _, o := range taken {
			if !finished[o] {
				break
			}
			want = o
		}
		if tr.Watermark() != want {
			t.Fatalf("step %d: watermark %d, want %d", step, tr.Watermark(), want)
		}
	}
}

// BenchmarkFinishDeepWindow finishes offsets out of order in a window of
// thousands (a consumer with a large max_uncommitted).
func BenchmarkFinishDeepWindow(b *testing.B) {
	const window = 4096
	tr := New(window)
	now := time.Now()
	for o := int64(0); o < window/2; o++ {
		_ = tr.Take(o, now)
	}
	rng := rand.New(rand.NewSource(1))
	next := int64(window / 2)
	pending := make([]int64, 0, window)
	for o := int64(0); o < next; o++ {
		pending = append(pending, o)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := rng.Intn(len(pending))
		o := pending[j]
		pending[j] = pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		if _, err := tr.Finish(o); err != nil {
			b.Fatal(err)
		}
		for !tr.Full() && len(pending) < window/2 {
			_ = tr.Take(next, now)
			pending = append(pending, next)
			next++
		}
	}
}

func BenchmarkTakeFinish(b *testing.B) {
	tr := New(64)
	now := time.Now()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		o := int64(i)
		_ = tr.Take(o, now)
		if i >= 32 {
			_, _ = tr.Finish(o - 32)
		}
	}
}
