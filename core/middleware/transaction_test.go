package middleware

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/deferral"
	"github.com/prosody-events/prosody-go/core/deferstore"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
	"github.com/prosody-events/prosody-go/core/state"
	"github.com/prosody-events/prosody-go/core/statestore"
	"github.com/prosody-events/prosody-go/core/timerstore"
)

// flakyComplete fails the first Complete after the state commit landed.
type flakyComplete struct {
	deferstore.MessageSegment
	fails atomic.Int32
}

func (f *flakyComplete) Complete(ctx context.Context, key string, offset int64) (int64, bool, error) {
	if f.fails.Add(-1) >= 0 {
		return 0, false, fault.Transient(errors.New("defer store timeout"))
	}
	return f.MessageSegment.Complete(ctx, key, offset)
}

// stateKey is where key "k" of topic "orders" keeps its state.
var stateKey = statestore.Key{Namespace: "group", Key: "orders\x00k"}

// A deferred message's retry commits its state, then the defer store's
// Complete fails: the outer retry runs the head message again, and the
// Transaction layer finds its marker and does not apply it twice.
func TestTransactionDeferredRetryIsAppliedOnce(t *testing.T) {
	ctx := context.Background()
	ds := deferstore.NewMemory()
	msgs, _ := ds.Messages(ctx, "group", "orders", 3)
	tms, _ := ds.Timers(ctx, "group", "orders", 3)
	flaky := &flakyComplete{MessageSegment: msgs}
	flaky.fails.Store(1)
	kv := statestore.NewMemory()
	svc := state.NewService(kv, "group", "", []config.StateCollection{
		{Name: "v", Kind: config.CollectionValue, Payload: config.PayloadJSON}}, true, nil)
	_ = svc.Register(ctx, []string{"orders"})
	sp, _ := svc.Partition(ctx, "orders", 3)
	msg := &event.Message{Topic: "orders", Partition: 3, Offset: 42, Key: "k"}
	part := deferral.NewPartition(&deferral.Partition{Topic: "orders", ID: 3, Messages: flaky, Timers: tms, Retries: &fakeRetries{},
		Load: func(context.Context, int64) (*event.Message, error) { return msg, nil }}, nil, nil)
	_ = msgs.DeferFirst(ctx, "k", 42)
	part.SetMessageDeferred("k", true)

	clock := newFakeClock()
	policy := &DeferPolicy{Enabled: true, Backoff: deferral.Backoff{Base: time.Second, MaxDelay: time.Minute, Jitter: jitter}}
	var calls atomic.Int32
	h := handlerFunc(func(c *event.Context, ev event.Event) error {
		calls.Add(1)
		v, err := state.ValueOf(c, "v")
		if err != nil {
			return err
		}
		item, ok, err := v.Get()
		if err != nil {
			return err
		}
		n := 0
		if ok {
			n, _ = strconv.Atoi(string(item))
		}
		return v.Set([]byte(strconv.Itoa(n + 1)))
	})
	to := newTimeouts(0, false)
	stack := NewStack(Handler(h, nil), NewRetry(RetryPolicy{MaxRetries: Unlimited}), NewMessageDefer(policy),
		Cancellation{}, to, &Transaction{}).WithClock(clock)
	inv := invocation.NewInvocation(context.Background(), "k")
	inv.SetEnv(&invocation.Env{Deferral: part, State: sp}, nil)
	ev := &deferral.Retry{Timer: event.Timer{Topic: "orders", Partition: 3, Key: "k", Time: time.Unix(1_700_000_000, 0)},
		Type: timerstore.DeferredMessage}
	done := make(chan error, 1)
	go func() { done <- invoke(stack, inv, ev) }()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			v, _, _ := kv.Value(ctx, stateKey, "v")
			if string(v) != "1" {
				t.Errorf("message 42 counted %s times", v)
			}
			return
		case <-clock.added:
			clock.fire()
		}
	}
}

