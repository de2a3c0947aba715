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
