package emitter

import "testing"

func TestQueue(t *testing.T) {
	q := newQueue(3)
	for i := int32(0); i < 3; i++ {
		if !q.push(record{partition: i}) {
			t.Fatalf("push %d refused below the limit", i)
		}
	}
	if !q.full() || q.push(record{partition: 3}) {
		t.Fatal("a full queue took a fourth record")
	}
	select {
	case <-q.ready:
	default:
		t.Fatal("no token after pushes into an empty queue")
	}
	select {
	case <-q.ready:
		t.Fatal("a second token: only a push into an empty queue leaves one")
	default:
	}
	for i := int32(0); i < 2; i++ {
		if r, ok := q.pop(); !ok || r.partition != i {
			t.Fatalf("pop %d: got %v %v", i, r.partition, ok)
		}
	}
	if q.len() != 1 || q.full() {
		t.Fatalf("len %d after two pops of three", q.len())
	}
	if n := q.clear(); n != 1 || q.len() != 0 {
		t.Fatalf("clear dropped %d, left %d", n, q.len())
	}
	if _, ok := q.pop(); ok {
		t.Fatal("pop from a cleared queue")
	}
	q.push(record{})
	select {
	case <-q.ready:
	default:
		t.Fatal("no token after a push into a cleared queue")
	}
}

// A steady trickle through a large queue must not make the whole queue
// resident, as a channel of that capacity does: pushing and popping far
// more records than fit allocates about nothing once warmed.
func TestQueueMemoryFollowsWhatWaits(t *testing.T) {
	q := newQueue(DefaultCapacity)
	allocs := testing.AllocsPerRun(10_000, func() {
		q.push(record{})
		q.pop()
	})
	if allocs > 0.01 {
		t.Fatalf("%.3f allocations per record through a mostly empty queue", allocs)
	}
}
