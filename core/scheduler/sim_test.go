package scheduler

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// A deterministic simulation of the engine around a scheduler: keys with
// queues of events, at most one attempt of a key at a time (the engine's
// key queues), permits, handlers that take a fixed time, and a fake
// clock. An attempt that ends is charged, its key's next event asks for a
// permit, and then the permit is released: the order of the engine's
// asynchronous drive (the outcome leaves the stack before the permit).

type simAttempt struct {
	key    string
	seq    int // the event's position in its key's queue
	demand Demand
	asked  int64
	start  int64
}

type simKey struct {
	name    string
	demand  Demand
	queued  int // events not yet started; -1: never runs out
	next    int
	running bool
	ran     []int // seq of each attempt, in the order they ran
}

type sim struct {
	t       *testing.T
	now     int64
	dur     map[string]int64 // handler time by key; default dur
	def     int64
	s       Scheduler[*simAttempt]
	keys    map[string]*simKey
	running []*simAttempt
	busy    [2]int64 // handler time by class
	waits   map[string][]int64
	starved map[string]bool
}

type schedulerMaker func(cb Callbacks[*simAttempt], clock func() int64) Scheduler[*simAttempt]

func fairMaker(opts Options) schedulerMaker {
	return func(cb Callbacks[*simAttempt], clock func() int64) Scheduler[*simAttempt] {
		opts.Clock = clock
		return NewFair(opts, cb)
	}
}

func fifoMaker(n int) schedulerMaker {
	return func(cb Callbacks[*simAttempt], _ func() int64) Scheduler[*simAttempt] { return NewFIFO(n, cb) }
}

func newSim(t *testing.T, make schedulerMaker, dur time.Duration) *sim {
	s := &sim{t: t, now: int64(time.Hour), def: int64(dur), dur: map[string]int64{}, keys: map[string]*simKey{},
		waits: map[string][]int64{}}
	s.s = make(Callbacks[*simAttempt]{
		Key:       func(a *simAttempt) Key { return KeyOf("t", 0, a.key) },
		Gone:      func(*simAttempt) bool { return false },
		Granted:   func(a *simAttempt) { s.begin(a) },
		Dismissed: func(a *simAttempt) { t.Errorf("attempt of %s dismissed", a.key) },
	}, func() int64 { return s.now })
	return s
}

// add queues n events for key (n < 0: an endless backlog).
func (s *sim) add(key string, d Demand, n int) {
	k := s.keys[key]
	if k == nil {
		k = &simKey{name: key, demand: d}
		s.keys[key] = k
	}
	if n < 0 || k.queued < 0 {
		k.queued = -1
	} else {
		k.queued += n
	}
	s.ask(k)
}

// ask starts the key's next event if it has one and none is running.
func (s *sim) ask(k *simKey) {
	if k.running || k.queued == 0 {
		return
	}
	if k.queued > 0 {
		k.queued--
	}
	k.running = true
	a := &simAttempt{key: k.name, seq: k.next, demand: k.demand, asked: s.now}
	k.next++
	if s.s.Acquire(a, a.demand) {
		s.begin(a)
	}
}

func (s *sim) begin(a *simAttempt) {
	a.start = s.now
	s.waits[a.key] = append(s.waits[a.key], s.now-a.asked)
	s.running = append(s.running, a)
	k := s.keys[a.key]
	k.ran = append(k.ran, a.seq)
}

func (s *sim) durOf(key string) int64 {
	if d, ok := s.dur[key]; ok {
		return d
	}
	return s.def
}

// runUntil advances the clock, ending attempts in the order they end,
// until the clock reaches end.
func (s *sim) runUntil(end int64) {
	for {
		if s.s.InUse() > s.s.Size() {
			s.t.Fatalf("%d permits in use, %d exist", s.s.InUse(), s.s.Size())
		}
		first := -1
		for i, a := range s.running {
			if first < 0 || a.start+s.durOf(a.key) < s.running[first].start+s.durOf(s.running[first].key) {
				first = i
			}
		}
		if first < 0 {
			s.now = end
			return
		}
		a := s.running[first]
		at := a.start + s.durOf(a.key)
		if at > end {
			s.now = end
			return
		}
		s.now = at
		s.running = append(s.running[:first], s.running[first+1:]...)
		used := s.now - a.start
		s.busy[a.demand] += used
		s.s.Charge(a, a.demand, used)
		k := s.keys[a.key]
		k.running = false
		s.ask(k)
		s.s.Release()
	}
}

func (s *sim) failureShare() float64 {
	return float64(s.busy[Failure]) / float64(s.busy[Normal]+s.busy[Failure])
}

func (s *sim) checkOrder() {
	for _, k := range s.keys {
		for i, seq := range k.ran {
			if seq != i {
				s.t.Fatalf("key %s ran its events in the order %v", k.name, k.ran[:i+1])
			}
		}
	}
}

var documented = Options{Permits: 8, FailureWeight: 0.3, MaxWait: 2 * time.Minute, WaitWeight: 200, CacheSize: 8192}

