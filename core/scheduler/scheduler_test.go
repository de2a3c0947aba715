package scheduler

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waiter is a test attempt: a key, and how its wait ended.
type waiter struct {
	key     string
	granted chan struct{}
	gone    atomic.Bool
	ended   atomic.Int32 // 1 granted, 2 dismissed
}

func newWaiter(key string) *waiter { return &waiter{key: key, granted: make(chan struct{}, 1)} }

func testCallbacks(t *testing.T) Callbacks[*waiter] {
	return Callbacks[*waiter]{
		Key:  func(w *waiter) Key { return KeyOf("t", 0, w.key) },
		Gone: func(w *waiter) bool { return w.gone.Load() },
		Granted: func(w *waiter) {
			if !w.ended.CompareAndSwap(0, 1) {
				t.Errorf("%s: granted after its wait ended", w.key)
			}
			w.granted <- struct{}{}
		},
		Dismissed: func(w *waiter) {
			if !w.ended.CompareAndSwap(0, 2) {
				t.Errorf("%s: dismissed after its wait ended", w.key)
			}
		},
	}
}

type fakeClock struct{ now atomic.Int64 }

func (c *fakeClock) read() int64             { return c.now.Load() }
func (c *fakeClock) advance(d time.Duration) { c.now.Add(int64(d)) }

func newClock() *fakeClock {
	c := &fakeClock{}
	c.now.Store(int64(time.Hour))
	return c
}

func both(t *testing.T, n int, clock func() int64) map[string]Scheduler[*waiter] {
	return map[string]Scheduler[*waiter]{
		"fair": NewFair(with(documented, func(o *Options) { o.Permits = n; o.Clock = clock }), testCallbacks(t)),
		"fifo": NewFIFO(n, testCallbacks(t)),
	}
}

func TestAcquireAndRelease(t *testing.T) {
	for name, s := range both(t, 2, newClock().read) {
		t.Run(name, func(t *testing.T) {
			a, b, c := newWaiter("a"), newWaiter("b"), newWaiter("c")
			if !s.Acquire(a, Normal) || !s.Acquire(b, Normal) {
				t.Fatal("free permits were not taken at once")
			}
			if s.Acquire(c, Normal) || s.Waiting() != 1 || s.InUse() != 2 {
				t.Fatalf("a third attempt: waiting %d, in use %d; want it to wait", s.Waiting(), s.InUse())
			}
			if s.TryAcquire() {
				t.Fatal("TryAcquire took a permit while an attempt waits")
			}
			s.Release()
			<-c.granted
			if s.Waiting() != 0 || s.InUse() != 2 {
				t.Fatalf("after a release: waiting %d, in use %d; want 0, 2", s.Waiting(), s.InUse())
			}
			s.Release()
			s.Release()
			if s.InUse() != 0 || !s.TryAcquire() {
				t.Fatal("permits did not come back")
			}
			s.Release()
		})
	}
}

// A waiter that is gone when its turn comes is dismissed, and its permit
// goes to the next; Cancel dismisses the gone ones at once.
func TestGoneWaiters(t *testing.T) {
	for name, s := range both(t, 1, newClock().read) {
		t.Run(name, func(t *testing.T) {
			holder := newWaiter("holder")
			s.Acquire(holder, Normal)
			gone, next, cancelled := newWaiter("gone"), newWaiter("next"), newWaiter("cancelled")
			s.Acquire(gone, Normal)
			s.Acquire(next, Normal)
			gone.gone.Store(true)
			s.Release()
			<-next.granted
			if gone.ended.Load() != 2 {
				t.Fatal("the gone waiter was not dismissed")
			}
			s.Acquire(cancelled, Normal)
			cancelled.gone.Store(true)
			s.Cancel()
			if cancelled.ended.Load() != 2 || s.Waiting() != 0 {
				t.Fatalf("Cancel: ended %d, waiting %d", cancelled.ended.Load(), s.Waiting())
			}
			s.Release()
			if s.InUse() != 0 {
				t.Fatalf("%d permits still in use", s.InUse())
			}
		})
	}
}

// A callback that panics does not leave the other waiters of its batch
// waiting forever: they are still told, and then the panic goes on.
func TestAPanickingCallbackStillEndsTheOtherWaits(t *testing.T) {
	cb := testCallbacks(t)
	granted := cb.Granted
	cb.Granted = func(w *waiter) {
		granted(w)
		panic("granted: " + w.key)
	}
	for name, s := range map[string]Scheduler[*waiter]{
		"fair": NewFair(with(documented, func(o *Options) { o.Permits = 1; o.Clock = newClock().read }), cb),
		"fifo": NewFIFO(1, cb),
	} {
		t.Run(name, func(t *testing.T) {
			holder, gone, next := newWaiter("holder"), newWaiter("gone"), newWaiter("next")
			s.Acquire(holder, Normal)
			s.Acquire(gone, Normal)
			s.Acquire(next, Normal)
			gone.gone.Store(true)
			func() {
				defer func() {
					if p := recover(); p != "granted: next" {
						t.Errorf("recovered %v, want the callback's panic", p)
					}
				}()
				s.Release()
			}()
			if next.ended.Load() != 1 || gone.ended.Load() != 2 {
				t.Fatalf("after the panic: next ended %d (want 1, granted), gone ended %d (want 2, dismissed)", next.ended.Load(), gone.ended.Load())
			}
			s.Release()
			if s.InUse() != 0 || s.Waiting() != 0 {
				t.Fatalf("in use %d, waiting %d; want 0, 0", s.InUse(), s.Waiting())
			}
		})
	}
}