func newStateEnv(t *testing.T) (statestore.Store, *state.Partition) {
	ctx := context.Background()
	kv := statestore.NewMemory()
	svc := state.NewService(kv, "group", "", []config.StateCollection{
		{Name: "v", Kind: config.CollectionValue, Payload: config.PayloadJSON},
		{Name: "w", Kind: config.CollectionValue, Payload: config.PayloadJSON}}, true, nil)
	_ = svc.Register(ctx, []string{"orders"})
	sp, err := svc.Partition(ctx, "orders", 3)
	if err != nil {
		t.Fatal(err)
	}
	return kv, sp
}

// With the timeout disabled the handler's context would be the
// invocation's, the same for every attempt: the layer gives each attempt
// its own, so a failed attempt's leftover work cannot write into the next
// attempt's transaction.
func TestTransactionWithoutTimeoutsEndsEachAttempt(t *testing.T) {
	ctx := context.Background()
	kv, sp := newStateEnv(t)
	clock := newFakeClock()
	var first atomic.Pointer[event.Context]
	var n atomic.Int32
	h := handlerFunc(func(c *event.Context, ev event.Event) error {
		if n.Add(1) == 1 {
			first.Store(c)
			return fault.Transient(errors.New("attempt 1 fails"))
		}
		v, _ := state.ValueOf(c, "v")
		return v.Set([]byte(`"attempt 2"`))
	})
	stack := NewStack(Handler(h, nil), NewRetry(RetryPolicy{MaxRetries: 3, Base: time.Millisecond, MaxDelay: time.Millisecond}),
		Cancellation{}, newTimeouts(0, false), &Transaction{OwnAttempt: true}).WithClock(clock)
	inv := invocation.NewInvocation(context.Background(), "k")
	inv.SetEnv(&invocation.Env{State: sp}, nil)
	done := make(chan error, 1)
	go func() { done <- invoke(stack, inv, &event.Message{Topic: "orders", Partition: 3, Offset: 5, Key: "k"}) }()
	<-clock.added
	// Attempt 1 is over; its leftover work (a host task it did not await) writes.
	if _, err := state.ValueOf(first.Load(), "w"); !errors.Is(err, state.ErrExpired) {
		t.Fatalf("open after attempt 1 ended: %v, want ErrExpired", err)
	}
	clock.fire()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, ok, _ := kv.Value(ctx, stateKey, "w")
	if ok {
		t.Errorf("a failed attempt's write was committed: w = %s", got)
	}
}

// probeAfter runs f in its After, between Transaction.After (Take, commit)
// and Timeout.After (which invalidates the attempt's context): where a
// host's un-awaited task can still reach the attempt's context.
type probeAfter struct{ f func(r *Run) }

func (probeAfter) Before(*Run) Step { return Continue }
func (p probeAfter) After(r *Run, err error) Step {
	p.f(r)
	return Result(err)
}

// An open after the layer settled the attempt (a host's un-awaited task)
// fails: its write would be lost.
func TestTransactionRefusesAHandleAfterItsAttempt(t *testing.T) {
	ctx := context.Background()
	kv, sp := newStateEnv(t)
	var lateErr error
	h := handlerFunc(func(c *event.Context, ev event.Event) error {
		v, _ := state.ValueOf(c, "v")
		return v.Set([]byte(`1`))
	})
	stack := NewStack(Handler(h, nil), Cancellation{}, newTimeouts(time.Hour, false),
		probeAfter{func(r *Run) {
			w, err := state.ValueOf((*event.Context)(r.call), "w")
			if err != nil {
				lateErr = err
				return
			}
			lateErr = w.Set([]byte(`"late"`))
		}}, &Transaction{})
	inv := invocation.NewInvocation(context.Background(), "k")
	inv.SetEnv(&invocation.Env{State: sp}, nil)
	if err := invoke(stack, inv, &event.Message{Topic: "orders", Partition: 3, Offset: 5, Key: "k"}); err != nil {
		t.Fatal(err)
	}
	inv.Invalidate()
	_, ok, _ := kv.Value(ctx, stateKey, "w")
	if !errors.Is(lateErr, state.ErrExpired) || ok {
		t.Errorf("a write after the attempt ended: %v (committed %v), want ErrExpired", lateErr, ok)
	}
}
