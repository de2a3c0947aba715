package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/kafkatest"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/mockbroker"
)

const dlqTraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// rawRecord is a record the tests write with a plain sarama producer, so
// that keys and values can be anything (no key, bytes that are not UTF-8,
// a null value, a value that is not JSON).
type rawRecord struct {
	key, value []byte
}

// TestLowLatencyDeadLetters: in low-latency mode every message whose
// retries are spent, or that failed permanently, and every undecodable
// record is written to the failure topic exactly once, with its key and
// payload unchanged and the source-* headers of spec §4.13 in order; the
// source partitions' committed offsets pass every record; and the keys
// that succeed are handled meanwhile.
func TestLowLatencyDeadLetters(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			source := createTopic(t, tg, 3)
			failures := createTopic(t, tg, 1)
			group := testservices.UniqueName("dlq")
			var handled atomic.Int64
			c := newClient(t, newConfig(t, tg, func(c *config.Config) {
				c.Mode = config.ModeLowLatency
				c.GroupID = group
				c.SubscribedTopics = []string{source}
				c.FailureTopic = failures
				c.MaxRetries = 2
			}))
			err := c.Subscribe(event.HandlerFuncs{Message: func(_ *event.Context, m *event.Message) error {
				switch {
				case strings.HasPrefix(m.Key, "bad-"):
					return errors.New("bad key " + m.Key)
				case strings.HasPrefix(m.Key, "perm-"):
					return fault.Permanent(errors.New("refused " + m.Key))
				}
				handled.Add(1)
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			var records []rawRecord
			for i := 0; i < 30; i++ {
				records = append(records, rawRecord{[]byte(fmt.Sprintf("good-%d", i)), []byte(fmt.Sprintf(`{"id":"g%d","n":%d}`, i, i))})
				if i%3 == 0 {
					records = append(records, rawRecord{[]byte(fmt.Sprintf("bad-%d", i)), []byte(fmt.Sprintf(`{"id":"b%d","n":%d}`, i, i))})
				}
				if i%6 == 0 {
					records = append(records, rawRecord{[]byte(fmt.Sprintf("perm-%d", i)), []byte(fmt.Sprintf(`{"id":"p%d"}`, i))})
				}
			}
			undecodable := []rawRecord{
				{[]byte("raw-not-json"), []byte("not json")},
				{[]byte("raw-tombstone"), nil},
				{nil, []byte(`{"id":"nokey"}`)},
				{[]byte{0xff, 0xfe, 'k'}, []byte(`{"id":"latin"}`)},
			}
			records = append(records, undecodable...)
			produceRaw(t, tg, source, records)
			wantLetters := 10 + 5 + len(undecodable)

			waitFor(t, 2*time.Minute, "every good message handled and every failure dead-lettered and committed", func() bool {
				return handled.Load() == 30 && len(readTopic(t, tg, failures)) == wantLetters &&
					committedAll(t, tg, group, source)
			})
			originals := map[string]*sarama.ConsumerMessage{}
			for _, m := range readTopic(t, tg, source) {
				originals[fmt.Sprintf("%d/%d", m.Partition, m.Offset)] = m
			}
			seen := map[string]int{}
			for _, dl := range readTopic(t, tg, failures) {
				h := headerMap(dl.Headers)
				where := string(h["source-partition"]) + "/" + string(h["source-offset"])
				seen[where]++
				orig := originals[where]
				if orig == nil {
					t.Fatalf("dead letter for %s: no such source record", where)
				}
				checkDeadLetter(t, dl, orig, source, group)
			}
			if len(seen) != wantLetters {
				t.Fatalf("%d records dead-lettered, want %d", len(seen), wantLetters)
			}
			for where, n := range seen {
				if n != 1 {
					t.Errorf("source record %s dead-lettered %d times", where, n)
				}
			}
		})
	}
}

