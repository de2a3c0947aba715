package fetch

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/mockbroker"
)

// Against the real broker, with a fetch size far below the records' batch
// size: the broker returns a batch larger than that only for the first
// partition of a response that has records, and nothing for the others
// (Kafka 4; older brokers cut them short, which TestRecords covers). Every
// record of both partitions must still arrive, in order: a partition left
// empty in one fetch comes first in another.
func TestFetchFromKafka(t *testing.T) {
	addrs := testservices.RequireKafka(t)
	cfg := sarama.NewConfig()
	cfg.Version = mockbroker.KafkaVersion
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Flush.Messages = 20 // a send's records in one batch per partition
	cfg.Producer.Flush.Frequency = time.Second

	name := testservices.UniqueName("fetch")
	admin, err := sarama.NewClusterAdmin(addrs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.CreateTopic(name, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	defer admin.DeleteTopic(name)
	defer admin.Close()

	const n = 50
	value := func(p, i int) []byte {
		return append(fmt.Appendf(nil, "%d-%d:", p, i), bytes.Repeat([]byte{'x'}, 3000)...)
	}
	producer, err := sarama.NewSyncProducer(addrs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// In five sends, so that each partition has several batches: while
	// both have records left, every fetch finds both with data.
	for round := range 5 {
		var msgs []*sarama.ProducerMessage
		for i := round * n / 5; i < (round+1)*n/5; i++ {
			for p := range 2 {
				msgs = append(msgs, &sarama.ProducerMessage{Topic: name, Partition: int32(p), Value: sarama.ByteEncoder(value(p, i))})
			}
		}
		testservices.WaitFor(t, 30*time.Second, "the topic to take records", func() bool { return producer.SendMessages(msgs) == nil })
	}
	producer.Close()

	client, err := sarama.NewClient(addrs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := New(client, Options{PartitionBytes: 1024, MaxWait: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer f.Close()
	// Both partitions in every fetch: one of them comes second.
	streams := []*Stream{
		f.Subscribe(name, 0, sarama.OffsetOldest, 1000),
		f.Subscribe(name, 1, sarama.OffsetOldest, 1000),
	}
	for p, s := range streams {
		defer s.Close()
		got := 0
		deadline := time.After(30 * time.Second)
		for got < n {
			rs := s.Peek(n)
			if len(rs) == 0 {
				select {
				case <-s.Ready():
				case <-deadline:
					t.Fatalf("partition %d: read %d of %d records", p, got, n)
				}
				continue
			}
			for _, r := range rs {
				if r.Offset != int64(got) || !bytes.Equal(r.Value, value(p, got)) {
					t.Fatalf("partition %d: record %d at offset %d, value %.10q", p, got, r.Offset, r.Value)
				}
				got++
			}
			s.Take(len(rs))
		}
	}
}