// Many goroutines acquiring and releasing, some of them gone while they
// wait: never more permits than exist, and every one comes back.
func TestNoPermitLeaksUnderContention(t *testing.T) {
	for name, s := range both(t, 3, newClock().read) {
		t.Run(name, func(t *testing.T) {
			var wg sync.WaitGroup
			var peak, now atomic.Int64
			for g := 0; g < 16; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 300; i++ {
						w := newWaiter(string(rune('a' + g)))
						if i%5 == 0 {
							w.gone.Store(true)
						}
						if !s.Acquire(w, Demand(i&1)) {
							for w.ended.Load() == 0 {
								if w.gone.Load() {
									s.Cancel()
								}
								select {
								case <-w.granted:
								case <-time.After(time.Millisecond):
								}
							}
							if w.ended.Load() == 2 {
								continue
							}
						}
						n := now.Add(1)
						for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
						}
						now.Add(-1)
						s.Charge(w, Demand(i&1), int64(time.Microsecond))
						s.Release()
					}
				}()
			}
			wg.Wait()
			if peak.Load() > 3 || s.InUse() != 0 || s.Waiting() != 0 {
				t.Fatalf("peak %d (limit 3), in use %d, waiting %d", peak.Load(), s.InUse(), s.Waiting())
			}
		})
	}
}

func TestVirtualTimeDecays(t *testing.T) {
	clock := newClock()
	f := NewFair(with(documented, func(o *Options) { o.Clock = clock.read }), testCallbacks(t))
	w := newWaiter("k")
	f.Charge(w, Normal, int64(10*time.Second))
	key := KeyOf("t", 0, "k")
	near := func(got, want float64) bool { return math.Abs(got-want) < 0.01*want+1e-9 }
	if got := f.KeyTime(key); !near(got, 10) {
		t.Fatalf("key time %v, want 10", got)
	}
	clock.advance(HalfLife)
	if got := f.KeyTime(key); !near(got, 5) {
		t.Fatalf("after one half-life: %v, want 5", got)
	}
	f.Charge(w, Normal, int64(5*time.Second)) // decayed to now, then added
	clock.advance(2 * HalfLife)
	if got := f.KeyTime(key); !near(got, 2.5) {
		t.Fatalf("after two more: %v, want 2.5", got)
	}
	if got, want := f.ClassTime(Normal), 2.5; !near(got, want) {
		t.Fatalf("normal class time %v, want %v", got, want)
	}
	if got := f.ClassTime(Failure); got != 0 {
		t.Fatalf("failure class time %v, want 0", got)
	}
}

// Keys beyond scheduler_cache_size take over slots: the table holds the
// next power of two of slots, and no more.
func TestKeyTimesAreBounded(t *testing.T) {
	clock := newClock()
	f := NewFair(with(documented, func(o *Options) { o.CacheSize = 100; o.Clock = clock.read }), testCallbacks(t))
	if len(f.keys.slots) != 128 {
		t.Fatalf("%d slots for a cache size of 100, want 128", len(f.keys.slots))
	}
	kept := 0
	for i := 0; i < 10_000; i++ {
		f.Charge(newWaiter(string(rune(i))), Normal, int64(time.Second))
	}
	for i := 0; i < 10_000; i++ {
		if f.KeyTime(KeyOf("t", 0, string(rune(i)))) > 0 {
			kept++
		}
	}
	if kept > 128 || kept < 64 {
		t.Fatalf("%d keys kept, want at most 128 (and most slots used)", kept)
	}
}

// Two keys of one set both keep their time; a third takes the slot of
// the one with less.
func TestKeyTimesKeepTheHeavierKeyOfASet(t *testing.T) {
	kt := newKeyTimes(8) // four sets of two
	heavy, light, third := Key(2), Key(3), Key(2+8)
	kt.add(heavy, 10, 0)
	kt.add(light, 1, 0)
	if kt.at(heavy, 0) != 10 || kt.at(light, 0) != 1 {
		t.Fatalf("a set of two kept %v and %v, want 10 and 1", kt.at(heavy, 0), kt.at(light, 0))
	}
	kt.add(third, 5, 0)
	if kt.at(heavy, 0) != 10 || kt.at(light, 0) != 0 || kt.at(third, 0) != 5 {
		t.Fatalf("after a third key: %v, %v, %v; want 10, 0 (the lighter one gave way), 5",
			kt.at(heavy, 0), kt.at(light, 0), kt.at(third, 0))
	}
	if other := Key(4); kt.at(other, 0) != 0 {
		t.Fatal("a key of another set has time")
	}
}