// checkDeadLetter compares a dead letter with its source record byte for
// byte: key (or its absence), value, the trace context, source-system and
// the source-* headers in their order, and no other header of the source.
func checkDeadLetter(t *testing.T, dl, orig *sarama.ConsumerMessage, source, group string) {
	t.Helper()
	where := fmt.Sprintf("dead letter of %d/%d", orig.Partition, orig.Offset)
	if !bytes.Equal(dl.Key, orig.Key) || (dl.Key == nil) != (orig.Key == nil) {
		t.Errorf("%s: key %q (nil %v), want %q (nil %v)", where, dl.Key, dl.Key == nil, orig.Key, orig.Key == nil)
	}
	if !bytes.Equal(dl.Value, orig.Value) || (dl.Value == nil) != (orig.Value == nil) {
		t.Errorf("%s: value %q, want %q", where, dl.Value, orig.Value)
	}
	var names []string
	for _, h := range dl.Headers {
		names = append(names, string(h.Key))
	}
	want := "traceparent tracestate source-system source-kind source-topic source-partition source-offset source-timestamp source-group-id source-error"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("%s: headers %q, want %q", where, got, want)
	}
	h := headerMap(dl.Headers)
	for name, value := range map[string]string{
		"traceparent":      dlqTraceParent,
		"source-system":    group,
		"source-kind":      "message",
		"source-topic":     source,
		"source-partition": strconv.Itoa(int(orig.Partition)),
		"source-offset":    strconv.FormatInt(orig.Offset, 10),
		"source-timestamp": orig.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z"),
		"source-group-id":  group,
	} {
		if string(h[name]) != value {
			t.Errorf("%s: %s = %q, want %q", where, name, h[name], value)
		}
	}
	errText := string(h["source-error"])
	key := string(orig.Key)
	switch {
	case strings.HasPrefix(key, "bad-"):
		if !strings.Contains(errText, "bad key "+key) {
			t.Errorf("%s: source-error %q, want the handler's error", where, errText)
		}
	case strings.HasPrefix(key, "perm-"):
		if !strings.Contains(errText, "refused "+key) {
			t.Errorf("%s: source-error %q, want the handler's error", where, errText)
		}
	default:
		if errText == "" {
			t.Errorf("%s: no source-error for an undecodable record", where)
		}
	}
}

// TestDeadLetterNotCommittedBeforeItIsWritten: while the failure topic
// refuses the dead letter (its max.message.bytes is below the record's
// size, so the broker rejects every write, and the producer calls that
// permanent), the failed message stays uncommitted: the source partition's
// committed offset stops at it, though later keys are handled. Once the
// topic accepts the record, it is written, and the offsets move on.
func TestDeadLetterNotCommittedBeforeItIsWritten(t *testing.T) {
	addrs := testservices.RequireKafka(t)
	tg := target{"kafka", false}
	source := createTopic(t, tg, 1)
	failures := testservices.UniqueName("failures")
	adm := clusterAdmin(t, addrs)
	if err := adm.CreateTopic(failures, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"max.message.bytes": ptr("100")}}, false); err != nil {
		t.Fatal(err)
	}
	// The broker answers CreateTopic before every metadata view lists the
	// topic; subscribe checks that the failure topic exists.
	waitFor(t, time.Minute, "the failure topic in the broker's metadata", func() bool {
		topics, err := adm.ListTopics()
		_, ok := topics[failures]
		return err == nil && ok
	})
	group := testservices.UniqueName("dlq-refused")
	handled, logs := subscribeFailingBad(t, tg, group, source, failures)
	// Offsets 0-4 good, 5 bad, 6-19 good on other keys.
	var records []rawRecord
	for i := 0; i < 20; i++ {
		key := fmt.Sprintf("good-%d", i)
		if i == 5 {
			key = "bad"
		}
		records = append(records, rawRecord{[]byte(key), []byte(fmt.Sprintf(`{"n":%d}`, i))})
	}
	produceRaw(t, tg, source, records)
	waitFor(t, time.Minute, "the later keys handled and the offset committed up to the failed message", func() bool {
		return handled.Load() == 19 && committed(t, adm, group, source) == 5
	})
	before := logs.count()
	waitFor(t, time.Minute, "three more refused dead-letter writes", func() bool { return logs.count() >= before+3 })
	if got := committed(t, adm, group, source); got != 5 {
		t.Fatalf("committed offset %d while the dead letter of offset 5 is unwritten, want 5", got)
	}
	if n := len(readTopic(t, tg, failures)); n != 0 {
		t.Fatalf("%d records in the failure topic while it refuses them", n)
	}
	if err := adm.AlterConfig(sarama.TopicResource, failures, map[string]*string{"max.message.bytes": ptr("1048588")}, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the dead letter written and everything committed", func() bool {
		return len(readTopic(t, tg, failures)) == 1 && committed(t, adm, group, source) == 20
	})
	dl := readTopic(t, tg, failures)[0]
	if string(dl.Key) != "bad" || string(headerMap(dl.Headers)["source-offset"]) != "5" {
		t.Fatalf("unexpected dead letter key %q offset %s", dl.Key, headerMap(dl.Headers)["source-offset"])
	}
}

