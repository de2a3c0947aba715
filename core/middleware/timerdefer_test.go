package middleware

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/deferral"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/timerstore"
)

func appTimer(key string, at int64) *event.Timer {
	return &event.Timer{Topic: "orders", Partition: 3, Key: key, Time: time.Unix(at, 0), TraceContext: map[string]string{"traceparent": fmt.Sprint(at)}}
}

// A failing application timer is parked; the key's later timers queue
// behind it; the retry runs the parked ones in time order.
func TestTimerDeferPoisonedTimer(t *testing.T) {
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			e := newDeferEnv(t, true)
			e.fails["timer@100"] = 2
			if err := e.run(appTimer("k", 100), async); err != nil {
				t.Fatalf("the first failure should be deferred: %v", err)
			}
			if !e.part.TimerDeferred("k") || e.part.MessageDeferred("k") {
				t.Fatal("the key's timers, not its messages, are deferred")
			}
			if err := e.run(appTimer("k", 50), async); err != nil { // an earlier time fired late
				t.Fatal(err)
			}
			// Messages of the key are not held back by its timers.
			if err := e.run(e.message("k", 7), async); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				if err := e.fire("k", timerstore.DeferredTimer, async); err != nil {
					t.Fatal(err)
				}
			}
			// The queue is in time order: 50 runs before 100.
			if err := e.fire("k", timerstore.DeferredTimer, async); err != nil {
				t.Fatal(err)
			}
			if e.part.TimerDeferred("k") {
				t.Fatal("the key should have drained")
			}
			want := []string{"timer@100", "7", "timer@50", "timer@100", "timer@100"}
			if !slices.Equal(e.handled, want) {
				t.Fatalf("handled %v, want %v", e.handled, want)
			}
		})
	}
}

func TestTimerDeferKeepsTheTraceContext(t *testing.T) {
	e := newDeferEnv(t, true)
	e.fails["timer@100"] = 1
	var seen []map[string]string
	e.stack = NewStack(Func(func(_ *event.Context, ev event.Event) error {
		tm := ev.(*event.Timer)
		seen = append(seen, tm.TraceContext)
		if len(seen) == 1 {
			return errors.New("flaky")
		}
		return nil
	}), NewTimerDefer(e.policy))
	_ = e.run(appTimer("k", 100), false)
	if err := e.fire("k", timerstore.DeferredTimer, false); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[1]["traceparent"] != "100" {
		t.Fatalf("the retry ran with trace %v", seen)
	}
}

func TestTimerDeferDecisions(t *testing.T) {
	for _, tt := range []struct {
		name      string
		err       error
		enabled   bool
		wantDefer bool
	}{
		{"transient is deferred", errors.New("flaky"), true, true},
		{"permanent is returned", fault.Permanent(errors.New("bad")), true, false},
		{"disabled", errors.New("flaky"), false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newDeferEnv(t, tt.enabled)
			e.stack = NewStack(Func(func(*event.Context, event.Event) error { return tt.err }), NewTimerDefer(e.policy))
			err := e.run(appTimer("k", 1), false)
			if (err == nil) != tt.wantDefer || e.part.TimerDeferred("k") != tt.wantDefer {
				t.Fatalf("err %v, deferred %v", err, e.part.TimerDeferred("k"))
			}
		})
	}
}

// The handlers' view of a partition's timers while a key's timers are
// deferred (core-behavior.md §4.5).
func TestDeferralTimersWhileDeferred(t *testing.T) {
	ctx := context.Background()
	e := newDeferEnv(t, true)
	app := &fakeAppTimers{}
	view := deferral.Timers{App: app, P: e.part}
	e.fails["timer@100"] = 1
	_ = e.run(appTimer("k", 100), false)

	if err := view.Schedule(ctx, "k", time.Unix(200, 0), nil); err != nil {
		t.Fatal(err)
	}
	if len(app.times) != 0 {
		t.Fatal("a timer scheduled while the key is deferred must queue, not fire on its own")
	}
	app.times = []time.Time{time.Unix(150, 0)}
	got, err := view.Scheduled(ctx, "k")
	if err != nil || !slices.EqualFunc(got, []time.Time{time.Unix(100, 0), time.Unix(150, 0), time.Unix(200, 0)}, time.Time.Equal) {
		t.Fatalf("Scheduled = %v, %v", got, err)
	}
	if err := view.Unschedule(ctx, "k", time.Unix(200, 0)); err != nil {
		t.Fatal(err)
	}
	if got, _ := view.Scheduled(ctx, "k"); len(got) != 2 {
		t.Fatalf("after Unschedule: %v", got)
	}
	if err := view.ClearAndSchedule(ctx, "k", time.Unix(300, 0), nil); err != nil {
		t.Fatal(err)
	}
	if e.part.TimerDeferred("k") {
		t.Fatal("ClearAndSchedule ends the key's deferral")
	}
	if _, ok := e.retries.pending("k", timerstore.DeferredTimer); ok {
		t.Fatal("and its retry timer")
	}
	if got, _ := view.Scheduled(ctx, "k"); !slices.EqualFunc(got, []time.Time{time.Unix(300, 0)}, time.Time.Equal) {
		t.Fatalf("after ClearAndSchedule: %v", got)
	}
}

// fakeAppTimers is a key's application timers in memory.
type fakeAppTimers struct{ times []time.Time }

func (f *fakeAppTimers) Schedule(_ context.Context, _ string, at time.Time, _ map[string]string) error {
	f.times = append(f.times, at)
	return nil
}
func (f *fakeAppTimers) ClearAndSchedule(_ context.Context, _ string, at time.Time, _ map[string]string) error {
	f.times = []time.Time{at}
	return nil
}
func (f *fakeAppTimers) Unschedule(_ context.Context, _ string, at time.Time) error {
	f.times = slices.DeleteFunc(f.times, at.Equal)
	return nil
}
func (f *fakeAppTimers) ClearScheduled(context.Context, string) error { f.times = nil; return nil }
func (f *fakeAppTimers) Scheduled(context.Context, string) ([]time.Time, error) {
	return slices.Clone(f.times), nil
}

// Timers, like messages, join a deferred queue the store holds for a key
// the partition does not know as deferred, rather than replace it.
func TestFirstTimerDeferralJoinsAQueueOutOfSight(t *testing.T) {
	e := newDeferEnv(t, true)
	if err := e.part.Timers.DeferFirst(context.Background(), "k", parked(appTimer("k", 40))); err != nil {
		t.Fatal(err)
	}
	e.fails["timer@100"] = 1
	if err := e.run(appTimer("k", 100), false); err != nil {
		t.Fatalf("the failure should be deferred: %v", err)
	}
	for range 2 {
		if err := e.fire("k", timerstore.DeferredTimer, false); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"timer@100", "timer@40", "timer@100"}; !slices.Equal(e.handled, want) {
		t.Fatalf("handled %v, want %v", e.handled, want)
	}
	if e.part.TimerDeferred("k") {
		t.Fatal("the key should have drained")
	}
}
