package middleware

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
)

// hostStarter is an asynchronous handler whose attempts are finished by the
// test, from another goroutine, as a host language would.
type hostStarter struct {
	mu       sync.Mutex
	attempts []func(error) // done of each attempt, in start order
	started  chan struct{}
}

func newHostStarter() *hostStarter { return &hostStarter{started: make(chan struct{}, 1024)} }

func (h *hostStarter) start(_ *event.Context, _ event.Event, _ event.Prepared, done event.Done) {
	h.mu.Lock()
	h.attempts = append(h.attempts, done.Done)
	h.mu.Unlock()
	h.started <- struct{}{}
}

// finish waits for attempt i to start and ends it with err.
func (h *hostStarter) finish(t *testing.T, i int, err error) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		h.mu.Lock()
		n := len(h.attempts)
		h.mu.Unlock()
		if n > i {
			break
		}
		select {
		case <-h.started:
		case <-deadline:
			t.Fatalf("attempt %d never started (%d did)", i+1, n)
		}
	}
	h.mu.Lock()
	done := h.attempts[i]
	h.mu.Unlock()
	go done(err)
}

func (h *hostStarter) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.attempts)
}

// waitNoSlotsTaken waits for every slot to be free: an attempt reports its
// outcome before it releases its slot (so that an event started from the
// outcome gets it).
func waitNoSlotsTaken(t *testing.T, l *Limiter) {
	t.Helper()
	if !eventually(func() bool { return l.InUse() == 0 }) {
		t.Fatalf("%d slots still taken", l.InUse())
	}
}

// eventually polls cond for up to five seconds and reports whether it held.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// lenOf reads the length of a slice guarded by mu.
func lenOf[T any](mu *sync.Mutex, s *[]T) func() int {
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(*s)
	}
}

// doneFunc adapts a func to event.Done.
type doneFunc func(error)

func (f doneFunc) Done(err error) { f(err) }

func waitOutcome(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("no outcome")
		return nil
	}
}

func TestAsyncFollowsTheRetryPolicy(t *testing.T) {
	transient := errors.New("flaky")
	permanent := fault.Permanent(errors.New("bad input"))
	tests := []struct {
		name     string
		policy   *RetryPolicy
		outcomes []error // of successive attempts
		wantErr  error
	}{
		{"success", &RetryPolicy{MaxRetries: 3}, []error{nil}, nil},
		{"transient then success", &RetryPolicy{MaxRetries: 3}, []error{transient, transient, nil}, nil},
		{"retries spent", &RetryPolicy{MaxRetries: 1}, []error{transient, transient}, transient},
		{"permanent is final", &RetryPolicy{MaxRetries: Unlimited}, []error{permanent}, permanent},
		{"no policy: one attempt", nil, []error{transient}, transient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.policy != nil {
				tt.policy.Base, tt.policy.MaxDelay = time.Millisecond, 2*time.Millisecond
			}
			h := newHostStarter()
			timeouts := NewTimeouts(0)
			defer timeouts.Stop()
			a := &Async{Retry: tt.policy, Limiter: NewLimiter(1), Timeouts: timeouts, Start: h.start}
			ctx, cancel := newCtx()
			defer cancel(nil)
			out := make(chan error, 1)
			a.Run(new(AsyncRun), ctx, &event.Message{}, doneFunc(func(err error) { out <- err }))
			for i, err := range tt.outcomes {
				h.finish(t, i, err)
			}
			if err := waitOutcome(t, out); !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("outcome %v, want %v", err, tt.wantErr)
			}
			if h.count() != len(tt.outcomes) {
				t.Fatalf("%d attempts, want %d", h.count(), len(tt.outcomes))
			}
			waitNoSlotsTaken(t, a.Limiter)
		})
	}
}

func TestAsyncBackoffEndsOnCancellation(t *testing.T) {
	h := newHostStarter()
	timeouts := NewTimeouts(0)
	defer timeouts.Stop()
	a := &Async{Retry: &RetryPolicy{MaxRetries: Unlimited, Base: time.Hour, MaxDelay: time.Hour},
		Limiter: NewLimiter(1), Timeouts: timeouts, Start: h.start}
	ctx, cancel := newCtx()
	out := make(chan error, 1)
	a.Run(new(AsyncRun), ctx, &event.Message{}, doneFunc(func(err error) { out <- err }))
	h.finish(t, 0, errors.New("flaky"))
	time.Sleep(10 * time.Millisecond) // into the hour-long backoff
	cancel(event.ErrRevoked)
	if err := waitOutcome(t, out); !errors.Is(err, event.ErrRevoked) || !fault.IsTerminal(err) {
		t.Fatalf("outcome %v, want terminal ErrRevoked", err)
	}
	if h.count() != 1 {
		t.Fatalf("%d attempts after cancellation, want 1", h.count())
	}
}

