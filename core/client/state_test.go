package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/state"
)

const (
	counterKeys     = 1000
	counterMessages = 10000
)

// counterDefs is the one collection of the counter tests: a count per
// key, published so the test reads it back through a reader.
func counterDefs() []config.StateCollection {
	return []config.StateCollection{{Name: "count", Kind: config.CollectionValue, Payload: config.PayloadJSON, Published: true}}
}

func counterKey(i int) string { return fmt.Sprintf("k%04d", i%counterKeys) }

// countingHandler increments its key's count for every message, and fails
// every third attempt transiently after its write: a failed attempt's
// write must never be visible, so the counts stay exact.
func countingHandler(successes *atomic.Int64, onOK func(m *event.Message)) event.Handler {
	var attempts atomic.Int64
	return event.HandlerFuncs{Message: func(ctx *event.Context, m *event.Message) error {
		count, err := state.ValueOf(ctx, "count")
		if err != nil {
			return err
		}
		item, _, err := count.Get()
		if err != nil {
			return err
		}
		n, _ := strconv.Atoi(string(item))
		if err := count.Set([]byte(strconv.Itoa(n + 1))); err != nil {
			return err
		}
		if attempts.Add(1)%3 == 0 {
			return fault.Transient(errors.New("every third attempt fails"))
		}
		successes.Add(1)
		if onOK != nil {
			onOK(m)
		}
		return nil
	}}
}

func counterConfig(t *testing.T, tg target, topic, group, subsystem string) *config.Config {
	return newConfig(t, tg, func(c *config.Config) {
		c.GroupID, c.SubscribedTopics = group, []string{topic}
		c.StateCollections = counterDefs()
		c.Subsystem = config.Some(subsystem)
		c.DeferEnabled = false // retried in place, quickly
	})
}

// checkCounts reads every key's count through a reader (no cache) and
// fails t unless each equals the number of messages sent to the key.
func checkCounts(t *testing.T, reader *Client, subsystem string) {
	t.Helper()
	r, err := reader.Reader(subsystem, "count", config.CollectionValue, config.Some(time.Duration(0)))
	if err != nil {
		t.Fatal(err)
	}
	want := counterMessages / counterKeys
	bad := 0
	for k := range counterKeys {
		item, _, err := r.Value(context.Background(), counterKey(k))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := strconv.Atoi(string(item)); got != want {
			if bad++; bad <= 5 {
				t.Errorf("key %s counted %d messages, want %d", counterKey(k), got, want)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d keys miscounted", bad, counterKeys)
	}
}

func sendCounted(t *testing.T, producer *Client, topic string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		sendSeq(t, producer, topic, counterKey(i), i)
	}
}

// A count per key over 10,000 messages and 1,000 keys is exact across a
// consumer restart in the middle and a rebalance to a second member, with
// every third attempt failing after its write.
func TestKeyedStateCountsAcrossRestartAndRebalance(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			if !tg.mock {
				testservices.RequireCassandra(t)
			}
			topic := createTopic(t, tg, 4)
			group := testservices.UniqueName("counts")
			subsystem := testservices.UniqueName("counter-svc")
			producer := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "test" }))
			sendCounted(t, producer, topic, 0, counterMessages/2)

			var successes atomic.Int64
			first := newClient(t, counterConfig(t, tg, topic, group, subsystem))
			if err := first.Subscribe(countingHandler(&successes, nil)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 2*time.Minute, "a fifth of the messages handled", func() bool { return successes.Load() >= counterMessages/5 })
			closeClient(t, first) // the restart in the middle

			again := newClient(t, counterConfig(t, tg, topic, group, subsystem))
			if err := again.Subscribe(countingHandler(&successes, nil)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 2*time.Minute, "half of the messages handled", func() bool { return successes.Load() >= counterMessages/2 })
			second := newClient(t, counterConfig(t, tg, topic, group, subsystem)) // the rebalance
			if err := second.Subscribe(countingHandler(&successes, nil)); err != nil {
				t.Fatal(err)
			}
			sendCounted(t, producer, topic, counterMessages/2, counterMessages)
			waitFor(t, 3*time.Minute, "every message handled and committed", func() bool {
				return successes.Load() >= counterMessages && committedAll(t, tg, group, topic)
			})
			checkCounts(t, producer, subsystem)
		})
	}
}

const stateChildEnv = "PROSODY_STATE_CHILD"

