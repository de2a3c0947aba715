package producer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/mockbroker"
)

// Against the real broker: records come back intact, keyed records land on
// crc32(key) % partitions, and the id cache drops a repeat.
func TestKafkaSendAndReadBack(t *testing.T) {
	brokers := testservices.RequireKafka(t)
	topic := testservices.UniqueName("producer")
	const partitions = 6

	cfg := sarama.NewConfig()
	cfg.Version = mockbroker.KafkaVersion
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		t.Fatalf("admin: %v", err)
	}
	defer admin.Close()
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	defer func() {
		if err := admin.DeleteTopic(topic); err != nil {
			t.Errorf("delete topic: %v", err)
		}
	}()

	p, err := New(Options{Brokers: brokers, SourceSystem: "producer-it", SendTimeout: 30 * time.Second, IdempotenceCacheSize: 128})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()

	keys := []string{"a", "abc", "hello", "user-42", "123456789", "\u00e9t\u00e9", "order-17", "zz"}
	want := map[string]string{} // value -> key
	for i, key := range keys {
		payload := fmt.Sprintf(`{"id":"evt-%d","type":"test"}`, i)
		d, err := p.Send(context.Background(), topic, key, []byte(payload), Header{Key: "h", Value: []byte("v")})
		if err != nil {
			t.Fatalf("Send(%q): %v", key, err)
		}
		if wantP := PartitionForKey([]byte(key), partitions); d.Partition != wantP {
			t.Errorf("key %q went to partition %d, want crc32 partition %d", key, d.Partition, wantP)
		}
		want[payload] = key
	}
	// A repeat of the first event on the same key is dropped.
	d, err := p.Send(context.Background(), topic, keys[0], []byte(`{"id":"evt-0","type":"test"}`))
	if err != nil || !d.Skipped {
		t.Errorf("repeat send = %+v, %v; want skipped", d, err)
	}

	msgs := readTopic(t, brokers, topic)
	if len(msgs) != len(keys) {
		t.Fatalf("read %d records, want %d", len(msgs), len(keys))
	}
	for _, m := range msgs {
		key, ok := want[string(m.Value)]
		if !ok || string(m.Key) != key {
			t.Errorf("unexpected record key %q value %s", m.Key, m.Value)
			continue
		}
		if wantP := PartitionForKey(m.Key, partitions); m.Partition != wantP {
			t.Errorf("key %q stored in partition %d, want %d", key, m.Partition, wantP)
		}
		if len(m.Headers) != 2 || string(m.Headers[0].Key) != SourceSystemHeader || string(m.Headers[0].Value) != "producer-it" {
			t.Errorf("headers of %q: %v", key, m.Headers)
		}
	}
}
