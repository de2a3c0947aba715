package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/mockbroker"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// loadedKey and loadedValue are what the test topics hold at offset i.
func loadedKey(i int64) []byte { return fmt.Appendf(nil, "key-%d", i) }
func loadedValue(i int64) []byte {
	return fmt.Appendf(nil, "value-%d-%s", i, bytes.Repeat([]byte{'v'}, 100))
}

// loaderTopic creates a one-partition topic on the cluster at addrs and
// produces n records to it, compressed (LZ4), in batches of many records:
// against Kafka, 0-49 and 50-199, so that a load of 77 starts inside a
// batch.
func loaderTopic(t *testing.T, addrs []string, n int) string {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = mockbroker.KafkaVersion
	cfg.Producer.Return.Successes = true
	cfg.Producer.Compression = sarama.CompressionLZ4
	cfg.Producer.Flush.Messages = 50
	cfg.Producer.Flush.Frequency = time.Second

	name := testservices.UniqueName("loader")
	admin, err := sarama.NewClusterAdmin(addrs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.CreateTopic(name, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.DeleteTopic(name)
		_ = admin.Close()
	})
	producer, err := sarama.NewSyncProducer(addrs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	var msgs []*sarama.ProducerMessage
	for i := range int64(n) {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: name, Key: sarama.ByteEncoder(loadedKey(i)),
			Value:   sarama.ByteEncoder(loadedValue(i)),
			Headers: []sarama.RecordHeader{{Key: []byte("h"), Value: fmt.Appendf(nil, "%d", i)}}})
	}
	testservices.WaitFor(t, 30*time.Second, "the topic to take records", func() bool { return producer.SendMessages(msgs) == nil })
	return name
}

