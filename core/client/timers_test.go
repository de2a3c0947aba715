package client

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// timerLog records, per (key, due second), when timers fired, and checks
// that a key never has a message handler and a timer handler running at
// the same time.
type timerLog struct {
	t       *testing.T
	mu      sync.Mutex
	running map[string]string // key -> "message" or "timer"
	due     map[string]time.Time
	fired   map[string][]time.Time
	early   []string
}

func newTimerLog(t *testing.T) *timerLog {
	return &timerLog{t: t, running: map[string]string{}, due: map[string]time.Time{}, fired: map[string][]time.Time{}}
}

func (l *timerLog) enter(key, kind string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if other, busy := l.running[key]; busy {
		l.t.Errorf("key %s: %s handler started while its %s handler ran", key, kind, other)
	}
	l.running[key] = kind
}

func (l *timerLog) leave(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.running, key)
}

func id(key string, at time.Time) string { return fmt.Sprintf("%s@%d", key, at.Unix()) }

func (l *timerLog) scheduled(key string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.due[id(key, at)] = at
}

func (l *timerLog) fire(tm *event.Timer) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	k := id(tm.Key, tm.Time)
	l.fired[k] = append(l.fired[k], now)
	// Timers keep whole seconds: a timer may fire up to the rounding (half a
	// second) before the instant it was asked for, never earlier.
	if now.Before(tm.Time.Add(-500 * time.Millisecond)) {
		l.early = append(l.early, fmt.Sprintf("%s fired at %v", k, now))
	}
}

func (l *timerLog) pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for k := range l.due {
		if len(l.fired[k]) == 0 {
			n++
		}
	}
	return n
}

func (l *timerLog) check() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.early) > 0 {
		l.t.Errorf("%d timers fired early, e.g. %s", len(l.early), l.early[0])
	}
}

func roundSecond(t time.Time) time.Time { return t.Add(500 * time.Millisecond).Truncate(time.Second) }

// TestTimersRunThroughTheKeyQueue: handlers schedule timers for their key;
// the timers fire (not early), and a key's message and timer handlers never
// overlap. Mock mode (memory store) and real Kafka with Cassandra.
func TestTimersRunThroughTheKeyQueue(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			testservices.RequireCassandra(t)
			topic := createTopic(t, tg, 4)
			log := newTimerLog(t)
			receiver := newClient(t, newConfig(t, tg, func(c *config.Config) {
				c.GroupID = testservices.UniqueName("timers")
				c.SubscribedTopics = []string{topic}
				c.CassandraKeyspace = testservices.UniqueName("timers")
			}))
			err := receiver.Subscribe(event.HandlerFuncs{
				Message: func(ctx *event.Context, m *event.Message) error {
					log.enter(m.Key, "message")
					defer log.leave(m.Key)
					at := time.Now().Add(time.Duration(500+rand.Intn(1500)) * time.Millisecond)
					if err := ctx.Schedule(at); err != nil {
						return err
					}
					log.scheduled(m.Key, roundSecond(at))
					time.Sleep(2 * time.Millisecond)
					return nil
				},
				Timer: func(ctx *event.Context, tm *event.Timer) error {
					log.enter(tm.Key, "timer")
					defer log.leave(tm.Key)
					log.fire(tm)
					time.Sleep(2 * time.Millisecond)
					return nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			sender := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "sender" }))
			for i := 0; i < 300; i++ {
				if err := sender.Send(context.Background(), topic, fmt.Sprintf("k%d", i%30), []byte(`{}`)); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, time.Minute, "every scheduled timer fired", func() bool {
				log.mu.Lock()
				n := len(log.due)
				log.mu.Unlock()
				return n > 0 && log.pending() == 0
			})
			log.check()
		})
	}
}

// TestTenThousandTimersSurviveRestart: 10,000 timers over 1,000 keys, due
// within the next minute, scheduled by handlers on real Kafka and
// Cassandra. The consumer is stopped and started again in the middle; every
// timer still fires at least once, none early.
func TestTenThousandTimersSurviveRestart(t *testing.T) {
	tg := target{"kafka", false}
	testservices.RequireKafka(t)
	testservices.RequireCassandra(t)
	const keys, perKey = 1000, 10
	topic := createTopic(t, tg, 8)
	keyspace := testservices.UniqueName("timers")
	group := testservices.UniqueName("timers")
	log := newTimerLog(t)
	start := time.Now()
	var calls atomic.Int64 // successful Schedule calls (distinct times may coincide)
	handler := event.HandlerFuncs{
		Message: func(ctx *event.Context, m *event.Message) error {
			for i := 0; i < perKey; i++ {
				// Spread over the minute after the start: 20 s to 60 s.
				at := start.Add(20*time.Second + time.Duration(rand.Int63n(int64(40*time.Second))))
				if err := ctx.Schedule(at); err != nil {
					return err
				}
				log.scheduled(m.Key, roundSecond(at))
				calls.Add(1)
			}
			return nil
		},
		Timer: func(ctx *event.Context, tm *event.Timer) error {
			log.fire(tm)
			return nil
		},
	}
	newReceiver := func() *Client {
		c, err := New(newConfig(t, tg, func(c *config.Config) {
			c.GroupID = group
			c.SubscribedTopics = []string{topic}
			c.CassandraKeyspace = keyspace
		}), WithLogger(quietLogger()))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Subscribe(handler); err != nil {
			t.Fatal(err)
		}
		return c
	}
	receiver := newReceiver()
	sender := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "sender" }))
	for k := 0; k < keys; k++ {
		if err := sender.Send(context.Background(), topic, fmt.Sprintf("key-%04d", k), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 2*time.Minute, "all timers scheduled", func() bool { return calls.Load() >= keys*perKey })
	// Restart while timers are due: stop the member, start a new one.
	waitFor(t, 2*time.Minute, "some timers fired", func() bool { return log.pending() < len(log.due)*3/4 })
	closeClient(t, receiver)
	receiver = newReceiver()
	defer closeClient(t, receiver)
	waitFor(t, 3*time.Minute, "every scheduled timer fired", func() bool { return log.pending() == 0 })
	log.check()
	log.mu.Lock()
	t.Logf("%d distinct timers fired; %d firings in all", len(log.due), func() int {
		n := 0
		for _, f := range log.fired {
			n += len(f)
		}
		return n
	}())
	log.mu.Unlock()
}

