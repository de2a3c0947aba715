package producer

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"go.uber.org/goleak"

	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/mockbroker"
)

// Every producer must stop all of its goroutines on Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testservices.LeakOptions()...) }

// bogusBrokers is an address nothing listens on; mock-mode producers are
// given it to prove they never dial their configured brokers.
var bogusBrokers = []string{"127.0.0.1:1"}

// newMockProducer returns a mock-mode producer, closed when the test ends.
func newMockProducer(t testing.TB, edit func(*Options)) *Producer {
	t.Helper()
	opts := Options{
		Brokers:              bogusBrokers,
		Mock:                 true,
		SourceSystem:         "producer-test",
		SendTimeout:          10 * time.Second,
		IdempotenceCacheSize: 64,
	}
	if edit != nil {
		edit(&opts)
	}
	p, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// mockTopic creates a fresh topic on the shared mock cluster.
func mockTopic(t testing.TB, partitions int32) (topic string, addrs []string) {
	t.Helper()
	topic = testservices.UniqueName("producer")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := mockbroker.EnsureTopic(ctx, topic, partitions); err != nil {
		t.Fatalf("EnsureTopic: %v", err)
	}
	c, err := mockbroker.Shared()
	if err != nil {
		t.Fatalf("mockbroker.Shared: %v", err)
	}
	return topic, c.Addrs()
}

// readTopic returns every record of topic, partition by partition in offset
// order. It reads each partition up to the high watermark observed at the
// start, so it never waits for records that might not come: callers read
// after their sends were acknowledged.
func readTopic(t testing.TB, addrs []string, topic string) []*sarama.ConsumerMessage {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = mockbroker.KafkaVersion
	client, err := sarama.NewClient(addrs, cfg)
	if err != nil {
		t.Fatalf("consumer client: %v", err)
	}
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer consumer.Close()

	partitions, err := client.Partitions(topic)
	if err != nil {
		t.Fatalf("partitions of %s: %v", topic, err)
	}
	var out []*sarama.ConsumerMessage
	deadline := time.After(20 * time.Second)
	for _, p := range partitions {
		hwm, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatalf("high watermark of %s/%d: %v", topic, p, err)
		}
		if hwm == 0 {
			continue
		}
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("consume %s/%d: %v", topic, p, err)
		}
		for done := false; !done; {
			select {
			case m := <-pc.Messages():
				out = append(out, m)
				done = m.Offset >= hwm-1
			case err := <-pc.Errors():
				t.Fatalf("consume %s/%d: %v", topic, p, err)
			case <-deadline:
				t.Fatalf("timed out reading %s/%d up to offset %d", topic, p, hwm)
			}
		}
		if err := pc.Close(); err != nil {
			t.Fatalf("close partition consumer: %v", err)
		}
	}
	return out
}

// values returns the record values as strings, sorted, for set comparisons.
func values(msgs []*sarama.ConsumerMessage) []string {
	out := make([]string, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, string(m.Value))
	}
	slices.Sort(out)
	return out
}

func sendOK(t testing.TB, p *Producer, topic, key, payload string, headers ...Header) Delivery {
	t.Helper()
	d, err := p.Send(context.Background(), topic, key, []byte(payload), headers...)
	if err != nil {
		t.Fatalf("Send(%s, %q, %s): %v", topic, key, payload, err)
	}
	return d
}

func idPayload(id string, n int) string { return fmt.Sprintf(`{"id":%q,"n":%d}`, id, n) }