// runStateChild is the counting consumer the kill test kills: it counts
// STATE_TOPIC's messages in STATE_GROUP (every third attempt failing) and
// appends a line per successful attempt to STATE_OUT.
func runStateChild() int {
	if os.Getenv(stateChildEnv) == "inflight" {
		return runInFlightChild()
	}
	f, err := os.OpenFile(os.Getenv("STATE_OUT"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := childClient(counterDefs())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var successes atomic.Int64
	err = c.Subscribe(countingHandler(&successes, func(m *event.Message) {
		_, _ = fmt.Fprintf(f, "%s/%d ok\n", m.Key, m.Offset)
	}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	select {} // until killed
}

// childClient is a child's client: real Kafka and Cassandra, STATE_TOPIC
// in STATE_GROUP, the collections defs published by STATE_SUBSYSTEM,
// failures retried in place.
func childClient(defs []config.StateCollection) (*Client, error) {
	cfg, err := childConfig(os.Getenv("STATE_GROUP"), os.Getenv("STATE_TOPIC"), func(c *config.Config) {
		c.StateCollections = defs
		c.Subsystem = config.Some(os.Getenv("STATE_SUBSYSTEM"))
		c.DeferEnabled = false
		c.CommitInterval = 500 * time.Millisecond
		c.RetryBase, c.MaxRetryDelay = 5*time.Millisecond, 50*time.Millisecond
	})
	if err != nil {
		return nil, err
	}
	return New(cfg, WithLogger(quietLogger()))
}

func startStateChild(t *testing.T, topic, group, subsystem, out string) *exec.Cmd {
	return startChild(t, "count", topic, group, subsystem, out)
}

func startChild(t *testing.T, kind, topic, group, subsystem, out string) *exec.Cmd {
	t.Helper()
	return startTestChild(t, stateChildEnv+"="+kind, "STATE_TOPIC="+topic, "STATE_GROUP="+group,
		"STATE_SUBSYSTEM="+subsystem, "STATE_OUT="+out)
}

// kill -9 of the counting consumer in the middle of the run, then a new
// member: at-least-once delivery redelivers what was not committed, and
// the markers keep a message whose attempt succeeded (and committed its
// state) from being counted twice.
func TestKeyedStateCountsAcrossAKill(t *testing.T) {
	tg := target{name: "kafka"}
	testservices.RequireKafka(t)
	testservices.RequireCassandra(t)
	topic := createTopic(t, tg, 4)
	group := testservices.UniqueName("counts-kill")
	subsystem := testservices.UniqueName("counter-kill-svc")
	out := filepath.Join(t.TempDir(), "handled.txt")
	producer := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "test" }))
	sendCounted(t, producer, topic, 0, counterMessages)

	child := startStateChild(t, topic, group, subsystem, out)
	waitFor(t, 2*time.Minute, "a third of the messages handled", func() bool {
		n := 0
		for _, c := range calls(t, out) {
			n += c
		}
		return n >= counterMessages/3
	})
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	startStateChild(t, topic, group, subsystem, out)
	waitFor(t, 3*time.Minute, "every message committed", func() bool { return committedAll(t, tg, group, topic) })
	checkCounts(t, producer, subsystem)
}

// runInFlightChild owns the published value "order": each message sets it
// to "seq N" from its payload, except that the first attempt of seq 1
// first sets "in flight", creates STATE_OUT/writing, waits for
// STATE_OUT/release and fails.
func runInFlightChild() int {
	dir := os.Getenv("STATE_OUT")
	c, err := childClient([]config.StateCollection{{Name: "order", Kind: config.CollectionValue, Payload: config.PayloadJSON, Published: true}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var failedOnce atomic.Bool
	err = c.Subscribe(event.HandlerFuncs{Message: func(ctx *event.Context, m *event.Message) error {
		order, err := state.ValueOf(ctx, "order")
		if err != nil {
			return err
		}
		if seqOf(m) == 1 && failedOnce.CompareAndSwap(false, true) {
			if err := order.Set([]byte(`"in flight"`)); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, "writing"), nil, 0o644); err != nil {
				return err
			}
			for {
				if _, err := os.Stat(filepath.Join(dir, "release")); err == nil {
					return fault.Transient(errors.New("failing after the write"))
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		return order.Set([]byte(strconv.Quote(fmt.Sprint("seq ", seqOf(m)))))
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	select {} // until killed
}

// A reader in another process (this one) reads the owner's committed
// value, and never the value an attempt has written and not committed:
// the owner's handler writes, waits, then fails.
func TestPublishedReaderSeesCommittedStateOnly(t *testing.T) {
	tg := target{name: "kafka"}
	testservices.RequireKafka(t)
	testservices.RequireCassandra(t)
	topic := createTopic(t, tg, 1)
	group := testservices.UniqueName("owner")
	subsystem := testservices.UniqueName("orders-svc")
	dir := t.TempDir()
	startChild(t, "inflight", topic, group, subsystem, dir)

	reader := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "test" }))
	order, err := reader.Reader(subsystem, "order", config.CollectionValue, config.Some(time.Duration(0)))
	if err != nil {
		t.Fatal(err)
	}
	var inFlightSeen atomic.Int64
	read := func() string {
		item, _, err := order.Value(context.Background(), "o1")
		if err != nil && !errors.Is(err, state.ErrUnregistered) { // no routing record before the owner starts
			t.Fatal(err)
		}
		if string(item) == `"in flight"` {
			inFlightSeen.Add(1)
		}
		return string(item)
	}
	sendSeq(t, reader, topic, "o1", 0)
	waitFor(t, 2*time.Minute, "the reader to see seq 0 committed", func() bool { return read() == `"seq 0"` })
	sendSeq(t, reader, topic, "o1", 1)
	waitFor(t, time.Minute, "the owner's attempt to write and wait", func() bool {
		_, err := os.Stat(filepath.Join(dir, "writing"))
		return err == nil
	})
	for range 50 {
		if got := read(); got != `"seq 0"` {
			t.Fatalf("while the attempt is in flight the reader saw %s, want the committed \"seq 0\"", got)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the retry's value committed", func() bool { return read() == `"seq 1"` })
	if n := inFlightSeen.Load(); n != 0 {
		t.Fatalf("the reader saw the in-flight value %d times", n)
	}
}
