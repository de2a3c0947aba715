package producer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/payload"
)

// Each scenario sends a sequence and checks, by reading the topic back,
// which sends were written.
func TestSendIDCache(t *testing.T) {
	type send struct {
		topic   int // index into the scenario's topics
		key     string
		payload string
		skipped bool
	}
	tests := []struct {
		name      string
		cacheSize int
		sends     []send
	}{
		{
			name:      "repeat after a send without id is dropped",
			cacheSize: 16,
			sends: []send{
				{0, "k", `{"id":"X","n":"A"}`, false},
				{0, "k", `{"n":"B"}`, false},
				{0, "k", `{"id":"X","n":"C"}`, true},
			},
		},
		{
			name:      "set semantics across other ids",
			cacheSize: 16,
			sends: []send{
				{0, "k", `{"id":"1","n":"A"}`, false},
				{0, "k", `{"id":"2","n":"B"}`, false},
				{0, "k", `{"id":"1","n":"C"}`, true},
			},
		},
		{
			name:      "different key or topic is sent",
			cacheSize: 16,
			sends: []send{
				{0, "k", `{"id":"X","n":"A"}`, false},
				{0, "other", `{"id":"X","n":"B"}`, false},
				{1, "k", `{"id":"X","n":"C"}`, false},
			},
		},
		{
			name:      "payloads without a string id bypass the cache",
			cacheSize: 16,
			sends: []send{
				{0, "k", `{"n":"A"}`, false},
				{0, "k", `{"n":"A"}`, false},
				{0, "k", `{"id":5,"n":"B"}`, false},
				{0, "k", `{"id":5,"n":"B"}`, false},
			},
		},
		{
			name:      "size zero disables the cache",
			cacheSize: 0,
			sends: []send{
				{0, "k", `{"id":"X","n":"A"}`, false},
				{0, "k", `{"n":"B"}`, false},
				{0, "k", `{"id":"X","n":"C"}`, false},
			},
		},
		{
			name:      "evicted ids are sent again",
			cacheSize: 1,
			sends: []send{
				{0, "k", `{"id":"1","n":"A"}`, false},
				{0, "k", `{"id":"2","n":"B"}`, false},
				{0, "k", `{"id":"1","n":"C"}`, false},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newMockProducer(t, func(o *Options) { o.IdempotenceCacheSize = tt.cacheSize })
			t0, addrs := mockTopic(t, 3)
			t1, _ := mockTopic(t, 3)
			topics := []string{t0, t1}

			want := map[string][]string{}
			for i, s := range tt.sends {
				d := sendOK(t, p, topics[s.topic], s.key, s.payload)
				if d.Skipped != s.skipped {
					t.Errorf("send %d: Skipped = %v, want %v", i, d.Skipped, s.skipped)
				}
				if d.Skipped {
					if d.Partition != -1 || d.Offset != -1 {
						t.Errorf("send %d: skipped delivery at %d/%d", i, d.Partition, d.Offset)
					}
					continue
				}
				want[topics[s.topic]] = append(want[topics[s.topic]], s.payload)
			}
			for _, topic := range topics {
				got := readTopic(t, addrs, topic)
				if g, w := strings.Join(values(got), " "), strings.Join(sorted(want[topic]), " "); g != w {
					t.Errorf("topic %d holds %s, want %s", topic2i(topics, topic), g, w)
				}
			}
		})
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

func topic2i(topics []string, topic string) int {
	for i, t := range topics {
		if t == topic {
			return i
		}
	}
	return -1
}

func TestSendRecordShape(t *testing.T) {
	p := newMockProducer(t, func(o *Options) { o.SourceSystem = "billing" })
	topic, addrs := mockTopic(t, 4)

	before := time.Now().Truncate(time.Millisecond)
	headers := []Header{
		{Key: "traceparent", Value: []byte("00-abc-def-01")},
		{Key: "source-system", Value: []byte("caller-supplied")},
		{Key: "x-empty", Value: nil},
	}
	d := sendOK(t, p, topic, "key-1", `{"id":"e1"}`, headers...)
	after := time.Now()

	msgs := readTopic(t, addrs, topic)
	if len(msgs) != 1 {
		t.Fatalf("read %d records, want 1", len(msgs))
	}
	m := msgs[0]
	if m.Partition != d.Partition || m.Offset != d.Offset {
		t.Errorf("record at %d/%d, Send reported %d/%d", m.Partition, m.Offset, d.Partition, d.Offset)
	}
	if want := PartitionForKey([]byte("key-1"), 4); m.Partition != want {
		t.Errorf("partition %d, want crc32 partition %d", m.Partition, want)
	}
	if string(m.Key) != "key-1" || string(m.Value) != `{"id":"e1"}` {
		t.Errorf("key %q value %q", m.Key, m.Value)
	}
	if m.Timestamp.Before(before) || m.Timestamp.After(after) {
		t.Errorf("timestamp %v not within [%v, %v]", m.Timestamp, before, after)
	}

	wantHeaders := []string{"source-system=billing", "traceparent=00-abc-def-01", "source-system=caller-supplied", "x-empty="}
	var got []string
	for _, h := range m.Headers {
		got = append(got, string(h.Key)+"="+string(h.Value))
	}
	if strings.Join(got, ",") != strings.Join(wantHeaders, ",") {
		t.Errorf("headers %v, want %v", got, wantHeaders)
	}
}

// An empty key is written as an empty key, not a null one, and spreads
// over partitions.
func TestSendEmptyKey(t *testing.T) {
	p := newMockProducer(t, nil)
	topic, addrs := mockTopic(t, 4)
	for i := range 40 {
		sendOK(t, p, topic, "", fmt.Sprintf(`{"n":%d}`, i))
	}
	msgs := readTopic(t, addrs, topic)
	partitions := map[int32]bool{}
	for _, m := range msgs {
		if m.Key == nil {
			t.Fatal("empty key came back null")
		}
		partitions[m.Partition] = true
	}
	if len(msgs) != 40 || len(partitions) < 2 {
		t.Errorf("%d records over partitions %v", len(msgs), partitions)
	}
}

// Sequential sends to one key land on one partition, in order.
func TestSendOrderingPerKey(t *testing.T) {
	p := newMockProducer(t, nil)
	topic, addrs := mockTopic(t, 8)
	const n = 1000
	last := int64(-1)
	for i := range n {
		d := sendOK(t, p, topic, "the-key", fmt.Sprintf(`{"id":"%d"}`, i))
		if d.Offset <= last {
			t.Fatalf("send %d at offset %d after %d", i, d.Offset, last)
		}
		last = d.Offset
	}
	msgs := readTopic(t, addrs, topic)
	if len(msgs) != n {
		t.Fatalf("read %d records, want %d", len(msgs), n)
	}
	want := PartitionForKey([]byte("the-key"), 8)
	for i, m := range msgs {
		if m.Partition != want || string(m.Value) != fmt.Sprintf(`{"id":"%d"}`, i) {
			t.Fatalf("record %d: partition %d value %s", i, m.Partition, m.Value)
		}
	}
}

// Concurrent senders each get their own delivery report.
func TestSendConcurrentReportsMatch(t *testing.T) {
	p := newMockProducer(t, nil)
	topic, addrs := mockTopic(t, 8)
	const workers, each = 16, 50
	type rec struct {
		d       Delivery
		payload string
	}
	var mu sync.Mutex
	var recs []rec
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				payload := fmt.Sprintf(`{"id":"w%d-%d"}`, w, i)
				d, err := p.Send(context.Background(), topic, fmt.Sprintf("k%d", i%7), []byte(payload))
				if err != nil {
					t.Errorf("send: %v", err)
					return
				}
				mu.Lock()
				recs = append(recs, rec{d, payload})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	at := map[[2]int64]string{}
	for _, m := range readTopic(t, addrs, topic) {
		at[[2]int64{int64(m.Partition), m.Offset}] = string(m.Value)
	}
	if len(at) != workers*each {
		t.Fatalf("topic holds %d records, want %d", len(at), workers*each)
	}
	for _, r := range recs {
		if got := at[[2]int64{int64(r.d.Partition), r.d.Offset}]; got != r.payload {
			t.Fatalf("Send of %s reported %d/%d, which holds %s", r.payload, r.d.Partition, r.d.Offset, got)
		}
	}
}

// With nothing listening, Send gives up after SendTimeout with a transient
// error, and Close still returns promptly.
func TestSendTimeoutWhenUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // now nothing listens there

	p, err := New(Options{Brokers: []string{addr}, SourceSystem: "s", SendTimeout: 300 * time.Millisecond, IdempotenceCacheSize: 8})
	if err != nil {
		t.Fatalf("New must not need a reachable broker: %v", err)
	}
	start := time.Now()
	_, err = p.Send(context.Background(), "t", "k", []byte(`{"id":"x"}`))
	elapsed := time.Since(start)
	if !errors.Is(err, ErrSendTimeout) || fault.ClassOf(err) != fault.ClassTransient {
		t.Errorf("Send error %v (class %v), want a transient ErrSendTimeout", err, fault.ClassOf(err))
	}
	if elapsed > 5*time.Second {
		t.Errorf("Send took %s with a 300ms timeout", elapsed)
	}
	t.Log(err)

	// The caller's context bounds the send as well.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := p.Send(ctx, "t", "k", []byte(`{}`)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Send with an expiring context: %v", err)
	}

	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := p.Send(context.Background(), "t", "k", []byte(`{}`)); !errors.Is(err, ErrClosed) || fault.ClassOf(err) != fault.ClassTerminal {
		t.Errorf("Send after Close = %v (class %v), want terminal ErrClosed", err, fault.ClassOf(err))
	}
}

