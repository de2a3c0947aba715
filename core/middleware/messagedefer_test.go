package middleware

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/deferral"
	"github.com/prosody-events/prosody-go/core/deferstore"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
	"github.com/prosody-events/prosody-go/core/telemetry"
	"github.com/prosody-events/prosody-go/core/timerstore"
)

func telemetryFailure() telemetry.Event {
	return telemetry.Event{Kind: telemetry.HandlerFailed, At: telemetry.Now()}
}

// fakeRetries records the retry timers the defer layers set: at most one
// per key and type, as ClearAndSchedule keeps it.
type fakeRetries struct {
	mu      sync.Mutex
	timers  map[string]timerstore.Trigger // by key and type
	history []string
	fail    error
}

func (f *fakeRetries) id(key string, typ timerstore.Type) string {
	return fmt.Sprintf("%s/%d", key, typ)
}

func (f *fakeRetries) ClearAndSchedule(_ context.Context, t timerstore.Trigger) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	if f.timers == nil {
		f.timers = map[string]timerstore.Trigger{}
	}
	f.timers[f.id(t.Key, t.Type)] = t
	f.history = append(f.history, fmt.Sprintf("schedule %s type %d", t.Key, t.Type))
	return nil
}

func (f *fakeRetries) ClearScheduled(_ context.Context, key string, typ timerstore.Type) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.timers, f.id(key, typ))
	f.history = append(f.history, fmt.Sprintf("clear %s type %d", key, typ))
	return nil
}

// pending is key's retry timer of typ, if set.
func (f *fakeRetries) pending(key string, typ timerstore.Type) (timerstore.Trigger, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.timers[f.id(key, typ)]
	return t, ok
}

// deferEnv is a partition with deferral over the in-memory stores, a log
// of records to load from, and a handler scripted per offset.
type deferEnv struct {
	t       *testing.T
	part    *deferral.Partition
	retries *fakeRetries
	records map[int64]*event.Message
	loadErr error
	stack   *Stack
	policy  *DeferPolicy

	mu      sync.Mutex
	handled []string        // "offset" or "timer@unix", in order, with the demand
	fails   map[string]int  // how many more times an event fails transiently
	perm    map[string]bool // an event fails permanently
}

func newDeferEnv(t *testing.T, enabled bool) *deferEnv {
	t.Helper()
	ctx := context.Background()
	store := deferstore.NewMemory()
	msgs, err := store.Messages(ctx, "group", "orders", 3)
	if err != nil {
		t.Fatal(err)
	}
	tms, err := store.Timers(ctx, "group", "orders", 3)
	if err != nil {
		t.Fatal(err)
	}
	e := &deferEnv{t: t, retries: &fakeRetries{}, records: map[int64]*event.Message{}, fails: map[string]int{}, perm: map[string]bool{}}
	e.part = deferral.NewPartition(&deferral.Partition{Topic: "orders", ID: 3, Messages: msgs, Timers: tms, Retries: e.retries,
		Load: func(_ context.Context, offset int64) (*event.Message, error) {
			if e.loadErr != nil {
				return nil, e.loadErr
			}
			m, ok := e.records[offset]
			if !ok {
				return nil, fault.Permanent(errors.New("offset deleted"))
			}
			cp := *m
			return &cp, nil
		}}, nil, nil)
	e.policy = &DeferPolicy{Enabled: enabled, Logger: slog.New(slog.DiscardHandler), Backoff: deferral.Backoff{Base: time.Second, MaxDelay: time.Hour, Jitter: func(n int64) int64 { return n - 1 }}}
	h := handlerFunc(func(ctx *event.Context, ev event.Event) error {
		name := eventName(ev)
		e.mu.Lock()
		defer e.mu.Unlock()
		e.handled = append(e.handled, name)
		if e.perm[name] {
			return fault.Permanent(errors.New("bad " + name))
		}
		if e.fails[name] > 0 {
			e.fails[name]--
			return errors.New("flaky " + name)
		}
		return nil
	})
	e.stack = NewStack(Handler(h, nil), NewMessageDefer(e.policy), NewTimerDefer(e.policy), &demandProbe{})
	return e
}

func eventName(ev event.Event) string {
	switch e := ev.(type) {
	case *event.Message:
		return fmt.Sprint(e.Offset)
	case *event.Timer:
		return fmt.Sprintf("timer@%d", e.Time.Unix())
	}
	return fmt.Sprintf("%T", ev)
}

