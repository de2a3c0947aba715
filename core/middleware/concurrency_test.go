package middleware

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
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