// With both classes saturated, failure demand gets its configured share
// of handler time; first come first served gives it its share of the
// demand instead.
func TestSimFailureShare(t *testing.T) {
	tests := []struct {
		name  string
		make  schedulerMaker
		share float64
	}{
		{"fair, documented weight 0.3", fairMaker(documented), 0.3},
		{"fair, weight 0.5", fairMaker(with(documented, func(o *Options) { o.FailureWeight = 0.5 })), 0.5},
		{"fair, weight 0.1", fairMaker(with(documented, func(o *Options) { o.FailureWeight = 0.1 })), 0.1},
		{"fair, weight 0: retries only when nothing else waits", fairMaker(with(documented, func(o *Options) { o.FailureWeight = 0 })), 0},
		// 40 failing keys against 40 fresh ones: half of the time.
		{"first come first served", fifoMaker(documented.Permits), 0.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSim(t, tc.make, 10*time.Millisecond)
			for i := 0; i < 40; i++ {
				s.add(fmt.Sprintf("fresh-%d", i), Normal, -1)
				s.add(fmt.Sprintf("failing-%d", i), Failure, -1)
			}
			s.runUntil(s.now + int64(30*time.Second)) // warm up
			s.busy = [2]int64{}
			s.runUntil(s.now + int64(2*time.Minute))
			if got := s.failureShare(); math.Abs(got-tc.share) > 0.02 {
				t.Fatalf("failure demand had %.3f of the handler time, want %.2f ± 0.02", got, tc.share)
			}
			s.checkOrder()
		})
	}
}

// A key with one event does not wait behind a key with a long backlog:
// the backlog's key has handler time, the single event's key has none.
// First come first served makes it wait behind every backlog's next
// event.
func TestSimBacklogDoesNotStarveASingleEvent(t *testing.T) {
	const dur = 10 * time.Millisecond
	for _, tc := range []struct {
		name string
		make schedulerMaker
		fair bool
	}{
		{"fair", fairMaker(with(documented, func(o *Options) { o.Permits = 2 })), true},
		{"first come first served", fifoMaker(2), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, tc.make, dur)
			for i := 0; i < 6; i++ {
				s.add(fmt.Sprintf("backlog-%d", i), Normal, 100_000)
			}
			s.runUntil(s.now + int64(30*time.Second) + int64(dur)/2)
			s.add("single", Normal, 1)
			s.runUntil(s.now + int64(time.Second))
			w := s.waits["single"]
			if len(w) != 1 {
				t.Fatalf("the single event ran %d times", len(w))
			}
			if waited := time.Duration(w[0]); tc.fair != (waited <= dur) {
				t.Fatalf("the single event waited %v (fair: at most one handler call, %v; first come first served: longer)", waited, dur)
			}
			s.checkOrder()
		})
	}
}

// The wait boost bounds how long a key with much virtual time waits while
// fresh keys keep coming: it runs within max_wait. Without the boost
// (wait_weight 0) it waits for as long as they come.
func TestSimWaitBoostBoundsTheWait(t *testing.T) {
	const dur = 10 * time.Millisecond
	for _, tc := range []struct {
		name    string
		weight  float64
		bounded bool
	}{
		{"documented boost", 200, true},
		{"no boost", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := with(documented, func(o *Options) { o.Permits = 2; o.WaitWeight = tc.weight })
			s := newSim(t, fairMaker(opts), dur)
			// The heavy key ran for a minute of handler time just now.
			s.s.Charge(&simAttempt{key: "heavy"}, Normal, int64(time.Minute))
			s.add("fresh-first-0", Normal, 1)
			s.add("fresh-first-1", Normal, 1)
			s.add("heavy", Normal, 1)
			// Fresh keys, one event each, as many as the permits can run:
			// whenever a permit frees, fresh keys wait for it, and have
			// not waited long.
			end := s.now + int64(3*time.Minute)
			for n := 0; s.now < end; n++ {
				for i := 0; i < 2; i++ {
					s.add(fmt.Sprintf("fresh-%d-%d", n, i), Normal, 1)
				}
				s.runUntil(s.now + int64(dur))
			}
			w := s.waits["heavy"]
			if tc.bounded {
				if len(w) != 1 || time.Duration(w[0]) > documented.MaxWait {
					t.Fatalf("the heavy key waited %v, want at most max_wait %v", durations(w), documented.MaxWait)
				}
				t.Logf("the heavy key waited %v", time.Duration(w[0]))
				return
			}
			if len(w) != 0 {
				t.Fatalf("without a boost the heavy key ran after %v; the test shows nothing", durations(w))
			}
		})
	}
}

func with(o Options, f func(*Options)) Options {
	f(&o)
	return o
}

func durations(ns []int64) []time.Duration {
	out := make([]time.Duration, len(ns))
	for i, n := range ns {
		out[i] = time.Duration(n)
	}
	return out
}
