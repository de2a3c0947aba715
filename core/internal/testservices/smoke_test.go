package testservices

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/gocql/gocql"
)

// TestKafkaRoundTrip proves the broker on localhost:9094 is a real Kafka:
// a topic is created through the admin API, records are produced with an
// idempotent producer and read back by a consumer group.
func TestKafkaRoundTrip(t *testing.T) {
	brokers := RequireKafka(t)
	topic := UniqueName("smoke")
	group := UniqueName("smoke-group")

	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest

	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		t.Fatalf("admin: %v", err)
	}
	defer admin.Close()
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	defer func() {
		if err := admin.DeleteTopic(topic); err != nil {
			t.Errorf("delete topic: %v", err)
		}
	}()

	producer, err := sarama.NewSyncProducer(brokers, cfg)
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	const n = 30
	for i := 0; i < n; i++ {
		_, _, err := producer.SendMessage(&sarama.ProducerMessage{
			Topic: topic,
			Key:   sarama.StringEncoder(fmt.Sprintf("key-%d", i%5)),
			Value: sarama.StringEncoder(fmt.Sprintf(`{"id":"%d"}`, i)),
		})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if err := producer.Close(); err != nil {
		t.Fatalf("close producer: %v", err)
	}

	consumer, err := sarama.NewConsumerGroup(brokers, group, cfg)
	if err != nil {
		t.Fatalf("consumer group: %v", err)
	}
	defer consumer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := &countingHandler{want: n, seen: map[string]bool{}, done: cancel}
	for ctx.Err() == nil {
		if err := consumer.Consume(ctx, []string{topic}, h); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
			t.Fatalf("consume: %v", err)
		}
	}
	if got := len(h.seen); got != n {
		t.Fatalf("consumed %d distinct records, want %d", got, n)
	}
}

type countingHandler struct {
	want int
	done context.CancelFunc

	mu   sync.Mutex // ConsumeClaim runs once per partition, concurrently
	seen map[string]bool
}

func (h *countingHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *countingHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *countingHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		h.mu.Lock()
		h.seen[string(msg.Value)] = true
		if len(h.seen) == h.want {
			h.done()
		}
		h.mu.Unlock()
		s.MarkMessage(msg, "")
	}
	return nil
}

// TestCassandraRoundTrip proves the node on localhost:9042 is a real
// Cassandra: a keyspace and a table are created and a row with a TTL is
// written and read back.
func TestCassandraRoundTrip(t *testing.T) {
	nodes := RequireCassandra(t)
	keyspace := UniqueName("smoke")

	cluster := gocql.NewCluster(nodes...)
	cluster.Timeout = 10 * time.Second
	cluster.Consistency = gocql.One
	session, err := cluster.CreateSession()
	if err != nil {
		t.Fatalf("session: %v", err)
	}
	defer session.Close()

	if err := session.Query(`CREATE KEYSPACE ` + keyspace +
		` WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`).Exec(); err != nil {
		t.Fatalf("create keyspace: %v", err)
	}
	defer func() {
		if err := session.Query(`DROP KEYSPACE ` + keyspace).Exec(); err != nil {
			t.Errorf("drop keyspace: %v", err)
		}
	}()
	if err := session.Query(`CREATE TABLE ` + keyspace + `.kv (k text PRIMARY KEY, v blob)`).Exec(); err != nil {
		t.Fatalf("create table: %v", err)
	}
	if err := session.Query(`INSERT INTO `+keyspace+`.kv (k, v) VALUES (?, ?) USING TTL 600`,
		"greeting", []byte("hello")).Exec(); err != nil {
		t.Fatalf("insert: %v", err)
	}
	var v []byte
	var ttl int
	if err := session.Query(`SELECT v, TTL(v) FROM `+keyspace+`.kv WHERE k = ?`, "greeting").Scan(&v, &ttl); err != nil {
		t.Fatalf("select: %v", err)
	}
	if string(v) != "hello" || ttl <= 0 || ttl > 600 {
		t.Fatalf("read back v=%q ttl=%d, want \"hello\" with 0 < ttl <= 600", v, ttl)
	}
}