// message is the record at offset of key, kept for the loader.
func (e *deferEnv) message(key string, offset int64) *event.Message {
	m := &event.Message{Topic: "orders", Partition: 3, Offset: offset, Key: key, Payload: []byte(`{}`)}
	e.records[offset] = m
	return m
}

// run runs ev through the stack, both drives alternating, and returns
// its outcome.
func (e *deferEnv) run(ev event.Event, async bool) error {
	inv := invocation.NewInvocation(context.Background(), ev.EventKey())
	inv.SetEnv(&invocation.Env{Deferral: e.part}, nil)
	defer inv.Invalidate()
	if async {
		out := make(outcome, 1)
		e.stack.Start(new(Run), inv, ev, out)
		return <-out
	}
	return invoke(e.stack, inv, ev)
}

// fire runs key's pending retry timer of typ, which must be set.
func (e *deferEnv) fire(key string, typ timerstore.Type, async bool) error {
	e.t.Helper()
	tr, ok := e.retries.pending(key, typ)
	if !ok {
		e.t.Fatalf("key %q has no retry timer of type %d", key, typ)
	}
	return e.run(&deferral.Retry{Timer: event.Timer{Topic: "orders", Partition: 3, Key: key, Time: tr.Time.Std(), TraceContext: tr.Span}, Type: typ}, async)
}

func (e *deferEnv) queue(key string) (head int64, retries uint32, ok bool) {
	e.t.Helper()
	head, retries, ok, err := e.part.Messages.Next(context.Background(), key)
	if err != nil {
		e.t.Fatal(err)
	}
	return head, retries, ok
}

// The poisoned key: its head fails five times, then succeeds; the
// messages behind it wait in order, and the retries back off.
func TestMessageDeferPoisonedKey(t *testing.T) {
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			e := newDeferEnv(t, true)
			e.fails["10"] = 6 // the first attempt, then five deferred retries
			if err := e.run(e.message("poison", 10), async); err != nil {
				t.Fatalf("the first failure should be deferred, got %v", err)
			}
			if !e.part.MessageDeferred("poison") {
				t.Fatal("the key is not marked deferred")
			}
			if tr, ok := e.retries.pending("poison", timerstore.DeferredMessage); !ok || tr.Time.Std().After(time.Now().Add(time.Second)) {
				t.Fatalf("the first retry should be due now: %v %v", tr, ok)
			}
			// A later message of the key queues without running; another
			// key runs.
			if err := e.run(e.message("poison", 11), async); err != nil {
				t.Fatal(err)
			}
			if err := e.run(e.message("healthy", 12), async); err != nil {
				t.Fatal(err)
			}
			var delays []time.Duration
			for i := 0; i < 5; i++ {
				before := time.Now()
				if err := e.fire("poison", timerstore.DeferredMessage, async); err != nil {
					t.Fatalf("retry %d: %v", i+1, err)
				}
				_, retries, _ := e.queue("poison")
				if retries != uint32(i+1) {
					t.Fatalf("after retry %d the count is %d", i+1, retries)
				}
				tr, _ := e.retries.pending("poison", timerstore.DeferredMessage)
				delays = append(delays, tr.Time.Std().Sub(before).Round(time.Second))
			}
			// The jitter takes the top of each range: 1, 2, 4, 8, 16 s
			// (give or take the rounding of timer times to seconds).
			for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second} {
				if d := delays[i]; d < want-time.Second || d > want+time.Second {
					t.Fatalf("retry %d was scheduled %v later, want %v (all: %v)", i+1, d, want, delays)
				}
			}
			// The sixth retry succeeds; the next message is retried at once.
			if err := e.fire("poison", timerstore.DeferredMessage, async); err != nil {
				t.Fatal(err)
			}
			if head, retries, ok := e.queue("poison"); !ok || head != 11 || retries != 0 {
				t.Fatalf("queue after success: head %d, retries %d, ok %v", head, retries, ok)
			}
			if err := e.fire("poison", timerstore.DeferredMessage, async); err != nil {
				t.Fatal(err)
			}
			if _, _, ok := e.queue("poison"); ok || e.part.MessageDeferred("poison") {
				t.Fatal("the key should no longer be deferred")
			}
			if _, ok := e.retries.pending("poison", timerstore.DeferredMessage); ok {
				t.Fatal("the key's retry timer should be cleared")
			}
			want := []string{"10", "12", "10", "10", "10", "10", "10", "10", "11"}
			if !slices.Equal(e.handled, want) {
				t.Fatalf("handled %v, want %v", e.handled, want)
			}
			// Once it is no longer deferred, its messages run again.
			if err := e.run(e.message("poison", 13), async); err != nil || e.handled[len(e.handled)-1] != "13" {
				t.Fatalf("a message after the deferral: %v, handled %v", err, e.handled)
			}
		})
	}
}