func ptr(s string) *string { return &s }

// subscribeFailingBad subscribes a low-latency consumer of source (one
// attempt per message) whose handler fails every message with a key
// starting "bad" and counts the others; logs counts its failed dead-letter
// writes.
func subscribeFailingBad(t *testing.T, tg target, group, source, failures string) (handled *atomic.Int64, logs *writeFailures) {
	t.Helper()
	handled, logs = new(atomic.Int64), &writeFailures{}
	cfg := newConfig(t, tg, func(c *config.Config) {
		c.Mode = config.ModeLowLatency
		c.GroupID = group
		c.SubscribedTopics = []string{source}
		c.FailureTopic = failures
		c.MaxRetries = 0
	})
	c, err := New(cfg, WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeClient(t, c) })
	if err := c.Subscribe(event.HandlerFuncs{Message: func(_ *event.Context, m *event.Message) error {
		if strings.HasPrefix(m.Key, "bad") {
			return errors.New("always fails")
		}
		handled.Add(1)
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	return handled, logs
}

// writeFailures is a log handler counting failed dead-letter writes.
type writeFailures struct{ n atomic.Int64 }

func (w *writeFailures) Enabled(context.Context, slog.Level) bool { return true }
func (w *writeFailures) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *writeFailures) WithGroup(string) slog.Handler            { return w }
func (w *writeFailures) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "writing the dead letter failed") {
		w.n.Add(1)
	}
	return nil
}
func (w *writeFailures) count() int64 { return w.n.Load() }

func brokerAddrs(t *testing.T, tg target) []string {
	t.Helper()
	if !tg.mock {
		return testservices.KafkaAddrs()
	}
	cluster, err := mockbroker.Shared()
	if err != nil {
		t.Fatal(err)
	}
	return cluster.Addrs()
}

func saramaTestConfig() *sarama.Config { return kafkatest.SaramaConfig() }

// produceRaw writes records as they are, each with a traceparent and a
// header of the application's own, round robin over the partitions.
func produceRaw(t *testing.T, tg target, topic string, records []rawRecord) {
	t.Helper()
	p, err := sarama.NewSyncProducer(brokerAddrs(t, tg), saramaTestConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, r := range records {
		msg := &sarama.ProducerMessage{Topic: topic, Headers: []sarama.RecordHeader{
			{Key: []byte("traceparent"), Value: []byte(dlqTraceParent)},
			{Key: []byte("x-app"), Value: []byte("not copied")},
		}}
		if r.key != nil {
			msg.Key = sarama.ByteEncoder(r.key)
		}
		if r.value != nil {
			msg.Value = sarama.ByteEncoder(r.value)
		}
		if _, _, err := p.SendMessage(msg); err != nil {
			t.Fatal(err)
		}
	}
}

// rawClient is a sarama client for the tests' own reads; close it.
func rawClient(t *testing.T, tg target) sarama.Client {
	t.Helper()
	client, err := sarama.NewClient(brokerAddrs(t, tg), saramaTestConfig())
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func highWaterMarks(t *testing.T, client sarama.Client, topic string) map[int32]int64 {
	return kafkatest.HighWaterMarks(t, client, topic)
}

// readTopic reads every record of topic up to its high-water marks
// (nothing when the topic does not exist).
func readTopic(t *testing.T, tg target, topic string) []*sarama.ConsumerMessage {
	t.Helper()
	return kafkatest.ReadTopic(t, brokerAddrs(t, tg), topic)
}

// committedAll reports whether group has committed every partition of
// topic up to its high-water mark.
func committedAll(t *testing.T, tg target, group, topic string) bool {
	t.Helper()
	client := rawClient(t, tg)
	defer client.Close()
	adm, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	hwms := highWaterMarks(t, client, topic)
	if len(hwms) == 0 {
		return false
	}
	parts := make([]int32, 0, len(hwms))
	for p := range hwms {
		parts = append(parts, p)
	}
	offsets, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{topic: parts})
	if err != nil {
		return false
	}
	for p, hwm := range hwms {
		b := offsets.GetBlock(topic, p)
		if hwm > 0 && (b == nil || b.Offset != hwm) {
			return false
		}
	}
	return true
}

// committed is group's committed offset of partition 0 of topic (-1: none).
func committed(t *testing.T, adm sarama.ClusterAdmin, group, topic string) int64 {
	t.Helper()
	offsets, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0}})
	if err != nil {
		return -1
	}
	if b := offsets.GetBlock(topic, 0); b != nil {
		return b.Offset
	}
	return -1
}

