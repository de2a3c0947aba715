package testservices

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
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

// TestJaegerRoundTrip proves the Jaeger on localhost:4318/16686 stores what
// it is sent: one span is posted as OTLP/JSON under a service name of its
// own and read back through the query API.
func TestJaegerRoundTrip(t *testing.T) {
	RequireJaeger(t)
	service := UniqueName("smoke")
	var ids [24]byte
	if _, err := rand.Read(ids[:]); err != nil {
		t.Fatal(err)
	}
	traceID, spanID := hex.EncodeToString(ids[:16]), hex.EncodeToString(ids[16:])
	end := time.Now()
	start := end.Add(-5 * time.Millisecond)

	// Its own transport, closed at the end, so no keep-alive connection
	// outlives the test (TestMain checks for leaked goroutines).
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	client := &http.Client{Transport: transport, Timeout: 10 * time.Second}

	export := fmt.Sprintf(`{"resourceSpans":[{
		"resource":{"attributes":[{"key":"service.name","value":{"stringValue":%q}}]},
		"scopeSpans":[{"scope":{"name":"prosody-smoke"},"spans":[{
			"traceId":%q,"spanId":%q,"name":"smoke-span","kind":1,
			"startTimeUnixNano":"%d","endTimeUnixNano":"%d",
			"attributes":[{"key":"smoke.attempt","value":{"intValue":"1"}}]}]}]}]}`,
		service, traceID, spanID, start.UnixNano(), end.UnixNano())
	resp, err := client.Post(JaegerOTLPEndpoint()+"/v1/traces", "application/json", strings.NewReader(export))
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("export: %s: %s", resp.Status, body)
	}

	// What /api/traces answers, reduced to what is checked.
	type result struct {
		Data []struct {
			TraceID string `json:"traceID"`
			Spans   []struct {
				SpanID        string `json:"spanID"`
				OperationName string `json:"operationName"`
				ProcessID     string `json:"processID"`
				Tags          []struct {
					Key   string `json:"key"`
					Value any    `json:"value"`
				} `json:"tags"`
			} `json:"spans"`
			Processes map[string]struct {
				ServiceName string `json:"serviceName"`
			} `json:"processes"`
		} `json:"data"`
	}
	query := JaegerQueryURL() + "/api/traces?service=" + url.QueryEscape(service)
	var got result
	var last string
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(query)
		if err != nil {
			last = err.Error()
		} else {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got = result{}
			// Until the trace is stored the service is unknown: 200 with no
			// data, or an error status, depending on the storage.
			if resp.StatusCode != http.StatusOK {
				last = resp.Status + ": " + string(body)
			} else if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("GET %s: not Jaeger's JSON: %v: %s", query, err, body)
			} else if len(got.Data) > 0 {
				break
			} else {
				last = "no trace yet: " + string(body)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the span posted to %s never appeared at %s within 30s (last answer: %s)",
				JaegerOTLPEndpoint(), query, last)
		}
		time.Sleep(100 * time.Millisecond)
	}

	if len(got.Data) != 1 {
		t.Fatalf("got %d traces for service %s, want 1", len(got.Data), service)
	}
	tr := got.Data[0]
	if tr.TraceID != traceID || len(tr.Spans) != 1 {
		t.Fatalf("got trace %s with %d span(s), want trace %s with 1", tr.TraceID, len(tr.Spans), traceID)
	}
	sp := tr.Spans[0]
	if sp.SpanID != spanID || sp.OperationName != "smoke-span" {
		t.Fatalf("got span %s %q, want %s \"smoke-span\"", sp.SpanID, sp.OperationName, spanID)
	}
	if p := tr.Processes[sp.ProcessID].ServiceName; p != service {
		t.Fatalf("span's service is %q, want %q", p, service)
	}
	found := false
	for _, tag := range sp.Tags {
		if tag.Key == "smoke.attempt" && fmt.Sprint(tag.Value) == "1" {
			found = true
		}
	}
	if !found {
		t.Fatalf("span tags %+v lack smoke.attempt=1", sp.Tags)
	}
}
