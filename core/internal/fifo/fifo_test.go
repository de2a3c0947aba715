package fifo

import (
	"slices"
	"testing"
)

// Items come out in the order they went in, across the array's growth
// and wrap-around; Remove keeps the others in order; TakeAll empties.
func TestQueue(t *testing.T) {
	var q Queue[int]
	var want []int
	next := 0
	for round := 0; round < 5; round++ {
		for i := 0; i < 100; i++ {
			q.Push(next)
			want = append(want, next)
			next++
		}
		for i := 0; i < 30; i++ {
			got, ok := q.Pop()
			if !ok || got != want[0] {
				t.Fatalf("pop %d, %v; want %d", got, ok, want[0])
			}
			want = want[1:]
		}
	}
	if q.Len() != len(want) {
		t.Fatalf("len %d, want %d", q.Len(), len(want))
	}
	dropped := q.Remove(func(v *int) bool { return *v%3 == 0 })
	kept := slices.DeleteFunc(slices.Clone(want), func(v int) bool { return v%3 == 0 })
	if dropped != len(want)-len(kept) {
		t.Fatalf("removed %d, want %d", dropped, len(want)-len(kept))
	}
	if got := q.TakeAll(); !slices.Equal(got, kept) {
		t.Fatalf("took %v, want %v", got, kept)
	}
	if _, ok := q.Pop(); ok || q.Len() != 0 || q.TakeAll() != nil {
		t.Fatal("the queue is not empty after TakeAll")
	}
}
