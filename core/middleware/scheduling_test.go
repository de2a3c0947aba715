package middleware

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
	"github.com/prosody-events/prosody-go/core/scheduler"
)

func TestSchedulerBoundsConcurrentAttempts(t *testing.T) {
	for _, drive := range []string{"Invoke", "Start"} {
		t.Run(drive, func(t *testing.T) {
			const slots = 3
			l := NewFIFOScheduler(slots)
			var now, peak atomic.Int32
			release := make(chan struct{})
			h := handlerFunc(func(*event.Context, event.Event) error {
				n := now.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				<-release
				now.Add(-1)
				return nil
			})
			s := NewStack(Handler(h, l), l)
			var wg sync.WaitGroup
			for i := 0; i < 40; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := newInv()
					defer cancel(nil)
					if drive == "Invoke" {
						_ = invoke(s, ctx, &event.Message{})
					} else {
						// A run of Start with a Go handler: the walk goes
						// on on the goroutine that hands the slot over.
						<-start(s, ctx, &event.Message{})
					}
				}()
			}
			eventually(t, "the slots are taken and the rest wait", func() bool {
				return now.Load() == slots && int64(l.Waiting()) == 40-slots
			})
			close(release)
			wg.Wait()
			if peak.Load() != slots || l.InUse() != 0 {
				t.Fatalf("peak %d (want %d), %d slots still taken", peak.Load(), slots, l.InUse())
			}
		})
	}
}

// A run waiting for a slot ends with the cause when its invocation is
// cancelled: at once under Invoke, which watches its context; at
// CancelWaiting under Start, called by the owner of the parent context.
func TestSchedulerWaitEndsOnCancellation(t *testing.T) {
	for _, drive := range []string{"Invoke", "Start"} {
		t.Run(drive, func(t *testing.T) {
			l := NewFIFOScheduler(1)
			block := make(chan struct{})
			s := NewStack(Handler(handlerFunc(func(*event.Context, event.Event) error { <-block; return nil }), l), l)
			first, cancelFirst := newInv()
			defer cancelFirst(nil)
			firstDone := make(chan error, 1)
			go func() { firstDone <- invoke(s, first, &event.Message{}) }()
			eventually(t, "the slot is taken", func() bool { return l.InUse() == 1 })
			second, cancel := newInv()
			done := make(chan error, 1)
			if drive == "Invoke" {
				go func() { done <- invoke(s, second, &event.Message{}) }()
			} else {
				s.Start(new(Run), second, &event.Message{}, outcome(done))
			}
			eventually(t, "the second run waits", func() bool { return int64(l.Waiting()) == 1 })
			cancel(invocation.ErrRevoked)
			if drive == "Start" {
				s.CancelWaiting()
			}
			if err := <-done; !errors.Is(err, invocation.ErrRevoked) {
				t.Fatalf("err = %v, want ErrRevoked", err)
			}
			close(block)
			<-firstDone
			if l.InUse() != 0 || int64(l.Waiting()) != 0 {
				t.Fatalf("in use %d, waiting %d after both ended", l.InUse(), int64(l.Waiting()))
			}
		})
	}
}

// A waiter whose invocation was cancelled is not handed a slot: it ends
// with its cause, and the slot goes to the next.
func TestSchedulerSkipsCancelledWaiters(t *testing.T) {
	l := NewFIFOScheduler(1)
	block := make(chan struct{})
	ran := make(chan string, 4)
	h := handlerFunc(func(ctx *event.Context, _ event.Event) error {
		ran <- ctx.Key()
		if ctx.Key() == "first" {
			<-block
		}
		return nil
	})
	s := NewStack(Handler(h, l), l)
	first, _ := newInvKey("first")
	firstDone := make(chan error, 1)
	go func() { firstDone <- invoke(s, first, &event.Message{}) }()
	<-ran
	gone, cancelGone := newInvKey("gone")
	goneDone := start(s, gone, &event.Message{})
	next, _ := newInvKey("next")
	nextDone := start(s, next, &event.Message{})
	eventually(t, "both wait", func() bool { return int64(l.Waiting()) == 2 })
	cancelGone(invocation.ErrRevoked)
	close(block)
	if err := <-goneDone; !errors.Is(err, invocation.ErrRevoked) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	<-firstDone
	if err := <-nextDone; err != nil {
		t.Fatal(err)
	}
	if k := <-ran; k != "next" {
		t.Fatalf("%q ran after the first, want next", k)
	}
}

