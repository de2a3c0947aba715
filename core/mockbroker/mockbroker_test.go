package mockbroker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"go.uber.org/goleak"

	"github.com/prosody-events/prosody-go/core/internal/testservices"
)

func TestMain(m *testing.M) {
	// The shared cluster lives until the process exits by design; the
	// common options ignore exactly its top-level goroutines.
	goleak.VerifyTestMain(m, testservices.LeakOptions()...)
}

// newTopic returns a topic name unique to this test, so tests sharing the
// process-wide cluster do not see each other's data.
// Kafka topic names allow only [a-zA-Z0-9._-], so subtest slashes are
// replaced.
func newTopic(t *testing.T) string {
	name := strings.ReplaceAll(t.Name(), "/", ".")
	return fmt.Sprintf("%s-%d", name, time.Now().UnixNano())
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func testConfig(version sarama.KafkaVersion) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = version
	return cfg
}

// partitionCount asks the cluster, through an ordinary sarama client, how
// many partitions topic has.
func partitionCount(t *testing.T, c *Cluster, topic string) int {
	t.Helper()
	client, err := sarama.NewClient(c.Addrs(), testConfig(KafkaVersion))
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	defer client.Close()
	ps, err := client.Partitions(topic)
	if err != nil {
		t.Fatalf("partitions of %q: %v", topic, err)
	}
	return len(ps)
}

func TestSharedConcurrent(t *testing.T) {
	const callers = 32
	var (
		wg       sync.WaitGroup
		clusters [callers]*Cluster
		errs     [callers]error
	)
	for i := range callers {
		wg.Go(func() { clusters[i], errs[i] = Shared() })
	}
	wg.Wait()

	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("Shared() call %d: %v", i, errs[i])
		}
		if clusters[i] != clusters[0] {
			t.Fatalf("Shared() call %d returned %p, call 0 returned %p", i, clusters[i], clusters[0])
		}
	}
	addrs := clusters[0].Addrs()
	if len(addrs) == 0 {
		t.Fatal("Addrs() is empty")
	}
	for _, a := range addrs {
		if len(a) < 10 || a[:10] != "127.0.0.1:" {
			t.Errorf("address %q is not on 127.0.0.1", a)
		}
	}

	// Closing the shared cluster must not take it away from other users.
	clusters[0].Close()
	if n := partitionCount(t, clusters[0], "after-close-"+newTopic(t)); n != DefaultPartitions {
		t.Fatalf("auto-created topic after Close has %d partitions, want %d", n, DefaultPartitions)
	}
}

func TestEnsureTopicIdempotent(t *testing.T) {
	ctx := testContext(t)
	topic := newTopic(t)

	if err := EnsureTopic(ctx, topic, 3); err != nil {
		t.Fatalf("first EnsureTopic: %v", err)
	}
	// Again, with a different count, and concurrently: all succeed and
	// the first creation wins.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- EnsureTopic(ctx, topic, 5) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("repeated EnsureTopic: %v", err)
		}
	}

	c, err := Shared()
	if err != nil {
		t.Fatal(err)
	}
	if n := partitionCount(t, c, topic); n != 3 {
		t.Fatalf("topic has %d partitions, want 3", n)
	}
}

func TestEnsureTopicDefaultPartitions(t *testing.T) {
	ctx := testContext(t)
	topic := newTopic(t)
	if err := EnsureTopic(ctx, topic, 0); err != nil {
		t.Fatalf("EnsureTopic: %v", err)
	}
	c, err := Shared()
	if err != nil {
		t.Fatal(err)
	}
	if n := partitionCount(t, c, topic); n != DefaultPartitions {
		t.Fatalf("topic has %d partitions, want %d", n, DefaultPartitions)
	}
}

func TestEnsureTopicCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := EnsureTopic(ctx, newTopic(t), 1)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("EnsureTopic with cancelled context = %v, want context.Canceled", err)
	}
}

