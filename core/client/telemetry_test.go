package client

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/emitter"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// TestTelemetryTopic runs every kind of event through a consumer on real
// Kafka and Cassandra (pipeline mode: a failing message is deferred and
// retried, a failing timer too) and reads the telemetry topic back: every
// record matches the schema, every event kind is there, with the keys,
// sources and demand classes of what happened.
func TestTelemetryTopic(t *testing.T) {
	tg := target{name: "kafka"}
	testservices.RequireKafka(t)
	testservices.RequireCassandra(t)
	topic := createTopic(t, tg, 2)
	telemetryTopic := testservices.UniqueName("telemetry")
	group := testservices.UniqueName("telemetry")
	withTelemetry := func(c *config.Config) {
		c.TelemetryEnabled = true
		c.TelemetryTopic = telemetryTopic
	}
	sender := newClient(t, newConfig(t, tg, withTelemetry, func(c *config.Config) { c.SourceSystem = "telemetry-sender" }))
	receiver := newClient(t, newConfig(t, tg, withTelemetry, func(c *config.Config) {
		c.GroupID = group
		c.SubscribedTopics = []string{topic}
		c.CassandraKeyspace = testservices.UniqueName("telemetry")
	}))

	var failedOnce, timerFailedOnce atomic.Bool
	var mu sync.Mutex
	done := map[string]bool{}
	finish := func(what string) { mu.Lock(); done[what] = true; mu.Unlock() }
	err := receiver.Subscribe(event.HandlerFuncs{
		Message: func(ctx *event.Context, m *event.Message) error {
			switch m.Key {
			case "fails-once":
				if failedOnce.CompareAndSwap(false, true) {
					return errors.New("the first attempt fails")
				}
				finish("retried message")
			case "timers":
				if err := ctx.Schedule(time.Now().Add(time.Hour)); err != nil {
					return err
				}
				// Replaces the hour's timer: cancelled, then scheduled.
				return ctx.ClearAndSchedule(time.Now().Add(time.Second))
			case "timer-fails":
				return ctx.Schedule(time.Now().Add(time.Second))
			}
			return nil
		},
		Timer: func(ctx *event.Context, tm *event.Timer) error {
			if tm.Key == "timer-fails" && timerFailedOnce.CompareAndSwap(false, true) {
				return errors.New("the timer's first attempt fails")
			}
			finish("timer " + tm.Key)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	traced := tracing.Fields{TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}.Context(ctx)
	for _, key := range []string{"plain", "fails-once", "timers", "timer-fails"} {
		if err := sender.Send(traced, topic, key, []byte(`{"id":"`+key+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 90*time.Second, "the retried message and both timers", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return done["retried message"] && done["timer timers"] && done["timer timer-fails"]
	})
	if err := receiver.Unsubscribe(ctx); err != nil {
		t.Fatal(err)
	}
	closeClient(t, sender)

	records := readTopic(t, tg, telemetryTopic)
	seen := map[string]int{}
	var failedDemand, retryDemand bool
	for _, r := range records {
		name, err := emitter.Check(r.Value)
		if err != nil {
			t.Fatalf("%v\n%s", err, r.Value)
		}
		seen[name]++
		var doc struct {
			Key, Source, DemandType, TimerType, Exception, TraceParent string
		}
		if err := json.Unmarshal(r.Value, &doc); err != nil {
			t.Fatal(err)
		}
		if string(r.Key) != doc.Key {
			t.Errorf("record key %q, event key %q", r.Key, doc.Key)
		}
		wantSource := group
		if name == emitter.MessageSent {
			wantSource = "telemetry-sender"
		}
		if doc.Source != wantSource {
			t.Errorf("%s: source %q, want %q", name, doc.Source, wantSource)
		}
		switch {
		case name == emitter.MessageFailed && doc.Key == "fails-once":
			failedDemand = doc.DemandType == "normal" && doc.Exception == "the first attempt fails"
		case name == emitter.MessageSucceeded && doc.Key == "fails-once" && doc.DemandType == "failure":
			retryDemand = true
		case name == emitter.MessageSent || name == emitter.MessageDispatched:
			if doc.TraceParent[:35] != "00-4bf92f3577b34da6a3ce929d0e0e4736" {
				t.Errorf("%s of %s: traceParent %q is not of the sender's trace", name, doc.Key, doc.TraceParent)
			}
		}
	}
	for _, name := range []string{emitter.MessageSent, emitter.MessageDispatched, emitter.MessageSucceeded, emitter.MessageFailed,
		emitter.TimerScheduled, emitter.TimerCancelled, emitter.TimerDispatched, emitter.TimerSucceeded, emitter.TimerFailed} {
		if seen[name] == 0 {
			t.Errorf("no %s event on the telemetry topic (seen %v)", name, seen)
		}
	}
	if seen[emitter.MessageSent] != 4 {
		t.Errorf("%d message.sent events, want 4", seen[emitter.MessageSent])
	}
	if !failedDemand || !retryDemand {
		t.Errorf("the failed attempt (normal demand, its error text: %v) and the retry (failure demand: %v)", failedDemand, retryDemand)
	}
	if s, ok := receiver.TelemetryStats(); !ok || s.Dropped != 0 || s.Failed != 0 || s.Delivered != s.Accepted {
		t.Errorf("receiver's emitter: %+v", s)
	}
}
