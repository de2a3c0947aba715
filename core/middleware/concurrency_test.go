package middleware

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/permit"
)

func TestLimiterBoundsConcurrentAttempts(t *testing.T) {
	const slots = 3
	l := NewLimiter(slots)
	var now, peak atomic.Int32
	inv := Chain(func(*event.Context, event.Event) error {
		n := now.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
		now.Add(-1)
		return nil
	}, l.Middleware())
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := newCtx()
			defer cancel(nil)
			_ = inv(ctx, &event.Message{})
		}()
	}
	wg.Wait()
	if peak.Load() > slots || peak.Load() < 2 {
		t.Fatalf("peak concurrency %d, want between 2 and %d", peak.Load(), slots)
	}
	if l.InUse() != 0 {
		t.Fatalf("%d slots still taken", l.InUse())
	}
}

func TestLimiterWaitEndsOnCancellation(t *testing.T) {
	l := NewLimiter(1)
	block := make(chan struct{})
	inv := Chain(func(*event.Context, event.Event) error { <-block; return nil }, l.Middleware())
	first, cancelFirst := newCtx()
	defer cancelFirst(nil)
	go func() { _ = inv(first, &event.Message{}) }()
	for l.InUse() == 0 {
		time.Sleep(time.Millisecond)
	}
	second, cancel := newCtx()
	done := make(chan error)
	go func() { done <- inv(second, &event.Message{}) }()
	cancel(event.ErrRevoked)
	if err := <-done; !errors.Is(err, event.ErrRevoked) {
		t.Fatalf("err = %v, want ErrRevoked", err)
	}
	close(block)
}

// TestLimiterUnderContention mixes attempts that finish with attempts
// cancelled while they wait, and checks the bound holds and every slot
// comes back.
func TestLimiterUnderContention(t *testing.T) {
	const slots = 4
	l := NewLimiter(slots)
	var now atomic.Int32
	inv := Chain(func(*event.Context, event.Event) error {
		if n := now.Add(1); n > slots {
			t.Errorf("%d attempts at once, limit %d", n, slots)
		}
		time.Sleep(50 * time.Microsecond)
		now.Add(-1)
		return nil
	}, l.Middleware())
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				ctx, cancel := newCtx()
				if i%7 == g%7 {
					go cancel(event.ErrRevoked)
				}
				_ = inv(ctx, &event.Message{})
				cancel(nil)
			}
		}()
	}
	wg.Wait()
	if l.InUse() != 0 {
		t.Fatalf("%d slots still taken", l.InUse())
	}
}

// TestLimiterLease covers a permit leased by a goroutine and lent to the
// invocations it runs (Lease, internal/permit).
func TestLimiterLease(t *testing.T) {
	errFail := errors.New("fail")
	// run invokes a handler returning err through l on a context lent a
	// permit of limiter id, and returns the permits taken while it ran.
	run := func(t *testing.T, l *Limiter, id uint32, err error) (*event.Context, int) {
		t.Helper()
		var during int
		inv := Chain(func(*event.Context, event.Event) error {
			during = l.InUse()
			return err
		}, l.Middleware())
		ctx, cancel := newCtx()
		t.Cleanup(func() { cancel(nil) })
		permit.Lend(ctx, id)
		if got := inv(ctx, &event.Message{}); !errors.Is(got, err) {
			t.Fatalf("err = %v, want %v", got, err)
		}
		return ctx, during
	}
	tests := []struct {
		name string
		test func(t *testing.T)
	}{
		{"a lent attempt takes no permit and keeps the lease", func(t *testing.T) {
			l := NewLimiter(1)
			if !l.Lease() {
				t.Fatal("no lease on an idle limiter")
			}
			ctx, during := run(t, l, l.ID(), nil)
			if during != 1 || permit.Lent(ctx) != l.ID() || l.InUse() != 1 {
				t.Fatalf("during %d, lent %d, in use %d: want 1, %d, 1", during, permit.Lent(ctx), l.InUse(), l.ID())
			}
			l.EndLease()
			if l.InUse() != 0 {
				t.Fatalf("%d permits taken after the lease ended", l.InUse())
			}
		}},
		{"a failed attempt gives the permit back", func(t *testing.T) {
			l := NewLimiter(1)
			if !l.Lease() {
				t.Fatal("no lease on an idle limiter")
			}
			ctx, _ := run(t, l, l.ID(), errFail)
			if permit.Lent(ctx) != 0 || l.InUse() != 0 {
				t.Fatalf("lent %d, in use %d after a failure: want 0, 0", permit.Lent(ctx), l.InUse())
			}
		}},
		{"a waiting attempt gets the permit, and no lease is granted meanwhile", func(t *testing.T) {
			l := NewLimiter(1)
			if !l.Lease() {
				t.Fatal("no lease on an idle limiter")
			}
			waiter := make(chan error, 1)
			wctx, wcancel := newCtx()
			defer wcancel(nil)
			go func() {
				waiter <- Chain(func(*event.Context, event.Event) error { return nil }, l.Middleware())(wctx, &event.Message{})
			}()
			for l.waiting.Load() == 0 {
				time.Sleep(time.Millisecond)
			}
			ctx, _ := run(t, l, l.ID(), nil)
			if err := <-waiter; err != nil {
				t.Fatalf("the waiting attempt failed: %v", err)
			}
			if permit.Lent(ctx) != 0 || l.InUse() != 0 {
				t.Fatalf("lent %d, in use %d: want 0, 0", permit.Lent(ctx), l.InUse())
			}
			l.waiting.Store(1) // a permit free, but an attempt about to queue
			if l.Lease() {
				t.Fatal("a lease was granted while an attempt waits")
			}
			l.waiting.Store(0)
			l.used.Store(1) // full, nobody waiting
			if l.Lease() {
				t.Fatal("a lease was granted on a full limiter")
			}
		}},
		{"another limiter's permit is not honoured", func(t *testing.T) {
			l, other := NewLimiter(1), NewLimiter(1)
			ctx, during := run(t, l, other.ID(), nil)
			if during != 1 || l.InUse() != 0 || permit.Lent(ctx) != other.ID() {
				t.Fatalf("during %d, in use %d, lent %d: want 1, 0, %d", during, l.InUse(), permit.Lent(ctx), other.ID())
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.test)
	}
}
