package client

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/cassandra"
	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/dedup"
	"github.com/prosody-events/prosody-go/core/dedupstore"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/cassandratest"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
)

const dedupChildEnv = "PROSODY_DEDUP_CHILD"

// runDedupChild is the consumer process the redelivery test kills: a
// pipeline consumer (deduplication on, as by default) of DEDUP_TOPIC in
// DEDUP_GROUP that appends "key/seq" to DEDUP_OUT for every message it
// handles (one write per line, on an O_APPEND file) and keeps its count
// of skipped duplicates in DEDUP_STATS. With DEDUP_BLOCK set, the message
// of key "blocker" never finishes, so no offset after it is committed.
func runDedupChild() int {
	c, f, err := childWithOutput("DEDUP_OUT", os.Getenv("DEDUP_GROUP"), os.Getenv("DEDUP_TOPIC"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	block := os.Getenv("DEDUP_BLOCK") != ""
	var mu sync.Mutex
	err = c.Subscribe(event.HandlerFuncs{Message: func(ctx *event.Context, m *event.Message) error {
		if block && m.Key == "blocker" {
			<-ctx.OnCancel()
			return ctx.Cause()
		}
		mu.Lock()
		defer mu.Unlock()
		_, err := fmt.Fprintf(f, "%s/%d\n", m.Key, seqOf(m))
		return err
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stats := os.Getenv("DEDUP_STATS")
	for range time.Tick(20 * time.Millisecond) {
		tmp := stats + ".tmp"
		if os.WriteFile(tmp, []byte(strconv.FormatInt(c.DedupStats().Skipped, 10)), 0o644) == nil {
			_ = os.Rename(tmp, stats)
		}
	}
	return 0
}

func skippedIn(path string) int64 {
	data, _ := os.ReadFile(path)
	n, _ := strconv.ParseInt(string(data), 10, 64)
	return n
}

// dedupMessage is one message of the redelivery test.
type dedupMessage struct {
	key string
	seq int
	id  string // "" for none
}

func (m dedupMessage) payload() []byte {
	if m.id == "" {
		return fmt.Appendf(nil, `{"seq":%d}`, m.seq)
	}
	b, _ := json.Marshal(map[string]any{"seq": m.seq, "id": m.id})
	return b
}

func (m dedupMessage) line() string { return fmt.Sprintf("%s/%d", m.key, m.seq) }

// A consumer killed with SIGKILL after handling messages but before
// committing them: the new owner, a new process whose cache is cold,
// skips every message handled before, found in Cassandra (by event id,
// or by offset for a message without one), handles the rest — the one
// that never finished, new messages, a message without an id sent again
// — and skips a new copy of a handled id at a later offset. Nothing is
// lost: everything ends committed.
func TestRedeliveredMessagesAreSkipped(t *testing.T) {
	tg := target{name: "kafka"}
	testservices.RequireKafka(t)
	testservices.RequireCassandra(t)
	topic := createTopic(t, tg, 1)
	group := testservices.UniqueName("dedup-kill")
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first.txt"), filepath.Join(dir, "second.txt")
	stats := filepath.Join(dir, "stats")
	// Each send goes through a producer without an id cache, so a copy of
	// an id already sent is written again, as an upstream retry would.
	producer := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem, c.IdempotenceCacheSize = "test", 0 }))
	var sent []dedupMessage
	var offsets []int64
	send := func(m dedupMessage) {
		t.Helper()
		if err := producer.Send(context.Background(), topic, m.key, m.payload()); err != nil {
			t.Fatal(err)
		}
		offsets = append(offsets, int64(len(sent))) // one partition, one producer: offsets follow the sends
		sent = append(sent, m)
	}
	send(dedupMessage{key: "blocker", seq: 0})
	for i := 1; i <= 30; i++ {
		m := dedupMessage{key: fmt.Sprintf("k%d", i%7), seq: i}
		if i%3 != 0 {
			m.id = fmt.Sprintf("event-%d", i)
		}
		send(m)
	}

	child := startDedupChild(t, topic, group, first, stats, true)
	waitFor(t, 2*time.Minute, "every message but the blocker handled", func() bool {
		got := calls(t, first)
		for _, m := range sent[1:] {
			if got[m.line()] == 0 {
				return false
			}
		}
		return true
	})
	// The handler finishes before its id is written; wait until the store
	// has every id, then kill before anything past the blocker is
	// committed.
	s := cassandratest.Connect(t, cassandra.Options{Nodes: testservices.CassandraNodes(), Keyspace: config.Default().CassandraKeyspace, Logger: quietLogger()})
	store := dedupstore.NewCassandra(s, time.Hour)
	cfg := newConfig(t, tg, func(c *config.Config) { c.GroupID = group })
	ids := func(ms []dedupMessage, offs []int64) []dedupstore.ID {
		var out []dedupstore.ID
		for i, m := range ms {
			msg := &event.Message{Topic: topic, Partition: 0, Offset: offs[i], Key: m.key, ID: m.id, HasID: m.id != ""}
			out = append(out, dedup.MessageID(cfg.IdempotenceVersion, group, msg))
		}
		return out
	}
	handled := ids(sent[1:], offsets[1:])
	waitFor(t, time.Minute, "every handled message's id in Cassandra", func() bool {
		for _, id := range handled {
			if !existsIn(t, store, id) {
				return false
			}
		}
		return true
	})
	if off := committed(t, clusterAdmin(t, testservices.KafkaAddrs()), group, topic); off > 0 {
		t.Fatalf("offset %d committed: past the blocker", off)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	// After the kill: new messages, a message without an id sent again
	// (a new offset, so new), a copy of a handled id.
	send(dedupMessage{key: "k1", seq: 31, id: "event-31"})
	send(dedupMessage{key: "k2", seq: 32})
	send(dedupMessage{key: "k3", seq: 3})                   // seq 3 had no id: this one is new
	send(dedupMessage{key: "k1", seq: 1001, id: "event-1"}) // a copy of event-1

	startDedupChild(t, topic, group, second, stats, false)
	waitFor(t, 2*time.Minute, "every message committed", func() bool { return committedAll(t, tg, group, topic) })
	got := calls(t, second)
	want := map[string]int{"blocker/0": 1, "k1/31": 1, "k2/32": 1, "k3/3": 1}
	for line, n := range want {
		if got[line] != n {
			t.Errorf("%s handled %d times by the new owner, want %d", line, got[line], n)
		}
	}
	for line, n := range got {
		if want[line] == 0 {
			t.Errorf("%s handled %d times by the new owner: it was handled before", line, n)
		}
	}
	const wantSkipped = 30 + 1 // the first 30, and the copy of event-1
	waitFor(t, 30*time.Second, "the skipped count", func() bool { return skippedIn(stats) == wantSkipped })
}

func startDedupChild(t *testing.T, topic, group, out, stats string, block bool) *exec.Cmd {
	t.Helper()
	env := []string{dedupChildEnv + "=1", "DEDUP_TOPIC=" + topic, "DEDUP_GROUP=" + group, "DEDUP_OUT=" + out, "DEDUP_STATS=" + stats}
	if block {
		env = append(env, "DEDUP_BLOCK=1")
	}
	return startTestChild(t, env...)
}

func existsIn(t *testing.T, s dedupstore.Store, id dedupstore.ID) bool {
	t.Helper()
	type answer struct {
		ok  bool
		err error
	}
	ch := make(chan answer, 1)
	s.Exists(id, func(ok bool, err error) { ch <- answer{ok, err} })
	a := <-ch
	if a.err != nil {
		t.Fatal(a.err)
	}
	return a.ok
}

// Mock mode keeps the ids in memory for the process: a client that takes
// over a partition from another (which stopped with the handled messages
// uncommitted behind one that never finished) skips what the first
// handled, with a cache of its own, cold.
func TestMockRedeliveryIsSkipped(t *testing.T) {
	tg := target{name: "mock", mock: true}
	topic := createTopic(t, tg, 1)
	group := testservices.UniqueName("dedup-mock")
	producer := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem, c.IdempotenceCacheSize = "test", 0 }))
	send := func(m dedupMessage) {
		t.Helper()
		if err := producer.Send(context.Background(), topic, m.key, m.payload()); err != nil {
			t.Fatal(err)
		}
	}
	send(dedupMessage{key: "blocker", seq: 0})
	for i := 1; i <= 10; i++ {
		m := dedupMessage{key: fmt.Sprintf("k%d", i%3), seq: i}
		if i%2 == 0 {
			m.id = fmt.Sprintf("event-%d", i)
		}
		send(m)
	}
	consumer := func(block bool) (*Client, *attempts) {
		c := newClient(t, newConfig(t, tg, func(c *config.Config) {
			c.GroupID, c.SubscribedTopics, c.ShutdownTimeout = group, []string{topic}, 200*time.Millisecond
		}))
		var seen attempts
		if err := c.Subscribe(event.HandlerFuncs{Message: func(ctx *event.Context, m *event.Message) error {
			if block && m.Key == "blocker" {
				<-ctx.OnCancel()
				return ctx.Cause()
			}
			seen.add(m, true)
			return nil
		}}); err != nil {
			t.Fatal(err)
		}
		return c, &seen
	}
	a, seenA := consumer(true)
	waitFor(t, time.Minute, "the first client to handle all but the blocker", func() bool { return seenA.count(func(attempt) bool { return true }) == 10 })
	closeClient(t, a)

	send(dedupMessage{key: "k1", seq: 11, id: "event-11"})
	send(dedupMessage{key: "k2", seq: 12, id: "event-2"}) // a copy of a handled id
	b, seenB := consumer(false)
	waitFor(t, time.Minute, "every message committed", func() bool { return committedAll(t, tg, group, topic) })
	var got []int
	seenB.mu.Lock()
	for _, x := range seenB.all {
		got = append(got, x.seq)
	}
	seenB.mu.Unlock()
	slices.Sort(got)
	if !reflect.DeepEqual(got, []int{0, 11}) {
		t.Fatalf("the second client handled seqs %v, want [0 11]", got)
	}
	if s := b.DedupStats(); s.Skipped != 11 {
		t.Fatalf("skipped %d, want 11 (ten handled before, one copy)", s.Skipped)
	}
}