func TestSendRespectsCancelledContext(t *testing.T) {
	p := newMockProducer(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Send(ctx, "t", "k", []byte(`{}`)); !errors.Is(err, context.Canceled) {
		t.Errorf("Send with a cancelled context: %v", err)
	}
}

func TestSendRejectsBadRecords(t *testing.T) {
	p := newMockProducer(t, nil)
	maxBytes := sarama.NewConfig().Producer.MaxMessageBytes
	tests := []struct {
		name    string
		topic   string
		payload []byte
		wantErr error
	}{
		{"empty topic", "", []byte(`{}`), nil},
		{"too large", "t", []byte(`"` + strings.Repeat("x", maxBytes) + `"`), sarama.ErrMessageSizeTooLarge},
		{"too large and not JSON", "t", bytes.Repeat([]byte("x"), maxBytes+1), payload.ErrInvalid},
		{"nil payload", "t", nil, payload.ErrNull},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.Send(context.Background(), tt.topic, "k", tt.payload)
			if err == nil || fault.ClassOf(err) != fault.ClassPermanent {
				t.Fatalf("Send = %v (class %v), want a permanent error", err, fault.ClassOf(err))
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v does not wrap %v", err, tt.wantErr)
			}
		})
	}
}

// The id the cache keys on is the top-level "id" when it is a JSON string,
// decoded; payload.Meta's rules decide. Each payload is sent twice on its
// own key: the repeat is skipped exactly when the payload has an id. When it
// has one, a minimal payload carrying the expected id is skipped too (the id
// was decoded as expected) and one carrying notID is not.
func TestSendIDExtraction(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		id      string
		hasID   bool
		notID   string
	}{
		{"simple", `{"id":"abc"}`, "abc", true, "ABC"},
		{"spaces", " \n{ \"id\" :\t\"abc\" } ", "abc", true, " abc"},
		{"after other fields", `{"type":"x","n":1.5e3,"ok":true,"z":null,"id":"42"}`, "42", true, "x"},
		{"nested objects skipped", `{"a":{"id":"inner","b":[1,{"id":"deep"}]},"id":"outer"}`, "outer", true, "inner"},
		{"only nested id", `{"a":{"id":"inner"}}`, "", false, ""},
		{"brackets in strings", `{"a":"}]{[\"","b":["}"],"id":"x"}`, "x", true, ""},
		{"escaped id value", `{"id":"a\"b\\c\u00e9\n"}`, "a\"b\\c\u00e9\n", true, `a\"b\\c\u00e9\n`},
		{"escaped key", `{"\u0069d":"x"}`, "x", true, ""},
		{"empty id", `{"id":""}`, "", true, ""},
		{"unicode id", `{"id":"日本"}`, "日本", true, ""},
		{"numeric id", `{"id":42}`, "", false, ""},
		{"object id", `{"id":{"v":"x"}}`, "", false, ""},
		{"null id", `{"id":null}`, "", false, ""},
		{"array id", `{"id":["x"]}`, "", false, ""},
		{"case matters", `{"ID":"x","Id":"y"}`, "", false, ""},
		{"last wins", `{"id":"first","id":"second"}`, "second", true, "first"},
		{"later non-string wins", `{"id":"first","id":7}`, "", false, ""},
		{"later string wins", `{"id":7,"id":"second"}`, "second", true, ""},
		{"no id", `{"type":"x"}`, "", false, ""},
		{"empty object", `{}`, "", false, ""},
		{"array payload", `[{"id":"x"}]`, "", false, ""},
		{"string payload", `"id"`, "", false, ""},
		{"number payload", `17`, "", false, ""},
	}
	p := newMockProducer(t, nil)
	topic, _ := mockTopic(t, 3)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := tt.name
			if d := sendOK(t, p, topic, key, tt.payload); d.Skipped {
				t.Fatal("first send skipped")
			}
			if d := sendOK(t, p, topic, key, tt.payload); d.Skipped != tt.hasID {
				t.Fatalf("repeat: Skipped = %v, want %v", d.Skipped, tt.hasID)
			}
			if !tt.hasID {
				return
			}
			if d := sendOK(t, p, topic, key, idJSON(t, tt.id)); !d.Skipped {
				t.Errorf("payload with id %q was not skipped", tt.id)
			}
			if tt.notID != "" {
				if d := sendOK(t, p, topic, key, idJSON(t, tt.notID)); d.Skipped {
					t.Errorf("payload with id %q was skipped", tt.notID)
				}
			}
		})
	}
}