func TestAsyncSharesSlotsWithWaitingAttempts(t *testing.T) {
	h := newHostStarter()
	timeouts := NewTimeouts(0)
	defer timeouts.Stop()
	l := NewLimiter(2)
	a := &Async{Limiter: l, Timeouts: timeouts, Start: h.start}
	const n = 6
	outs := make(chan error, n)
	for i := 0; i < n; i++ {
		ctx, cancel := newCtx()
		defer cancel(nil)
		a.Run(new(AsyncRun), ctx, &event.Message{}, doneFunc(func(err error) { outs <- err }))
	}
	// Only two start; each finish hands its slot to the next waiter.
	time.Sleep(10 * time.Millisecond)
	if got := h.count(); got != 2 {
		t.Fatalf("%d attempts started with 2 slots, want 2", got)
	}
	for i := 0; i < n; i++ {
		h.finish(t, i, nil)
		if err := waitOutcome(t, outs); err != nil {
			t.Fatalf("outcome %v", err)
		}
		if l.InUse() > 2 {
			t.Fatalf("%d slots in use", l.InUse())
		}
	}
	waitNoSlotsTaken(t, l)
}

func TestAsyncWaiterCancelledBeforeItsSlot(t *testing.T) {
	h := newHostStarter()
	timeouts := NewTimeouts(0)
	defer timeouts.Stop()
	l := NewLimiter(1)
	a := &Async{Limiter: l, Timeouts: timeouts, Start: h.start}
	first, cancelFirst := newCtx()
	defer cancelFirst(nil)
	firstOut := make(chan error, 1)
	a.Run(new(AsyncRun), first, &event.Message{}, doneFunc(func(err error) { firstOut <- err }))
	second, cancelSecond := newCtx()
	secondOut := make(chan error, 1)
	a.Run(new(AsyncRun), second, &event.Message{}, doneFunc(func(err error) { secondOut <- err }))
	third, cancelThird := newCtx()
	defer cancelThird(nil)
	thirdOut := make(chan error, 1)
	a.Run(new(AsyncRun), third, &event.Message{}, doneFunc(func(err error) { thirdOut <- err }))
	cancelSecond(event.ErrRevoked)
	// The owner of the cancelled invocations (a partition) says so.
	a.CancelWaiting()
	if err := waitOutcome(t, secondOut); !errors.Is(err, event.ErrRevoked) {
		t.Fatalf("waiting attempt ended with %v, want ErrRevoked", err)
	}
	// The third still waits, and gets the first's slot.
	h.finish(t, 0, nil)
	if err := waitOutcome(t, firstOut); err != nil {
		t.Fatalf("first outcome %v", err)
	}
	h.finish(t, 1, nil)
	if err := waitOutcome(t, thirdOut); err != nil {
		t.Fatalf("third outcome %v", err)
	}
	if h.count() != 2 {
		t.Fatalf("attempts %d, want 2", h.count())
	}
	waitNoSlotsTaken(t, l)
}

func TestAsyncAttemptTimeout(t *testing.T) {
	timeouts := NewTimeouts(20 * time.Millisecond)
	defer timeouts.Stop()
	// The handler ends its attempt when its context is cancelled, as a
	// host does on a cancellation notice.
	start := func(ctx *event.Context, _ event.Event, _ event.Prepared, done event.Done) {
		go func() {
			<-ctx.Done()
			done.Done(errors.New("gave up"))
		}()
	}
	a := &Async{Limiter: NewLimiter(1), Timeouts: timeouts, Start: start}
	ctx, cancel := newCtx()
	defer cancel(nil)
	out := make(chan error, 1)
	a.Run(new(AsyncRun), ctx, &event.Message{}, doneFunc(func(err error) { out <- err }))
	err := waitOutcome(t, out)
	var te timeoutError
	if !errors.As(err, &te) || fault.ClassOf(err) != fault.ClassTransient {
		t.Fatalf("outcome %v, want a transient timeout", err)
	}
}

// countedPrep is a prepared attempt that records what became of it.
type countedPrep struct {
	id        int
	discarded *atomic.Int32
}

func (p *countedPrep) Discard() { p.discarded.Add(1) }

