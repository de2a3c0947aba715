// Package kafkatest reads what tests wrote to Kafka, with clients of the
// tests' own.
package kafkatest

import (
	"testing"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/mockbroker"
)

// SaramaConfig is the configuration of the tests' own clients: they wait
// for every replica and never create the topics they look at.
func SaramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = mockbroker.KafkaVersion
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Partitioner = sarama.NewRoundRobinPartitioner
	cfg.Metadata.AllowAutoTopicCreation = false
	return cfg
}

// HighWaterMarks is the high-water mark of each partition of topic; empty
// when the topic does not exist (yet).
func HighWaterMarks(t testing.TB, client sarama.Client, topic string) map[int32]int64 {
	t.Helper()
	hwms := map[int32]int64{}
	parts, err := client.Partitions(topic)
	if err != nil {
		return hwms
	}
	for _, p := range parts {
		hwm, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatal(err)
		}
		hwms[p] = hwm
	}
	return hwms
}

// ReadTopic reads every record of topic on the cluster at addrs up to its
// high-water marks (nothing when the topic does not exist).
func ReadTopic(t testing.TB, addrs []string, topic string) []*sarama.ConsumerMessage {
	t.Helper()
	client, err := sarama.NewClient(addrs, SaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	cons, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var out []*sarama.ConsumerMessage
	for p, hwm := range HighWaterMarks(t, client, topic) {
		if hwm == 0 {
			continue
		}
		pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		for m := range pc.Messages() {
			out = append(out, m)
			if m.Offset == hwm-1 {
				break
			}
		}
		pc.Close()
	}
	return out
}
