package consumer

import (
	"context"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math/rand"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"go.uber.org/goleak"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/middleware"
	"github.com/prosody-events/prosody-go/core/mockbroker"
)

func TestMain(m *testing.M) {
	// The crash test re-runs this binary as the consumer it kills.
	if os.Getenv(crashChildEnv) != "" {
		os.Exit(runCrashChild())
	}
	goleak.VerifyTestMain(m, testservices.LeakOptions()...)
}

func testLogger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("PROSODY_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// target is where a test runs: the shared mock cluster or the real broker.
type target struct {
	name    string
	mock    bool
	brokers []string
}

func targets(t *testing.T) []target {
	return []target{
		{name: "mock", mock: true},
		{name: "kafka", brokers: testservices.RequireKafka(t)},
	}
}

func (tg target) addrs(t *testing.T) []string {
	if !tg.mock {
		return tg.brokers
	}
	c, err := mockbroker.Shared()
	if err != nil {
		t.Fatal(err)
	}
	return c.Addrs()
}

func saramaTestConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = mockbroker.KafkaVersion
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Partitioner = sarama.NewCustomPartitioner(sarama.WithAbsFirst(), sarama.WithCustomHashFunction(crc32.NewIEEE))
	return cfg
}

// createTopic makes a topic with n partitions on the target.
func createTopic(t *testing.T, tg target, n int32) string {
	t.Helper()
	name := testservices.UniqueName("consumer-" + tg.name)
	admin, err := sarama.NewClusterAdmin(tg.addrs(t), saramaTestConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreateTopic(name, &sarama.TopicDetail{NumPartitions: n, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	waitForLeaders(t, tg, name, n)
	return name
}

// waitForLeaders returns once every partition of topic has a leader. A
// broker acknowledges CreateTopics before leaders are elected, and records
// produced in that window are retried by the producer, which muddles tests
// about ordering.
func waitForLeaders(t *testing.T, tg target, topic string, n int32) {
	t.Helper()
	client, err := sarama.NewClient(tg.addrs(t), saramaTestConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	waitFor(t, 30*time.Second, "partition leaders of "+topic, func() bool {
		if err := client.RefreshMetadata(topic); err != nil {
			return false
		}
		for p := int32(0); p < n; p++ {
			if _, err := client.Leader(topic, p); err != nil {
				return false
			}
		}
		return true
	})
}

type record struct {
	key, value string
	headers    []sarama.RecordHeader
	nilKey     bool
	nilValue   bool   // a tombstone
	rawKey     []byte // overrides key when set
}

// produce sends records in order through one idempotent async producer and
// fails the test if any send fails. It may run on any goroutine.
func produce(t *testing.T, tg target, topic string, records []record) {
	t.Helper()
	if n := tryProduce(t, tg, topic, records); n > 0 {
		t.Errorf("%d records could not be produced", n)
	}
}

func tryProduce(t *testing.T, tg target, topic string, records []record) (failed int) {
	t.Helper()
	p, err := sarama.NewAsyncProducer(tg.addrs(t), saramaTestConfig())
	if err != nil {
		t.Errorf("producer: %v", err)
		return len(records)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	errs := 0
	go func() {
		defer wg.Done()
		for range p.Successes() {
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for e := range p.Errors() {
			errs++
			t.Errorf("produce: %v", e.Err)
		}
	}()
	for _, r := range records {
		m := &sarama.ProducerMessage{Topic: topic, Headers: r.headers}
		if !r.nilValue {
			m.Value = sarama.StringEncoder(r.value)
		}
		switch {
		case r.rawKey != nil:
			m.Key = sarama.ByteEncoder(r.rawKey)
		case !r.nilKey:
			m.Key = sarama.StringEncoder(r.key)
		}
		p.Input() <- m
	}
	p.AsyncClose()
	wg.Wait()
	return errs
}

func baseOptions(tg target, topic string) Options {
	return Options{
		Brokers:         tg.brokers,
		Mock:            tg.mock,
		GroupID:         testservices.UniqueName("group"),
		Topics:          []string{topic},
		MaxUncommitted:  64,
		PollInterval:    50 * time.Millisecond,
		CommitInterval:  200 * time.Millisecond,
		ShutdownTimeout: 5 * time.Second,
		StallThreshold:  time.Minute,
		Logger:          testLogger(),
	}
}

// testStacks is the engine's standard stack for tests: retry transient
// failures, refuse cancelled events, bound concurrency, then the handler.
func testStacks(h event.Handler, limiter *middleware.Scheduler) middleware.Stacks {
	return middleware.Stacks{Events: middleware.NewStack(middleware.Handler(h, limiter),
		middleware.NewRetry(middleware.RetryPolicy{MaxRetries: middleware.Unlimited, Base: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond}),
		middleware.Cancellation{},
		limiter,
	)}
}

// withStacks returns opts running h through testStacks with limiter.
func withStacks(opts Options, h event.Handler, limiter *middleware.Scheduler) Options {
	opts.Stacks = testStacks(h, limiter)
	return opts
}

// hostHandler is a handler whose messages start asynchronously and finish
// on another goroutine, the way the C ABI's do: no engine goroutine waits
// for them.
type hostHandler struct{ event.Handler }

func (hostHandler) PrepareMessage(*event.Message) event.Prepared { return nil }

func (h hostHandler) StartMessage(ctx *event.Context, m *event.Message, _ event.Prepared, done event.Done) {
	go func() { done.Done(h.OnMessage(ctx, m)) }()
}

// startStyled starts a consumer running h through the test chain, or, when
// async is set, starting its messages asynchronously the way the C ABI
// does: each finishes on another goroutine and no engine goroutine waits
// for it.
func startStyled(t *testing.T, opts Options, h event.Handler, slots int, async bool) *Consumer {
	t.Helper()
	limiter := middleware.NewFIFOScheduler(slots)
	if async {
		h = hostHandler{h}
	}
	opts.Scheduler = limiter
	c, err := Start(withStacks(opts, h, limiter))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// eachTargetAndStyle runs fn as a subtest for every target and both
// handler styles (synchronous, and asynchronous as behind the C ABI).
func eachTargetAndStyle(t *testing.T, fn func(t *testing.T, tg target, async bool)) {
	styles := []struct {
		name  string
		async bool
	}{{"sync", false}, {"async", true}}
	for _, tg := range targets(t) {
		for _, st := range styles {
			t.Run(tg.name+"/"+st.name, func(t *testing.T) { fn(t, tg, st.async) })
		}
	}
}

func stopConsumer(t *testing.T, c *Consumer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// waitFor is testservices.WaitFor, named short for the many uses here.
var waitFor = testservices.WaitFor

func jsonValue(key string, seq int) string {
	return fmt.Sprintf(`{"id":"%s-%d","type":"test.event","key":%q,"seq":%d}`, key, seq, key, seq)
}

func randomDelay(rng *rand.Rand, mu *sync.Mutex, max time.Duration) time.Duration {
	mu.Lock()
	defer mu.Unlock()
	return time.Duration(rng.Int63n(int64(max)))
}

// committedOffsets returns the group's committed offset per partition.
func committedOffsets(t *testing.T, tg target, group, topic string, partitions int32) map[int32]int64 {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(tg.addrs(t), saramaTestConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ps := make([]int32, partitions)
	for i := range ps {
		ps[i] = int32(i)
	}
	resp, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: ps})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for p, b := range resp.Blocks[topic] {
		out[p] = b.Offset
	}
	return out
}

// endOffsets returns each partition's next offset to be written.
func endOffsets(t *testing.T, tg target, topic string, partitions int32) map[int32]int64 {
	t.Helper()
	client, err := sarama.NewClient(tg.addrs(t), saramaTestConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	out := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		o, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = o
	}
	return out
}