func newLoader(t *testing.T, addrs []string, opts LoaderOptions) *Loader {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = mockbroker.KafkaVersion
	client, err := sarama.NewClient(addrs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	l := NewLoader(client, opts)
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	return l
}

func checkLoaded(t *testing.T, rec Record, err error, offset int64) {
	t.Helper()
	if err != nil {
		t.Fatalf("load %d: %v", offset, err)
	}
	if rec.Offset != offset || !bytes.Equal(rec.Key, loadedKey(offset)) || !bytes.Equal(rec.Value, loadedValue(offset)) ||
		len(rec.Headers) != 1 || string(rec.Headers[0].Value) != fmt.Sprint(offset) {
		t.Fatalf("load %d: got offset %d key %q value %.20q headers %v", offset, rec.Offset, rec.Key, rec.Value, rec.Headers)
	}
	if rec.Timestamp.IsZero() {
		t.Fatalf("load %d: no timestamp", offset)
	}
}

func checkDeleted(t *testing.T, err error, offset int64) {
	t.Helper()
	if !errors.Is(err, ErrOffsetDeleted) || fault.ClassOf(err) != fault.ClassPermanent {
		t.Fatalf("load %d: error %v (class %v), want ErrOffsetDeleted, permanent", offset, err, fault.ClassOf(err))
	}
}

// testLoadFromCluster loads records of a real or mock cluster.
func testLoadFromCluster(t *testing.T, addrs []string) {
	const n = 200
	name := loaderTopic(t, addrs, n)
	l := newLoader(t, addrs, LoaderOptions{CacheSize: 16, DiscardThreshold: 100})
	ctx := context.Background()

	// First, middle (inside a compressed batch of 50), last.
	for _, o := range []int64{0, 77, 100, n - 1} {
		rec, err := l.Load(ctx, name, 0, o)
		checkLoaded(t, rec, err, o)
	}

	// A second load of an offset is served by the cache.
	before := l.fetches.Load()
	rec, err := l.Load(ctx, name, 0, 77)
	checkLoaded(t, rec, err, 77)
	if got := l.fetches.Load(); got != before {
		t.Fatalf("a cached load fetched: %d fetches, want %d", got, before)
	}

	// At the high watermark (the log's end here) nothing is served yet:
	// on a leader elected a moment ago the high watermark may trail
	// records read before, so the load is retried, not taken as deleted.
	// Past the log's end the answer is OffsetOutOfRange: deleted.
	if _, err := l.Load(ctx, name, 0, n); err == nil || errors.Is(err, ErrOffsetDeleted) || fault.ClassOf(err) != fault.ClassTransient {
		t.Fatalf("load %d: error %v (class %v), want a transient failure", n, err, fault.ClassOf(err))
	}
	_, err = l.Load(ctx, name, 0, n+1000)
	checkDeleted(t, err, n+1000)

	// Deleted records: the log now starts at 120.
	admin, err := sarama.NewClusterAdmin(addrs, func() *sarama.Config {
		c := sarama.NewConfig()
		c.Version = mockbroker.KafkaVersion
		return c
	}())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.DeleteRecords(name, map[int32]int64{0: 120}); err != nil {
		t.Fatal(err)
	}
	// A loader that read them before still has them (its recent reads);
	// a new one finds them gone.
	if rec, err := l.Load(ctx, name, 0, 10); err != nil {
		t.Fatalf("a record read before its deletion: %v", err)
	} else {
		checkLoaded(t, rec, err, 10)
	}
	l = newLoader(t, addrs, LoaderOptions{CacheSize: 16, DiscardThreshold: 100})
	for _, o := range []int64{10, 119} {
		_, err := l.Load(ctx, name, 0, o)
		checkDeleted(t, err, o)
	}
	rec, err = l.Load(ctx, name, 0, 150)
	checkLoaded(t, rec, err, 150)

	// A fetch budget below the batch holding the record: the broker
	// returns the first batch whole anyway.
	small := newLoader(t, addrs, LoaderOptions{MaxBytes: 1024})
	rec, err = small.Load(ctx, name, 0, 160)
	checkLoaded(t, rec, err, 160)

	// An unknown partition fails, transient, within the seek timeout.
	short := newLoader(t, addrs, LoaderOptions{SeekTimeout: 5 * time.Second})
	if _, err := short.Load(ctx, name, 7, 0); err == nil || fault.ClassOf(err) != fault.ClassTransient {
		t.Fatalf("load of a partition that does not exist: %v (class %v), want a transient error", err, fault.ClassOf(err))
	}
}

func TestLoaderKafka(t *testing.T) {
	testLoadFromCluster(t, testservices.RequireKafka(t))
}

func TestLoaderMockBroker(t *testing.T) {
	c, err := mockbroker.New()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testLoadFromCluster(t, c.Addrs())
}

// gate blocks the loader's fetches until released, and tells when one
// is waiting.
type gate struct {
	entered chan int64 // the offset of each fetch that reached the gate
	release chan struct{}
	once    sync.Once
}

func newGate(l *Loader) *gate {
	g := &gate{entered: make(chan int64, 16), release: make(chan struct{})}
	l.beforeFetch = func(_ string, _ int32, offset int64) {
		g.entered <- offset
		<-g.release
	}
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// mockLoader is a loader on an isolated mock cluster whose topic holds
// 200 records, with its fetches gated.
func mockLoader(t *testing.T, opts LoaderOptions) (*Loader, *gate, string) {
	t.Helper()
	c, err := mockbroker.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	name := loaderTopic(t, c.Addrs(), 200)
	l := newLoader(t, c.Addrs(), opts)
	g := newGate(l)
	t.Cleanup(g.open) // before the loader's Close, which waits for the fetch
	return l, g, name
}

type loadOutcome struct {
	rec Record
	err error
}

func loadAsync(ctx context.Context, l *Loader, topic string, offset int64) <-chan loadOutcome {
	ch := make(chan loadOutcome, 1)
	go func() {
		rec, err := l.Load(ctx, topic, 0, offset)
		ch <- loadOutcome{rec, err}
	}()
	return ch
}

func waitPending(t *testing.T, l *Loader, topic string, n int) {
	t.Helper()
	testservices.WaitFor(t, 10*time.Second, fmt.Sprintf("%d pending loads", n), func() bool { return l.pending(topic, 0) == n })
}

func TestLoaderCoalesces(t *testing.T) {
	t.Run("loads within the threshold share a fetch", func(t *testing.T) {
		l, g, name := mockLoader(t, LoaderOptions{DiscardThreshold: 100})
		a := loadAsync(context.Background(), l, name, 30)
		if o := <-g.entered; o != 30 {
			t.Fatalf("fetch at %d, want 30", o)
		}
		b := loadAsync(context.Background(), l, name, 40)
		c := loadAsync(context.Background(), l, name, 30)
		waitPending(t, l, name, 3)
		g.open()
		for o, ch := range map[int64]<-chan loadOutcome{30: a, 40: b} {
			r := <-ch
			checkLoaded(t, r.rec, r.err, o)
		}
		r := <-c
		checkLoaded(t, r.rec, r.err, 30)
		if n := l.fetches.Load(); n != 1 {
			t.Fatalf("%d fetches, want 1", n)
		}
	})
	t.Run("a load beyond the threshold gets a fetch of its own", func(t *testing.T) {
		l, g, name := mockLoader(t, LoaderOptions{DiscardThreshold: 100})
		a := loadAsync(context.Background(), l, name, 10)
		<-g.entered
		b := loadAsync(context.Background(), l, name, 150)
		if o := <-g.entered; o != 150 {
			t.Fatalf("second fetch at %d, want 150", o)
		}
		g.open()
		r := <-a
		checkLoaded(t, r.rec, r.err, 10)
		r = <-b
		checkLoaded(t, r.rec, r.err, 150)
		if n := l.fetches.Load(); n != 2 {
			t.Fatalf("%d fetches, want 2", n)
		}
	})
	t.Run("a load below the pending fetch gets a fetch of its own", func(t *testing.T) {
		l, g, name := mockLoader(t, LoaderOptions{DiscardThreshold: 100})
		a := loadAsync(context.Background(), l, name, 50)
		<-g.entered
		b := loadAsync(context.Background(), l, name, 49)
		if o := <-g.entered; o != 49 {
			t.Fatalf("second fetch at %d, want 49", o)
		}
		g.open()
		r := <-a
		checkLoaded(t, r.rec, r.err, 50)
		r = <-b
		checkLoaded(t, r.rec, r.err, 49)
	})
}

func TestLoaderCache(t *testing.T) {
	t.Run("a cached record is not fetched again, and its bytes are its own", func(t *testing.T) {
		l, g, name := mockLoader(t, LoaderOptions{CacheSize: 2})
		g.open()
		if l.cache.Load() != nil {
			t.Fatal("the cache is made before a record is loaded")
		}
		ctx := context.Background()
		rec, err := l.Load(ctx, name, 0, 5)
		checkLoaded(t, rec, err, 5)
		if cap(rec.Value) != len(rec.Value) || cap(rec.Key) != len(rec.Key) {
			t.Fatalf("the record's slices reach past it: key %d/%d value %d/%d", len(rec.Key), cap(rec.Key), len(rec.Value), cap(rec.Value))
		}
		l.cache.Load().wait()
		if _, ok := l.cache.Load().get(recordKey{partitionKey{name, 0}, 5}); !ok {
			t.Fatal("a loaded record is not in the cache")
		}
		rec, err = l.Load(ctx, name, 0, 5)
		checkLoaded(t, rec, err, 5)
		if n := l.fetches.Load(); n != 1 {
			t.Fatalf("%d fetches, want 1", n)
		}
		// The first read covered these: no fetch of their own.
		for _, o := range []int64{6, 7} {
			rec, err := l.Load(ctx, name, 0, o)
			checkLoaded(t, rec, err, o)
		}
		if n := l.fetches.Load(); n != 1 {
			t.Fatalf("%d fetches, want 1", n)
		}
	})
	t.Run("a closed loader makes no cache", func(t *testing.T) {
		l, _, name := mockLoader(t, LoaderOptions{CacheSize: 2})
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l.keep(recordKey{partitionKey{name, 0}, 5}, Record{Offset: 5})
		if l.cache.Load() != nil {
			t.Fatal("a record kept after Close made a cache nobody closes")
		}
	})
	t.Run("loads that keep records as Close runs do not write to the closed cache", func(t *testing.T) {
		// Each round's loads are served from the first read, and keep what
		// they load in the cache while Close closes it: ristretto panics
		// on a write that comes as it closes.
		for round := 0; round < 20; round++ {
			l, g, name := mockLoader(t, LoaderOptions{CacheSize: 4096})
			g.open()
			if _, err := l.Load(context.Background(), name, 0, 0); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := 0; j < 2000; j++ {
						_, err := l.Load(context.Background(), name, 0, int64(1+(w*25+j)%199))
						if errors.Is(err, ErrLoaderClosed) {
							return
						}
					}
				}()
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
		}
	})
	t.Run("without the cache a recent read still serves the offsets it covered", func(t *testing.T) {
		l, g, name := mockLoader(t, LoaderOptions{})
		g.open()
		for _, off := range []int64{5, 5, 6, 9} {
			rec, err := l.Load(context.Background(), name, 0, off)
			checkLoaded(t, rec, err, off)
		}
		if n := l.fetches.Load(); n != 1 {
			t.Fatalf("%d fetches, want 1: one read covers offsets 5 to 9", n)
		}
		if l.cache.Load() != nil {
			t.Fatal("a cache size of zero must disable the record cache")
		}
	})
}

func TestLoaderLimitsAndEnds(t *testing.T) {
	t.Run("at most MaxInFlight loads at once; waiting for a permit is cancellable", func(t *testing.T) {
		l, g, name := mockLoader(t, LoaderOptions{MaxInFlight: 1})
		a := loadAsync(context.Background(), l, name, 1)
		<-g.entered
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := l.Load(ctx, name, 0, 2); !errors.Is(err, context.Canceled) {
			t.Fatalf("load without a permit: %v, want context.Canceled", err)
		}
		b := loadAsync(context.Background(), l, name, 2)
		// b waits for the permit a holds: it has neither joined a's fetch
		// nor started one (a weak check: b may not have reached Load yet).
		waitPending(t, l, name, 1)
		if n := l.fetches.Load(); n != 1 {
			t.Fatalf("%d fetches, want 1", n)
		}
		g.open()
		r := <-a
		checkLoaded(t, r.rec, r.err, 1)
		r = <-b
		checkLoaded(t, r.rec, r.err, 2)
	})
	t.Run("cancellation ends a load waiting for its fetch", func(t *testing.T) {
		l, g, name := mockLoader(t, LoaderOptions{})
		ctx, cancel := context.WithCancel(context.Background())
		a := loadAsync(ctx, l, name, 3)
		<-g.entered
		cancel()
		r := <-a
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled load: %v, want context.Canceled", r.err)
		}
		if n := l.pending(name, 0); n != 0 {
			t.Fatalf("%d loads pending after the cancellation", n)
		}
	})
	t.Run("a read longer than the seek timeout fails transient", func(t *testing.T) {
		l, g, name := mockLoader(t, LoaderOptions{SeekTimeout: 50 * time.Millisecond})
		a := loadAsync(context.Background(), l, name, 3)
		<-g.entered
		r := <-a
		if !errors.Is(r.err, ErrLoadTimeout) || fault.ClassOf(r.err) != fault.ClassTransient {
			t.Fatalf("timed out load: %v, want ErrLoadTimeout, transient", r.err)
		}
		g.open()
		rec, err := l.Load(context.Background(), name, 0, 3)
		checkLoaded(t, rec, err, 3)
	})
	t.Run("Close ends waiting loads and fails later ones, terminal", func(t *testing.T) {
		l, g, name := mockLoader(t, LoaderOptions{})
		a := loadAsync(context.Background(), l, name, 3)
		<-g.entered
		closed := make(chan error, 1)
		go func() { closed <- l.Close() }()
		r := <-a
		if !errors.Is(r.err, ErrLoaderClosed) || fault.ClassOf(r.err) != fault.ClassTerminal {
			t.Fatalf("load during Close: %v, want ErrLoaderClosed, terminal", r.err)
		}
		g.open()
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		if _, err := l.Load(context.Background(), name, 0, 3); !errors.Is(err, ErrLoaderClosed) || !fault.IsTerminal(err) {
			t.Fatalf("load after Close: %v, want ErrLoaderClosed, terminal", err)
		}
	})
}