func TestMessageDeferDecisions(t *testing.T) {
	tests := []struct {
		name      string
		enabled   bool
		gateOff   bool
		err       error
		wantErr   bool
		wantDefer bool
	}{
		{"success", true, false, nil, false, false},
		{"transient is deferred", true, false, errors.New("flaky"), false, true},
		{"permanent is returned", true, false, fault.Permanent(errors.New("bad")), true, false},
		{"terminal is returned", true, false, fault.Terminal(errors.New("gone")), true, false},
		{"deferral disabled", false, false, errors.New("flaky"), true, false},
		{"gated off by the failure rate", true, true, errors.New("flaky"), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newDeferEnv(t, tt.enabled)
			if tt.gateOff {
				e.policy.Gate = outage()
			}
			e.stack = NewStack(Func(func(*event.Context, event.Event) error { return tt.err }), NewMessageDefer(e.policy))
			err := e.run(e.message("k", 5), false)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if e.part.MessageDeferred("k") != tt.wantDefer {
				t.Fatalf("deferred = %v, want %v", !tt.wantDefer, tt.wantDefer)
			}
			if _, ok := e.retries.pending("k", timerstore.DeferredMessage); ok != tt.wantDefer {
				t.Fatalf("retry timer set = %v, want %v", ok, tt.wantDefer)
			}
		})
	}
}

// outage is a gate that has seen nothing but failures.
func outage() *deferral.Gate {
	g := deferral.NewGate(0.5, time.Hour)
	for i := 0; i < 2*deferral.MinSample; i++ {
		g.Observe(telemetryFailure())
	}
	return g
}

// Once deferred, a key's failures are always deferred again, whatever
// the gate says; and a key deferred before deferral was switched off
// still drains.
func TestMessageDeferRetriesIgnoreTheGate(t *testing.T) {
	e := newDeferEnv(t, true)
	e.fails["1"] = 2
	if err := e.run(e.message("k", 1), false); err != nil {
		t.Fatal(err)
	}
	e.policy.Enabled, e.policy.Gate = false, outage()
	if err := e.fire("k", timerstore.DeferredMessage, false); err != nil {
		t.Fatalf("a deferred key's failure must be deferred again: %v", err)
	}
	if err := e.fire("k", timerstore.DeferredMessage, false); err != nil {
		t.Fatal(err)
	}
	if e.part.MessageDeferred("k") {
		t.Fatal("the key should have drained")
	}
}