// Within a class, the key with the least virtual time goes first; equal
// times go in arrival order.
func TestFairOrderWithinAClass(t *testing.T) {
	clock := newClock()
	f := NewFair(with(documented, func(o *Options) { o.Permits = 1; o.Clock = clock.read }), testCallbacks(t))
	holder := newWaiter("holder")
	f.Acquire(holder, Normal)
	f.Charge(newWaiter("busy"), Normal, int64(3*time.Second))
	f.Charge(newWaiter("some"), Normal, int64(time.Second))
	ws := []*waiter{newWaiter("busy"), newWaiter("idle-1"), newWaiter("some"), newWaiter("idle-2")}
	for _, w := range ws {
		f.Acquire(w, Normal)
		clock.advance(time.Millisecond)
	}
	order := grantOrder(f, ws)
	f.Release()
	want := []string{"idle-1", "idle-2", "some", "busy"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
}

// A weight of 1 gives every contended permit to retries, a weight of 0 to
// first attempts.
func TestClassWeightsAtTheExtremes(t *testing.T) {
	for _, tc := range []struct {
		weight float64
		first  Demand
	}{{0, Normal}, {1, Failure}} {
		clock := newClock()
		f := NewFair(with(documented, func(o *Options) { o.Permits = 1; o.FailureWeight = tc.weight; o.Clock = clock.read }), testCallbacks(t))
		f.Acquire(newWaiter("holder"), Normal)
		n, fl := newWaiter("normal"), newWaiter("failure")
		f.Acquire(n, Normal)
		f.Acquire(fl, Failure)
		f.Release()
		got := Normal
		select {
		case <-fl.granted:
			got = Failure
		case <-n.granted:
		}
		if got != tc.first {
			t.Fatalf("failure weight %v: %v went first, want %v", tc.weight, got, tc.first)
		}
		f.Release()
		f.Release()
	}
}

// A due timer's first attempt goes ahead of the messages waiting in its
// class even when its key is the busiest, but not ahead of a message that
// has waited max_wait (four times the timer's head start), so messages
// cannot starve behind timers.
func TestDueTimersGoFirstUntilMaxWait(t *testing.T) {
	clock := newClock()
	cb := testCallbacks(t)
	cb.Due = func(w *waiter) bool { return w.key[0] == 't' }
	f := NewFair(with(documented, func(o *Options) { o.Permits = 1; o.Clock = clock.read }), cb)
	f.Acquire(newWaiter("holder"), Normal)
	// The timer's key is the busiest there is.
	f.Charge(newWaiter("timer-busy"), Normal, int64(30*time.Second))
	msgs := []*waiter{newWaiter("m-1"), newWaiter("m-2")}
	for _, w := range msgs {
		f.Acquire(w, Normal)
		clock.advance(time.Second)
	}
	tm := newWaiter("timer-busy")
	f.Acquire(tm, Normal)
	if got := grantOrder(f, append([]*waiter{tm}, msgs...)); got[0] != "timer-busy" {
		t.Fatalf("grant order %v: the due timer should go first", got)
	}

	// A message that has waited max_wait has four times the boost a fresh
	// timer starts with, which outweighs the timer key's head of 30 s.
	old := newWaiter("m-old")
	f.Acquire(old, Normal)
	clock.advance(documented.MaxWait)
	tm2 := newWaiter("timer-busy")
	f.Acquire(tm2, Normal)
	if got := grantOrder(f, []*waiter{old, tm2}); got[0] != "m-old" {
		t.Fatalf("grant order %v: a message that waited max_wait should go before a busy key's timer", got)
	}
	f.Release()
}

// grantOrder releases one permit per waiter of ws, which all wait behind
// a held one, and returns their keys in the order they were granted.
func grantOrder(s Scheduler[*waiter], ws []*waiter) []string {
	var order []string
	for range ws {
		s.Release()
		for _, w := range ws {
			select {
			case <-w.granted:
				order = append(order, w.key)
			default:
			}
		}
	}
	return order
}

// A due timer's wait starts half of max_wait back; early in a process
// with a max_wait longer than its clock has run, that is before zero.
// The attempts still wait in order and are granted.
func TestFairDueBeforeClockZero(t *testing.T) {
	clock := &fakeClock{}
	clock.now.Store(int64(time.Second))
	cb := testCallbacks(t)
	cb.Due = func(w *waiter) bool { return w.key != "message" }
	f := NewFair(with(documented, func(o *Options) { o.Permits = 1; o.Clock = clock.read; o.MaxWait = 3 * time.Hour }), cb)
	if !f.Acquire(newWaiter("first"), Normal) {
		t.Fatal("the first attempt did not get the free permit")
	}
	timer, msg := newWaiter("timer"), newWaiter("message")
	for _, w := range []*waiter{msg, timer} {
		if f.Acquire(w, Normal) {
			t.Fatalf("%s got a permit while none was free", w.key)
		}
	}
	f.Release()
	select {
	case <-timer.granted: // a due timer goes ahead of a fresh message
	default:
		t.Fatal("the due timer was not granted the released permit")
	}
	f.Release()
	select {
	case <-msg.granted:
	default:
		t.Fatal("the message was not granted the next permit")
	}
	f.Release()
}
