package scheduler

import "testing"

// BenchmarkFairPick is one release that grants the next of 500 waiting
// attempts and one acquire that queues another (what each completion
// costs a busy consumer whose admitted events wait for max_concurrency
// permits), on the system clock.
func BenchmarkFairPick(b *testing.B) {
	type attempt struct{ key Key }
	f := NewFair(with(documented, func(o *Options) { o.Permits = 32 }), Callbacks[*attempt]{
		Key:       func(a *attempt) Key { return a.key },
		Granted:   func(*attempt) {},
		Gone:      func(*attempt) bool { return false },
		Dismissed: func(*attempt) {},
	})
	attempts := make([]attempt, 10_000)
	for i := range attempts {
		attempts[i].key = Key(i * 7919)
	}
	next := 0
	queue := func() {
		a := &attempts[next%len(attempts)]
		next++
		f.Acquire(a, Demand(next%8/7)) // one in eight is a retry
	}
	for range 32 + 500 {
		queue()
	}
	b.ResetTimer()
	for range b.N {
		f.Release()
		queue()
	}
}