func idJSON(t *testing.T, id string) string {
	t.Helper()
	b, err := json.Marshal(map[string]string{"id": id})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A payload that is not exactly one JSON document fails before anything is
// sent, with a permanent error naming the argument, whether or not the id
// cache is on; an id in front of the fault does not make it a cache hit.
func TestSendRejectsInvalidPayload(t *testing.T) {
	tests := []struct {
		name    string
		payload []byte
		wantErr error
	}{
		{"nil", nil, payload.ErrNull},
		{"empty", []byte{}, payload.ErrInvalid},
		{"spaces only", []byte(" \n"), payload.ErrInvalid},
		{"truncated", []byte(`{"id":"x`), payload.ErrInvalid},
		{"truncated after id", []byte(`{"id":"x",`), payload.ErrInvalid},
		{"missing colon", []byte(`{"id" "x"}`), payload.ErrInvalid},
		{"trailing backslash", []byte(`{"id":"x\`), payload.ErrInvalid},
		{"trailing data", []byte(`{"id":"x"}x`), payload.ErrInvalid},
		{"two documents", []byte(`{"id":"x"} {"id":"x"}`), payload.ErrInvalid},
		{"invalid utf-8", []byte("{\"id\":\"x\xff\"}"), payload.ErrInvalid},
		{"bare word", []byte(`hello`), payload.ErrInvalid},
		{"single quotes", []byte(`{'id':'x'}`), payload.ErrInvalid},
		{"trailing comma", []byte(`{"id":"x",}`), payload.ErrInvalid},
	}
	for _, cacheSize := range []int{0, 64} {
		t.Run(fmt.Sprintf("cache %d", cacheSize), func(t *testing.T) {
			p := newMockProducer(t, func(o *Options) { o.IdempotenceCacheSize = cacheSize })
			topic, addrs := mockTopic(t, 2)
			sendOK(t, p, topic, "k", `{"id":"x"}`)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					d, err := p.Send(context.Background(), topic, "k", tt.payload)
					if err == nil {
						t.Fatalf("Send succeeded: %+v", d)
					}
					if fault.ClassOf(err) != fault.ClassPermanent || !errors.Is(err, tt.wantErr) {
						t.Errorf("Send = %v (class %v), want a permanent error wrapping %v", err, fault.ClassOf(err), tt.wantErr)
					}
					if !strings.Contains(err.Error(), "payload: ") {
						t.Errorf("error %q does not name the payload argument", err)
					}
				})
			}
			if n := len(readTopic(t, addrs, topic)); n != 1 {
				t.Errorf("topic holds %d records, want only the valid one", n)
			}
		})
	}
}

// Mock mode works even though the configured broker does not exist.
func TestMockNeverDialsBrokers(t *testing.T) {
	p := newMockProducer(t, func(o *Options) { o.Brokers = []string{"127.0.0.1:1"} })
	topic, _ := mockTopic(t, 2)
	if d := sendOK(t, p, topic, "k", `{}`); d.Skipped || d.Offset < 0 {
		t.Errorf("unexpected delivery %+v", d)
	}
	if err := p.dialError(); err != nil {
		t.Errorf("a dial failed in mock mode: %v", err)
	}
}

func TestCloseThenSend(t *testing.T) {
	p := newMockProducer(t, nil)
	topic, _ := mockTopic(t, 2)
	sendOK(t, p, topic, "k", `{}`)
	for range 2 { // Close is idempotent
		if err := p.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	_, err := p.Send(context.Background(), topic, "k", []byte(`{}`))
	if !errors.Is(err, ErrClosed) || fault.ClassOf(err) != fault.ClassTerminal {
		t.Errorf("Send after Close = %v (class %v), want terminal ErrClosed", err, fault.ClassOf(err))
	}
}

// Sends racing with Close either complete or fail with ErrClosed; none
// panics or hangs, and every accepted send gets its report.
func TestCloseDuringSends(t *testing.T) {
	p := newMockProducer(t, nil)
	topic, _ := mockTopic(t, 4)
	var wg sync.WaitGroup
	var mu sync.Mutex
	results := map[string]int{}
	started := make(chan struct{})
	var once sync.Once
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				_, err := p.Send(context.Background(), topic, fmt.Sprintf("k%d", w), []byte(`{}`))
				once.Do(func() { close(started) })
				mu.Lock()
				switch {
				case err == nil:
					results["ok"]++
				case errors.Is(err, ErrClosed):
					results["closed"]++
				default:
					results[err.Error()]++
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	<-started
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	wg.Wait()
	if len(results) != 2 || results["ok"] == 0 || results["closed"] != 8 {
		t.Errorf("results %v, want only successes and one ErrClosed per sender", results)
	}
}

// Only a delivered send enters the id cache: after a failed send of event X
// a retry of X is written.
func TestFailedSendIsNotCached(t *testing.T) {
	p := newMockProducer(t, nil)
	topic, addrs := mockTopic(t, 2)
	tooBig := `{"id":"X","pad":"` + strings.Repeat("x", sarama.NewConfig().Producer.MaxMessageBytes) + `"}`
	if _, err := p.Send(context.Background(), topic, "k", []byte(tooBig)); err == nil {
		t.Fatal("oversized send succeeded")
	}
	if d := sendOK(t, p, topic, "k", `{"id":"X"}`); d.Skipped {
		t.Fatal("retry after a failed send was skipped")
	}
	if d := sendOK(t, p, topic, "k", `{"id":"X"}`); !d.Skipped {
		t.Fatal("repeat after a delivered send was written")
	}
	if n := len(readTopic(t, addrs, topic)); n != 1 {
		t.Errorf("topic holds %d records, want 1", n)
	}
}

// SendRaw writes key and value bytes as they are: a nil key or value is a
// null, bytes need not be JSON nor UTF-8, the id cache is not consulted,
// and the headers follow source-system as Send's do.
func TestSendRaw(t *testing.T) {
	p := newMockProducer(t, nil)
	topic, addrs := mockTopic(t, 1)
	records := []struct{ key, value []byte }{
		{[]byte{0xff, 0x00, 'k'}, []byte("not json")},
		{nil, []byte(`{"id":"same"}`)},
		{[]byte("k"), nil},
		{[]byte("k"), []byte(`{"id":"same"}`)},
		{[]byte("k"), []byte(`{"id":"same"}`)}, // no id cache: written again
	}
	for _, r := range records {
		if _, err := p.SendRaw(context.Background(), topic, r.key, r.value, Header{Key: "h", Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	got := readTopic(t, addrs, topic)
	if len(got) != len(records) {
		t.Fatalf("%d records, want %d", len(got), len(records))
	}
	for i, m := range got {
		r := records[i]
		if string(m.Key) != string(r.key) || (m.Key == nil) != (r.key == nil) ||
			string(m.Value) != string(r.value) || (m.Value == nil) != (r.value == nil) {
			t.Fatalf("record %d: key %q (nil %v) value %q (nil %v), want %q %q", i, m.Key, m.Key == nil, m.Value, m.Value == nil, r.key, r.value)
		}
		if len(m.Headers) != 2 || string(m.Headers[0].Key) != SourceSystemHeader || string(m.Headers[1].Key) != "h" {
			t.Fatalf("record %d: headers %v", i, m.Headers)
		}
	}
}