// Against sarama's mock broker, for answers a real broker gives only in
// conditions hard to arrange quickly: compaction and moved leaders.
func TestLoaderAnswers(t *testing.T) {
	load := func(t *testing.T, b *sarama.MockBroker, offset int64) (Record, error) {
		t.Helper()
		client, err := sarama.NewClient([]string{b.Addr()}, testConfig())
		if err != nil {
			t.Fatal(err)
		}
		l := NewLoader(client, LoaderOptions{Logger: quiet, SeekTimeout: 10 * time.Second})
		defer l.Close()
		return l.Load(context.Background(), topic, 0, offset)
	}
	t.Run("an offset compaction removed is deleted", func(t *testing.T) {
		b := mockBroker(t, 1)
		b.SetHandlerByMap(map[string]sarama.MockResponse{
			"MetadataRequest": metadata(t, b, b),
			"FetchRequest":    sarama.NewMockSequence(fetchResponse(sarama.ErrNoError, 0, 1, 3)),
		})
		_, err := load(t, b, 2)
		checkDeleted(t, err, 2)
	})
	t.Run("a moved leader is found again", func(t *testing.T) {
		b1, b2 := mockBroker(t, 1), mockBroker(t, 2)
		b1.SetHandlerByMap(map[string]sarama.MockResponse{
			"MetadataRequest": sarama.NewMockSequence(metadata(t, b1, b1, b2), metadata(t, b2, b1, b2)),
			"FetchRequest":    sarama.NewMockSequence(fetchResponse(sarama.ErrNotLeaderForPartition)),
		})
		b2.SetHandlerByMap(map[string]sarama.MockResponse{
			"MetadataRequest": metadata(t, b2, b1, b2),
			"FetchRequest":    sarama.NewMockSequence(fetchResponse(sarama.ErrNoError, 4, 5, 6)),
		})
		rec, err := load(t, b1, 5)
		if err != nil || rec.Offset != 5 || string(rec.Value) != "v" {
			t.Fatalf("load 5: %+v, %v", rec, err)
		}
	})
	t.Run("a leader that stays unknown fails transient", func(t *testing.T) {
		b := mockBroker(t, 1)
		b.SetHandlerByMap(map[string]sarama.MockResponse{
			"MetadataRequest": metadata(t, b, b),
			"FetchRequest":    sarama.NewMockSequence(fetchResponse(sarama.ErrNotLeaderForPartition)),
		})
		_, err := load(t, b, 5)
		if !errors.Is(err, sarama.ErrNotLeaderForPartition) || fault.ClassOf(err) != fault.ClassTransient {
			t.Fatalf("load: %v, want NotLeaderForPartition, transient", err)
		}
	})
	t.Run("a Kafka error is classified", func(t *testing.T) {
		b := mockBroker(t, 1)
		b.SetHandlerByMap(map[string]sarama.MockResponse{
			"MetadataRequest": metadata(t, b, b),
			"FetchRequest":    sarama.NewMockSequence(fetchResponse(sarama.ErrInvalidMessage)),
		})
		_, err := load(t, b, 5)
		if !errors.Is(err, sarama.ErrInvalidMessage) || !fault.IsPermanent(err) {
			t.Fatalf("load: %v, want InvalidMessage, permanent", err)
		}
	})
}