func clusterAdmin(t *testing.T, addrs []string) sarama.ClusterAdmin {
	t.Helper()
	adm, err := sarama.NewClusterAdmin(addrs, saramaTestConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { adm.Close() })
	return adm
}

func headerMap(hs []*sarama.RecordHeader) map[string][]byte {
	m := map[string][]byte{}
	for _, h := range hs {
		if _, ok := m[string(h.Key)]; !ok {
			m[string(h.Key)] = h.Value
		}
	}
	return m
}

// TestDeadLetterWhileTheFailureTopicIsRecreated: the failure topic is
// deleted while failing messages arrive (the broker creates it again on
// the producer's next metadata request, this test broker allowing it):
// every failed message ends up in the new topic, and at no moment is the
// source partition's offset committed past a failed message whose dead
// letter is not in the failure topic. (sarama's own retries usually absorb
// the gap, so the layer may see no failed write here; the refusal test
// above is the one where it does.)
func TestDeadLetterWhileTheFailureTopicIsRecreated(t *testing.T) {
	addrs := testservices.RequireKafka(t)
	tg := target{"kafka", false}
	source := createTopic(t, tg, 1)
	failures := createTopic(t, tg, 1)
	adm := clusterAdmin(t, addrs)
	group := testservices.UniqueName("dlq-recreated")
	handled, logs := subscribeFailingBad(t, tg, group, source, failures)
	// A first dead letter, so that the producer knows the topic's leader.
	produceRaw(t, tg, source, []rawRecord{{[]byte("bad-first"), []byte(`{"n":0}`)}})
	waitFor(t, time.Minute, "the first dead letter", func() bool { return len(readTopic(t, tg, failures)) == 1 })
	if err := adm.DeleteTopic(failures); err != nil {
		t.Fatal(err)
	}

	// Watch the invariant while the rest is handled.
	stop := make(chan struct{})
	violations := make(chan string, 1)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			// Committed first: a dead letter is written before its
			// offset is committed, so one read afterwards must show it.
			done := committed(t, adm, group, source)
			letters := map[string]bool{}
			for _, dl := range readTopic(t, tg, failures) {
				letters[string(headerMap(dl.Headers)["source-offset"])] = true
			}
			for o := int64(1); o < done; o++ {
				if o%2 == 1 && !letters[strconv.FormatInt(o, 10)] {
					select {
					case violations <- fmt.Sprintf("offset %d committed (up to %d) with its dead letter not in the failure topic", o, done):
					default:
					}
				}
			}
		}
	}()
	// Offsets 1..20: odd ones fail.
	var records []rawRecord
	for i := 1; i <= 20; i++ {
		key := fmt.Sprintf("good-%d", i)
		if i%2 == 1 {
			key = fmt.Sprintf("bad-%d", i)
		}
		records = append(records, rawRecord{[]byte(key), []byte(fmt.Sprintf(`{"n":%d}`, i))})
	}
	produceRaw(t, tg, source, records)
	waitFor(t, 2*time.Minute, "every message handled or dead-lettered, and committed", func() bool {
		return handled.Load() == 10 && committed(t, adm, group, source) == 21
	})
	close(stop)
	<-watched
	select {
	case v := <-violations:
		t.Fatal(v)
	default:
	}
	seen := map[string]int{}
	for _, dl := range readTopic(t, tg, failures) {
		seen[string(headerMap(dl.Headers)["source-offset"])]++
	}
	for o := 1; o <= 20; o += 2 {
		if seen[strconv.Itoa(o)] == 0 {
			t.Errorf("offset %d has no dead letter in the recreated failure topic", o)
		}
	}
	t.Logf("dead-letter writes that failed and were retried: %d; dead letters per offset: %v", logs.count(), seen)
}
