package keyqueue

import (
	"fmt"
	"math/rand"
	"sync"
	"testing"
)

func TestPushAndDone(t *testing.T) {
	q := New[int]()
	steps := []struct {
		op      string
		key     string
		val     int
		wantOK  bool
		wantVal int
	}{
		{"push", "a", 1, true, 0},
		{"push", "a", 2, false, 0},
		{"push", "b", 3, true, 0},
		{"push", "a", 4, false, 0},
		{"done", "a", 0, true, 2},
		{"done", "b", 0, false, 0},
		{"push", "b", 5, true, 0},
		{"done", "a", 0, true, 4},
		{"done", "a", 0, false, 0},
		{"push", "a", 6, true, 0},
	}
	for i, s := range steps {
		switch s.op {
		case "push":
			if got := q.Push(s.key, s.val); got != s.wantOK {
				t.Fatalf("step %d: Push(%s,%d) = %v, want %v", i, s.key, s.val, got, s.wantOK)
			}
		case "done":
			v, ok := q.Done(s.key)
			if ok != s.wantOK || v != s.wantVal {
				t.Fatalf("step %d: Done(%s) = %d,%v want %d,%v", i, s.key, v, ok, s.wantVal, s.wantOK)
			}
		}
	}
	if q.InFlight() != 2 || q.Waiting() != 0 {
		t.Fatalf("in flight %d waiting %d", q.InFlight(), q.Waiting())
	}
}

func TestCloseDropsWaitingAndStartsNothing(t *testing.T) {
	q := New[int]()
	q.Push("a", 1)
	q.Push("a", 2)
	q.Push("a", 3)
	q.Push("b", 4)
	dropped := q.Close()
	if len(dropped) != 2 {
		t.Fatalf("dropped %v, want the two waiting events", dropped)
	}
	if _, ok := q.Done("a"); ok {
		t.Fatal("a closed queue must start nothing")
	}
	if q.Push("c", 5) {
		t.Fatal("a closed queue must refuse new events")
	}
	if q.InFlight() != 1 {
		t.Fatalf("b is still in flight, got %d", q.InFlight())
	}
}

// TestConcurrentOrderPerKey runs events on goroutines the way the consumer
// does and checks that each key sees its events in order, one at a time,
// while different keys overlap.
func TestConcurrentOrderPerKey(t *testing.T) {
	type ev struct {
		key string
		seq int
	}
	q := New[ev]()
	var (
		mu      sync.Mutex
		running = map[string]bool{}
		last    = map[string]int{}
		maxPar  int
		par     int
		wg      sync.WaitGroup
	)
	var run func(e ev)
	run = func(e ev) {
		defer wg.Done()
		mu.Lock()
		if running[e.key] {
			t.Errorf("key %s has two events in flight", e.key)
		}
		if e.seq != last[e.key]+1 {
			t.Errorf("key %s: seq %d after %d", e.key, e.seq, last[e.key])
		}
		running[e.key], last[e.key] = true, e.seq
		par++
		if par > maxPar {
			maxPar = par
		}
		mu.Unlock()
		for i := 0; i < rand.Intn(200); i++ {
			_ = fmt.Sprint(i) // a little work so keys overlap
		}
		mu.Lock()
		running[e.key] = false
		par--
		mu.Unlock()
		if next, ok := q.Done(e.key); ok {
			go run(next)
		}
	}
	seq := map[string]int{}
	const events = 20000
	wg.Add(events)
	for i := 0; i < events; i++ {
		k := fmt.Sprintf("k%d", rand.Intn(50))
		seq[k]++
		e := ev{k, seq[k]}
		if q.Push(k, e) {
			go run(e)
		}
	}
	wg.Wait()
	for k, n := range seq {
		if last[k] != n {
			t.Errorf("key %s finished at %d of %d", k, last[k], n)
		}
	}
	if maxPar < 2 {
		t.Errorf("different keys never ran concurrently (max %d)", maxPar)
	}
	if q.InFlight() != 0 || q.Waiting() != 0 {
		t.Errorf("queue not empty: %d in flight, %d waiting", q.InFlight(), q.Waiting())
	}
}

func BenchmarkDistinctKeys(b *testing.B) {
	q := New[int]()
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", i)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		k := keys[i%len(keys)]
		q.Push(k, i)
		q.Done(k)
	}
}