// TestSchedulerUnderContention mixes attempts that finish with attempts
// cancelled while they wait, and checks the bound holds and every slot
// comes back.
func TestSchedulerUnderContention(t *testing.T) {
	const slots = 4
	l := NewFIFOScheduler(slots)
	var now atomic.Int32
	h := handlerFunc(func(*event.Context, event.Event) error {
		if n := now.Add(1); n > slots {
			t.Errorf("%d attempts at once, limit %d", n, slots)
		}
		time.Sleep(50 * time.Microsecond)
		now.Add(-1)
		return nil
	})
	s := NewStack(Handler(h, l), l)
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				ctx, cancel := newInv()
				if i%7 == g%7 {
					go cancel(invocation.ErrRevoked)
				}
				_ = invoke(s, ctx, &event.Message{})
				cancel(nil)
			}
		}()
	}
	wg.Wait()
	if l.InUse() != 0 {
		t.Fatalf("%d slots still taken", l.InUse())
	}
}

// TestSchedulerLease covers a permit leased by a goroutine and lent to the
// invocations it runs (Lease, invocation.Lend).
func TestSchedulerLease(t *testing.T) {
	errFail := errors.New("fail")
	// run invokes a handler returning err through l on a context lent a
	// permit of limiter id, and returns the permits taken while it ran.
	run := func(t *testing.T, l *Scheduler, id uint32, err error) (*invocation.Context, int) {
		t.Helper()
		var during int
		s := NewStack(Handler(handlerFunc(func(*event.Context, event.Event) error {
			during = l.InUse()
			return err
		}), l), l)
		ctx, cancel := newInv()
		t.Cleanup(func() { cancel(nil) })
		ctx.Lend(id)
		if got := invoke(s, ctx, &event.Message{}); !errors.Is(got, err) {
			t.Fatalf("err = %v, want %v", got, err)
		}
		return ctx, during
	}
	tests := []struct {
		name string
		test func(t *testing.T)
	}{
		{"a lent attempt takes no permit and keeps the lease", func(t *testing.T) {
			l := NewFIFOScheduler(1)
			if !l.Lease() {
				t.Fatal("no lease on an idle limiter")
			}
			ctx, during := run(t, l, l.ID(), nil)
			if during != 1 || ctx.Lent() != l.ID() || l.InUse() != 1 {
				t.Fatalf("during %d, lent %d, in use %d: want 1, %d, 1", during, ctx.Lent(), l.InUse(), l.ID())
			}
			l.EndLease()
			if l.InUse() != 0 {
				t.Fatalf("%d permits taken after the lease ended", l.InUse())
			}
		}},
		{"a failure outside the scheduler gives the lent permit back for the backoff", func(t *testing.T) {
			l := NewFIFOScheduler(1)
			if !l.Lease() {
				t.Fatal("no lease on an idle limiter")
			}
			clock := newFakeClock()
			outside := &failingBefore{left: 1, err: errFail}
			s := NewStack(Handler(handlerFunc(func(*event.Context, event.Event) error { return nil }), l),
				NewRetry(RetryPolicy{MaxRetries: Unlimited, Base: time.Hour, MaxDelay: time.Hour}), outside, l).WithClock(clock)
			ctx, cancel := newInv()
			defer cancel(nil)
			ctx.Lend(l.ID())
			done := make(chan error, 1)
			go func() { done <- invoke(s, ctx, &event.Message{}) }()
			<-clock.added
			if l.InUse() != 0 || !l.Lease() {
				t.Fatalf("in use %d during the backoff: want the lent permit back", l.InUse())
			}
			l.EndLease()
			clock.fire()
			if err := <-done; err != nil {
				t.Fatalf("err = %v after the retry", err)
			}
			if l.InUse() != 0 || ctx.Lent() != 0 {
				t.Fatalf("in use %d, lent %d at the end: want 0, 0", l.InUse(), ctx.Lent())
			}
		}},
		{"a failed attempt gives the permit back", func(t *testing.T) {
			l := NewFIFOScheduler(1)
			if !l.Lease() {
				t.Fatal("no lease on an idle limiter")
			}
			ctx, _ := run(t, l, l.ID(), errFail)
			if ctx.Lent() != 0 || l.InUse() != 0 {
				t.Fatalf("lent %d, in use %d after a failure: want 0, 0", ctx.Lent(), l.InUse())
			}
		}},
		{"a waiting attempt gets the permit, and no lease is granted meanwhile", func(t *testing.T) {
			l := NewFIFOScheduler(1)
			if !l.Lease() {
				t.Fatal("no lease on an idle limiter")
			}
			wctx, wcancel := newInv()
			defer wcancel(nil)
			waiter := start(NewStack(Handler(handlerFunc(func(*event.Context, event.Event) error { return nil }), l), l), wctx, &event.Message{})
			eventually(t, "an attempt waits", func() bool { return int64(l.Waiting()) == 1 })
			ctx, _ := run(t, l, l.ID(), nil)
			if err := <-waiter; err != nil {
				t.Fatalf("the waiting attempt failed: %v", err)
			}
			if ctx.Lent() != 0 || l.InUse() != 0 {
				t.Fatalf("lent %d, in use %d: want 0, 0", ctx.Lent(), l.InUse())
			}
			if !l.Lease() {
				t.Fatal("no lease on an idle scheduler")
			}
			if l.Lease() {
				t.Fatal("a lease was granted on a full scheduler")
			}
			l.EndLease()
		}},
		{"a permit reserved ahead of the invocation is charged from its grant", func(t *testing.T) {
			for _, held := range []bool{false, true} {
				var now atomic.Int64
				now.Store(int64(time.Hour))
				l := NewFairScheduler(scheduler.Options{Permits: 1, FailureWeight: 0.3, MaxWait: 2 * time.Minute, WaitWeight: 200, CacheSize: 64, Clock: now.Load})
				ev := &event.Message{Topic: "t", Key: "k"}
				if !l.Reserve(keyOf(ev), Failure, func() bool { return false }, func(bool) {}) {
					t.Fatal("no permit reserved on an idle scheduler")
				}
				mark := l.GrantMark()
				now.Add(int64(time.Second)) // held, waiting for its key's turn
				s := NewStack(Handler(handlerFunc(func(*event.Context, event.Event) error { return nil }), l), l)
				ctx, cancel := newInv()
				if held {
					ctx.LendHeld(l.ID(), mark)
				} else {
					ctx.Lend(l.ID())
				}
				if err := invoke(s, ctx, ev); err != nil {
					t.Fatal(err)
				}
				cancel(nil)
				l.EndLease()
				charged := l.Policy().(*scheduler.Fair[Waiter]).KeyTime(keyOf(ev))
				if held && (charged < 0.9 || charged > 1.1) || !held && charged > 0.01 {
					t.Errorf("held %v: key charged %.3f s, want %s", held, charged, map[bool]string{true: "about the 1 s held", false: "nothing"}[held])
				}
				if l.InUse() != 0 {
					t.Fatalf("%d permits in use at the end", l.InUse())
				}
			}
		}},
		{"another limiter's permit is not honoured", func(t *testing.T) {
			l, other := NewFIFOScheduler(1), NewFIFOScheduler(1)
			ctx, during := run(t, l, other.ID(), nil)
			if during != 1 || l.InUse() != 0 || ctx.Lent() != other.ID() {
				t.Fatalf("during %d, in use %d, lent %d: want 1, 0, %d", during, l.InUse(), ctx.Lent(), other.ID())
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.test)
	}
}

// failingBefore is a layer outside the scheduler that fails its first
// left attempts with err before they reach it (a defer layer whose store
// refuses).
type failingBefore struct {
	left int
	err  error
}

func (f *failingBefore) Before(*Run) Step {
	if f.left > 0 {
		f.left--
		return Result(f.err)
	}
	return Continue
}

func (f *failingBefore) After(_ *Run, err error) Step { return Result(err) }