// TestTimersMoveWithTheirPartition: timers scheduled by one member fire on
// the member that owns their partitions after it leaves, and the old member
// fires none after leaving.
func TestTimersMoveWithTheirPartition(t *testing.T) {
	tg := target{"kafka", false}
	testservices.RequireKafka(t)
	testservices.RequireCassandra(t)
	topic := createTopic(t, tg, 4)
	keyspace := testservices.UniqueName("timers")
	group := testservices.UniqueName("timers")
	var mu sync.Mutex
	firedBy := map[string]string{}
	scheduled := map[string]bool{}
	handler := func(name string) event.Handler {
		return event.HandlerFuncs{
			Message: func(ctx *event.Context, m *event.Message) error {
				at := time.Now().Add(6 * time.Second)
				if err := ctx.Schedule(at); err != nil {
					return err
				}
				mu.Lock()
				scheduled[m.Key] = true
				mu.Unlock()
				return nil
			},
			Timer: func(ctx *event.Context, tm *event.Timer) error {
				mu.Lock()
				defer mu.Unlock()
				firedBy[tm.Key] = name
				return nil
			},
		}
	}
	member := func(name string) *Client {
		c, err := New(newConfig(t, tg, func(c *config.Config) {
			c.GroupID = group
			c.SubscribedTopics = []string{topic}
			c.CassandraKeyspace = keyspace
		}), WithLogger(quietLogger()))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Subscribe(handler(name)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := member("first")
	sender := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "sender" }))
	const keys = 40
	for k := 0; k < keys; k++ {
		if err := sender.Send(context.Background(), topic, fmt.Sprintf("key-%d", k), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, time.Minute, "timers scheduled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(scheduled) == keys
	})
	closeClient(t, first) // leaves before any timer is due
	second := member("second")
	defer closeClient(t, second)
	waitFor(t, time.Minute, "every timer fired", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(firedBy) == keys
	})
	mu.Lock()
	defer mu.Unlock()
	for k, by := range firedBy {
		if by != "second" {
			t.Errorf("timer of %s fired on %s after it left", k, by)
		}
	}
}

// TestTimerRunsInTheTraceOfItsScheduler: a timer stores the trace context
// of the event whose handler scheduled it (through the store: memory in
// mock mode, Cassandra otherwise), fires with it, and a timer scheduled
// from that timer's handler keeps it.
func TestTimerRunsInTheTraceOfItsScheduler(t *testing.T) {
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			testservices.RequireCassandra(t)
			topic := createTopic(t, tg, 1)
			fired := make(chan map[string]string, 4)
			receiver := newClient(t, newConfig(t, tg, func(c *config.Config) {
				c.GroupID = testservices.UniqueName("trace")
				c.SubscribedTopics = []string{topic}
				c.CassandraKeyspace = testservices.UniqueName("trace")
			}))
			var second atomic.Bool
			err := receiver.Subscribe(event.HandlerFuncs{
				Message: func(ctx *event.Context, m *event.Message) error {
					return ctx.Schedule(time.Now())
				},
				Timer: func(ctx *event.Context, tm *event.Timer) error {
					fired <- tm.TraceContext
					if !second.Swap(true) {
						return ctx.Schedule(time.Now().Add(time.Second))
					}
					return nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			sender := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "sender" }))
			sendCtx := tracing.Fields{TraceParent: parent, Baggage: "user=alice"}.Context(context.Background())
			if err := sender.Send(sendCtx, topic, "k", []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				select {
				case span := <-fired:
					if span[tracing.TraceParent] != parent || span[tracing.Baggage] != "user=alice" {
						t.Fatalf("timer %d fired with trace context %v, want the message's", i+1, span)
					}
				case <-time.After(time.Minute):
					t.Fatalf("timer %d did not fire", i+1)
				}
			}
		})
	}
}
