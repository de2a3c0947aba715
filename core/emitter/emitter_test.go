package emitter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/kafkatest"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/telemetry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testservices.LeakOptions()...) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// blackhole accepts connections and never answers: a broker behind a
// network fault.
func blackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

func messageEvent(i int) telemetry.Event {
	m := &event.Message{Topic: "orders", Partition: int32(i % 4), Offset: int64(i), Key: fmt.Sprintf("k%d", i%50)}
	return telemetry.Event{Kind: telemetry.HandlerSucceeded, At: telemetry.Now(), Topic: m.Topic, Partition: m.Partition, Key: m.Key, Subject: m}
}

// With Kafka unreachable, Observe keeps returning at once: the buffer
// fills, the rest is dropped and counted, a flush says why it cannot, and
// closing does not wait for the network.
func TestUnreachableKafkaNeverHoldsTheCaller(t *testing.T) {
	em, err := New(Options{Brokers: []string{blackhole(t)}, Topic: "telemetry", Group: "g", Capacity: 100, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	const n = 10_000
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				em.Observe(messageEvent(i))
			}
		}()
	}
	wg.Wait()
	if s := em.Stats(); s.Accepted != 100 || s.Dropped != n-100 || s.Delivered != 0 {
		t.Fatalf("stats %+v, want 100 accepted and %d dropped", s, n-100)
	}
	// A flush waits for the connection, as long as its context lets it.
	flushCtx, cancelFlush := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelFlush()
	if err := em.Flush(flushCtx); !errors.Is(err, ErrNotConnected) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("flush: %v, want ErrNotConnected and the deadline", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := em.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if s := em.Stats(); s.Dropped != n {
		t.Fatalf("after close %+v: the queued events are dropped too", s)
	}
}

// Flush delivers what was queued, without waiting for the producer's
// linger, and every record is a valid document keyed by its event's key.
// Events observed and flushed before the emitter has reached Kafka (a
// client flushed right after it started) wait for the connection.
func TestFlushDelivers(t *testing.T) {
	addrs := testservices.RequireKafka(t)
	topic := testservices.UniqueName("telemetry")
	em, err := New(Options{Brokers: addrs, Topic: topic, Group: "g", SourceSystem: "src", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer em.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 500
	for i := 0; i < n; i++ {
		em.Observe(messageEvent(i))
	}
	if err := em.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s := em.Stats(); s.Delivered != n || s.Dropped != 0 || s.Failed != 0 {
		t.Fatalf("after flush %+v, want %d delivered", s, n)
	}
	// Flushing twice in a row is fine, and so is more traffic after it.
	em.Observe(messageEvent(n))
	if err := em.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	records := kafkatest.ReadTopic(t, addrs, topic)
	if len(records) != n+1 {
		t.Fatalf("%d records on the topic, want %d", len(records), n+1)
	}
	offsets := map[int64]bool{}
	for _, r := range records {
		name, err := Check(r.Value)
		if err != nil || name != MessageSucceeded {
			t.Fatalf("record %s: %s, %v", r.Value, name, err)
		}
		var doc struct {
			Offset int64
			Key    string
		}
		if err := jsonUnmarshal(r.Value, &doc); err != nil {
			t.Fatal(err)
		}
		if string(r.Key) != doc.Key {
			t.Fatalf("record key %q, event key %q", r.Key, doc.Key)
		}
		offsets[doc.Offset] = true
	}
	if len(offsets) != n+1 {
		t.Fatalf("%d distinct events on the topic, want %d", len(offsets), n+1)
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// Close sends everything queued before it, and what is observed after it
// is dropped, counted.
func TestCloseDeliversWhatIsQueued(t *testing.T) {
	addrs := testservices.RequireKafka(t)
	topic := testservices.UniqueName("telemetry")
	em, err := New(Options{Brokers: addrs, Topic: topic, Group: "g", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := connected(t, em)
	const n = 2000
	for i := 0; i < n; i++ {
		em.Observe(messageEvent(i))
	}
	if err := em.Close(ctx); err != nil {
		t.Fatal(err)
	}
	em.Observe(messageEvent(n))
	if s := em.Stats(); s.Accepted != n || s.Delivered != n || s.Dropped != 1 || s.Failed != 0 {
		t.Fatalf("after close %+v, want %d accepted and delivered, the late one dropped", s, n)
	}
	if got := len(kafkatest.ReadTopic(t, addrs, topic)); got != n {
		t.Fatalf("%d records on the topic, want %d", got, n)
	}
}

// connected waits until em has reached Kafka (a first flush waits for
// that) and returns a context for the test's further calls.
func connected(t *testing.T, em *Emitter) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	if err := em.Flush(ctx); err != nil {
		t.Fatalf("the emitter did not connect: %v", err)
	}
	return ctx
}