func TestAsyncPreparesEachAttemptAndDiscardsUnstarted(t *testing.T) {
	var prepared, discarded atomic.Int32
	var startedWith []int
	var mu sync.Mutex
	var dones []event.Done
	timeouts := NewTimeouts(0)
	defer timeouts.Stop()
	a := &Async{
		Retry:    &RetryPolicy{MaxRetries: 1, Base: time.Millisecond, MaxDelay: time.Millisecond},
		Limiter:  NewLimiter(1),
		Timeouts: timeouts,
		Prepare: func(event.Event) event.Prepared {
			return &countedPrep{id: int(prepared.Add(1)), discarded: &discarded}
		},
		Start: func(_ *event.Context, _ event.Event, p event.Prepared, done event.Done) {
			mu.Lock()
			startedWith = append(startedWith, p.(*countedPrep).id)
			dones = append(dones, done)
			mu.Unlock()
		},
	}
	first, cancelFirst := newCtx()
	defer cancelFirst(nil)
	out := make(chan error, 2)
	a.Run(new(AsyncRun), first, &event.Message{}, doneFunc(func(err error) { out <- err }))
	// A second event waits for the only slot, prepared, then is cancelled.
	second, cancelSecond := newCtx()
	a.Run(new(AsyncRun), second, &event.Message{}, doneFunc(func(err error) { out <- err }))
	cancelSecond(event.ErrRevoked)
	a.CancelWaiting()
	if err := waitOutcome(t, out); !errors.Is(err, event.ErrRevoked) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	if discarded.Load() != 1 {
		t.Fatalf("%d prepared attempts discarded, want 1", discarded.Load())
	}
	// The first fails once (transient) and is retried with a fresh preparation.
	mu.Lock()
	d := dones[0]
	mu.Unlock()
	d.Done(errors.New("flaky"))
	doneCount := lenOf(&mu, &dones)
	eventually(func() bool { return doneCount() == 2 })
	mu.Lock()
	d = dones[len(dones)-1]
	got := append([]int(nil), startedWith...)
	mu.Unlock()
	d.Done(nil)
	if err := waitOutcome(t, out); err != nil {
		t.Fatalf("first event: %v", err)
	}
	// Attempts 1 and 3 are the first event's; 2 was the discarded waiter.
	if len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Fatalf("attempts started with preparations %v, want [1 3]", got)
	}
}

// An event started from another's outcome (RunNext) gets that event's slot
// ahead of events that were already waiting.
func TestAsyncRunNextTakesTheSlotFirst(t *testing.T) {
	h := newHostStarter()
	timeouts := NewTimeouts(0)
	defer timeouts.Stop()
	a := &Async{Limiter: NewLimiter(1), Timeouts: timeouts, Start: h.start}
	var order []string
	var mu sync.Mutex
	record := func(name string) event.Done {
		return doneFunc(func(error) { mu.Lock(); order = append(order, name); mu.Unlock() })
	}
	ctx, cancel := newCtx()
	defer cancel(nil)
	nextDone := record("next")
	a.Run(new(AsyncRun), ctx, &event.Message{}, doneFunc(func(error) {
		// The first event's outcome starts the next event of its key.
		a.RunNext(new(AsyncRun), ctx, &event.Message{}, nextDone)
	}))
	a.Run(new(AsyncRun), ctx, &event.Message{}, record("waiting"))
	h.finish(t, 0, nil) // the first ends: its slot goes to "next"
	h.finish(t, 1, nil) // attempt 2 must be "next"'s
	h.finish(t, 2, nil)
	orderCount := lenOf(&mu, &order)
	eventually(func() bool { return orderCount() == 2 })
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 2 || order[0] != "next" || order[1] != "waiting" {
		t.Fatalf("completion order %v, want [next waiting]", order)
	}
}

// Attempts far back in the queue are prepared only when their slot comes.
func TestAsyncPreparesLateWhenTheWaitIsLong(t *testing.T) {
	var prepared atomic.Int32
	var nilPrep atomic.Int32
	h := newHostStarter()
	timeouts := NewTimeouts(0)
	defer timeouts.Stop()
	a := &Async{
		Limiter:  NewLimiter(1),
		Timeouts: timeouts,
		Prepare: func(event.Event) event.Prepared {
			prepared.Add(1)
			return &countedPrep{discarded: new(atomic.Int32)}
		},
		Start: func(ctx *event.Context, ev event.Event, p event.Prepared, done event.Done) {
			if p == nil {
				nilPrep.Add(1)
			}
			h.start(ctx, ev, p, done)
		},
	}
	const n = 20
	ctx, cancel := newCtx()
	defer cancel(nil)
	outs := make(chan error, n)
	for i := 0; i < n; i++ {
		a.Run(new(AsyncRun), ctx, &event.Message{}, doneFunc(func(err error) { outs <- err }))
	}
	// One running and 16 waiting (16 x 1 slot) were prepared at once.
	if got := prepared.Load(); got != 17 {
		t.Fatalf("%d attempts prepared up front, want 17", got)
	}
	for i := 0; i < n; i++ {
		h.finish(t, i, nil)
		if err := waitOutcome(t, outs); err != nil {
			t.Fatal(err)
		}
	}
	if prepared.Load() != n || nilPrep.Load() != 0 {
		t.Fatalf("prepared %d, started unprepared %d; want %d and 0", prepared.Load(), nilPrep.Load(), n)
	}
}