func TestMessageDeferRetryEdgeCases(t *testing.T) {
	t.Run("orphan timer", func(t *testing.T) {
		e := newDeferEnv(t, true)
		e.part.SetMessageDeferred("k", true)
		_ = e.retries.ClearAndSchedule(context.Background(), timerstore.Trigger{Key: "k", Type: timerstore.DeferredMessage, Time: timerstore.TimeOf(time.Now())})
		if err := e.fire("k", timerstore.DeferredMessage, false); err != nil {
			t.Fatal(err)
		}
		if e.part.MessageDeferred("k") || len(e.handled) != 0 {
			t.Fatalf("an orphan timer should end the deferral without running anything: %v", e.handled)
		}
	})
	t.Run("a record gone from Kafka is skipped", func(t *testing.T) {
		e := newDeferEnv(t, true)
		e.fails["1"] = 1
		_ = e.run(e.message("k", 1), false)
		_ = e.run(e.message("k", 2), false)
		delete(e.records, 1)
		if err := e.fire("k", timerstore.DeferredMessage, false); err != nil {
			t.Fatal(err)
		}
		if head, _, _ := e.queue("k"); head != 2 {
			t.Fatalf("head %d, want 2", head)
		}
	})
	t.Run("a transient load failure counts as a retry", func(t *testing.T) {
		e := newDeferEnv(t, true)
		e.fails["1"] = 1
		_ = e.run(e.message("k", 1), false)
		e.loadErr = errors.New("broker unreachable")
		if err := e.fire("k", timerstore.DeferredMessage, false); err != nil {
			t.Fatal(err)
		}
		if head, retries, _ := e.queue("k"); head != 1 || retries != 1 {
			t.Fatalf("head %d retries %d", head, retries)
		}
		e.loadErr = nil
		if err := e.fire("k", timerstore.DeferredMessage, false); err != nil || e.part.MessageDeferred("k") {
			t.Fatalf("the retry after the load failure: %v", err)
		}
	})
	t.Run("a terminal load failure is returned", func(t *testing.T) {
		e := newDeferEnv(t, true)
		e.fails["1"] = 1
		_ = e.run(e.message("k", 1), false)
		e.loadErr = fault.Terminal(errors.New("shut down"))
		if err := e.fire("k", timerstore.DeferredMessage, false); !fault.IsTerminal(err) {
			t.Fatalf("err = %v, want terminal", err)
		}
	})
	t.Run("a record of another key is skipped", func(t *testing.T) {
		e := newDeferEnv(t, true)
		e.fails["1"] = 1
		_ = e.run(e.message("k", 1), false)
		e.records[1].Key = "other"
		if err := e.fire("k", timerstore.DeferredMessage, false); err != nil || e.part.MessageDeferred("k") {
			t.Fatalf("err %v, handled %v", err, e.handled)
		}
	})
	t.Run("a permanent failure of a retry drops it and moves on", func(t *testing.T) {
		e := newDeferEnv(t, true)
		e.fails["1"] = 1
		_ = e.run(e.message("k", 1), false)
		_ = e.run(e.message("k", 2), false)
		e.perm["1"] = true
		if err := e.fire("k", timerstore.DeferredMessage, false); !fault.IsPermanent(err) {
			t.Fatalf("err = %v, want the permanent failure", err)
		}
		if head, _, _ := e.queue("k"); head != 2 {
			t.Fatalf("head %d, want 2", head)
		}
	})
	t.Run("the retry runs as failure demand", func(t *testing.T) {
		e := newDeferEnv(t, true)
		e.fails["1"] = 1
		_ = e.run(e.message("k", 1), false)
		var demands []Demand
		probe := &demandProbe{}
		e.stack = NewStack(Func(func(*event.Context, event.Event) error { return nil }), NewMessageDefer(e.policy), probe)
		if err := e.fire("k", timerstore.DeferredMessage, false); err != nil {
			t.Fatal(err)
		}
		demands = probe.demands
		if !slices.Equal(demands, []Demand{Failure}) {
			t.Fatalf("demands %v", demands)
		}
	})
	t.Run("a failed store write is the layer's error", func(t *testing.T) {
		e := newDeferEnv(t, true)
		e.retries.fail = errors.New("cassandra down")
		e.fails["1"] = 1
		if err := e.run(e.message("k", 1), false); err == nil || fault.ClassOf(err) != fault.ClassTransient {
			t.Fatalf("err = %v, want the transient store failure", err)
		}
		if e.part.MessageDeferred("k") {
			t.Fatal("nothing was written: the key is not deferred")
		}
	})
}

// A key the partition does not know as deferred, whose queue the store
// holds all the same (its retry timer lay past the horizon the assignment
// read deferred keys to), is joined by its first deferral here, not
// replaced: the queued messages, committed long ago, are retried in order
// with the new one behind them (found in review).
func TestFirstDeferralJoinsAQueueOutOfSight(t *testing.T) {
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			e := newDeferEnv(t, true)
			ctx := context.Background()
			e.message("k", 5)
			e.message("k", 6)
			if err := e.part.Messages.DeferFirst(ctx, "k", 5); err != nil {
				t.Fatal(err)
			}
			if err := e.part.Messages.Append(ctx, "k", 6); err != nil {
				t.Fatal(err)
			}
			if err := e.part.Messages.SetRetries(ctx, "k", 3); err != nil {
				t.Fatal(err)
			}
			e.fails["7"] = 1
			if err := e.run(e.message("k", 7), async); err != nil {
				t.Fatalf("the failure should be deferred, got %v", err)
			}
			if head, retries, ok := e.queue("k"); !ok || head != 5 || retries != 3 {
				t.Fatalf("queue head %d, retries %d, ok %v: want the old queue kept (head 5, 3 retries)", head, retries, ok)
			}
			for range 3 {
				if err := e.fire("k", timerstore.DeferredMessage, async); err != nil {
					t.Fatal(err)
				}
			}
			if want := []string{"7", "5", "6", "7"}; !slices.Equal(e.handled, want) {
				t.Fatalf("handled %v, want %v", e.handled, want)
			}
			if _, _, ok := e.queue("k"); ok || e.part.MessageDeferred("k") {
				t.Fatal("the key should have drained")
			}
		})
	}
}