func TestNewIsIsolated(t *testing.T) {
	ctx := testContext(t)
	c, err := New()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer c.Close()

	shared, err := Shared()
	if err != nil {
		t.Fatal(err)
	}
	if c == shared {
		t.Fatal("New returned the shared cluster")
	}
	topic := newTopic(t)
	if err := c.EnsureTopic(ctx, topic, 2); err != nil {
		t.Fatalf("EnsureTopic: %v", err)
	}
	if n := partitionCount(t, c, topic); n != 2 {
		t.Fatalf("topic on isolated cluster has %d partitions, want 2", n)
	}
	// The shared cluster has never heard of it, so it auto-creates it
	// with the default count instead.
	if n := partitionCount(t, shared, topic); n != DefaultPartitions {
		t.Fatalf("topic on shared cluster has %d partitions, want %d", n, DefaultPartitions)
	}
}

func TestProduceConsume(t *testing.T) {
	for _, v := range []sarama.KafkaVersion{KafkaVersion, sarama.V2_8_0_0, sarama.V4_0_0_0, sarama.MaxVersion} {
		t.Run(v.String(), func(t *testing.T) { testProduceConsume(t, v) })
	}
}

// testProduceConsume produces with sarama's idempotent producer and reads
// everything back with a consumer group: the client paths Prosody uses.
func testProduceConsume(t *testing.T, version sarama.KafkaVersion) {
	const (
		partitions = 4
		keys       = 16
		messages   = 200
	)
	ctx := testContext(t)
	c, err := Shared()
	if err != nil {
		t.Fatal(err)
	}
	topic := newTopic(t)
	if err := c.EnsureTopic(ctx, topic, partitions); err != nil {
		t.Fatalf("EnsureTopic: %v", err)
	}

	pcfg := testConfig(version)
	pcfg.Producer.Idempotent = true
	pcfg.Producer.RequiredAcks = sarama.WaitForAll
	pcfg.Producer.Return.Successes = true
	pcfg.Producer.Compression = sarama.CompressionLZ4
	pcfg.Producer.Partitioner = sarama.NewConsistentCRCHashPartitioner
	pcfg.Net.MaxOpenRequests = 1
	producer, err := sarama.NewSyncProducer(c.Addrs(), pcfg)
	if err != nil {
		t.Fatalf("new producer: %v", err)
	}
	want := make(map[string]int32) // value -> partition it was written to
	for i := range messages {
		key := fmt.Sprintf("key-%d", i%keys)
		value := fmt.Sprintf("%s/%d", key, i)
		p, _, err := producer.SendMessage(&sarama.ProducerMessage{
			Topic: topic,
			Key:   sarama.StringEncoder(key),
			Value: sarama.StringEncoder(value),
		})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		want[value] = p
	}
	if err := producer.Close(); err != nil {
		t.Fatalf("close producer: %v", err)
	}

	ccfg := testConfig(version)
	ccfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	group, err := sarama.NewConsumerGroup(c.Addrs(), topic+"-group", ccfg)
	if err != nil {
		t.Fatalf("new consumer group: %v", err)
	}
	defer group.Close()

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := &collector{want: len(want), done: cancel, got: make(map[string]int32)}
	for cctx.Err() == nil {
		if err := group.Consume(cctx, []string{topic}, h); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
			t.Fatalf("consume: %v", err)
		}
	}
	if err := ctx.Err(); err != nil {
		t.Fatalf("consumed %d of %d messages before timeout", h.count(), len(want))
	}
	for v, p := range want {
		if gp, ok := h.got[v]; !ok {
			t.Errorf("message %q not consumed", v)
		} else if gp != p {
			t.Errorf("message %q consumed from partition %d, produced to %d", v, gp, p)
		}
	}
}

// collector is a sarama.ConsumerGroupHandler that records every message and
// cancels the consume loop once it has seen want distinct messages.
type collector struct {
	want int
	done context.CancelFunc

	mu  sync.Mutex
	got map[string]int32 // value -> partition
}

func (*collector) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (*collector) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *collector) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		h.mu.Lock()
		h.got[string(msg.Value)] = msg.Partition
		n := len(h.got)
		h.mu.Unlock()
		sess.MarkMessage(msg, "")
		if n >= h.want {
			h.done()
		}
	}
	return nil
}

func (h *collector) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.got)
}
