package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/prosody-events/prosody-go/core/admin"
	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
)

func createTopic(t *testing.T, tg target, partitions int32) string {
	t.Helper()
	name := testservices.UniqueName("client-" + tg.name)
	a, err := admin.New(admin.Options{Brokers: testservices.KafkaAddrs(), Mock: tg.mock})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.CreateTopic(context.Background(), admin.TopicSpec{Name: name, Partitions: partitions, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	return name
}

func closeClient(t *testing.T, c *Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func TestConsumerStateMachine(t *testing.T) {
	tg := target{"mock", true}
	topic := createTopic(t, tg, 2)
	c := newClient(t, newConfig(t, tg, func(c *config.Config) {
		c.GroupID = testservices.UniqueName("g")
		c.SubscribedTopics = []string{topic}
	}))
	ctx := context.Background()
	noop := event.HandlerFuncs{}

	steps := []struct {
		name    string
		do      func() error
		wantErr error
		want    State
	}{
		{"new client is configured", func() error { return nil }, nil, Configured},
		{"subscribe runs", func() error { return c.Subscribe(noop) }, nil, Running},
		{"second subscribe is refused", func() error { return c.Subscribe(noop) }, ErrAlreadySubscribed, Running},
		{"unsubscribe returns to configured", func() error { return c.Unsubscribe(ctx) }, nil, Configured},
		{"unsubscribe twice is refused", func() error { return c.Unsubscribe(ctx) }, ErrNotSubscribed, Configured},
		{"subscribe again", func() error { return c.Subscribe(noop) }, nil, Running},
		{"unsubscribe again", func() error { return c.Unsubscribe(ctx) }, nil, Configured},
	}
	for _, s := range steps {
		err := s.do()
		if !errors.Is(err, s.wantErr) {
			t.Fatalf("%s: err = %v, want %v", s.name, err, s.wantErr)
		}
		if got, err := c.ConsumerState(); err != nil || got != s.want {
			t.Fatalf("%s: state = %q (%v), want %q", s.name, got, err, s.want)
		}
	}
	if c.SourceSystem() != c.cfg.GroupID {
		t.Fatalf("source system %q, want the group id", c.SourceSystem())
	}
	if c.AssignedPartitionCount() != 0 || c.IsStalled() {
		t.Fatal("an unsubscribed client has no partitions and is not stalled")
	}
}

func TestProducerOnlyClient(t *testing.T) {
	tg := target{"mock", true}
	c := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "orders-api" }))
	if s, err := c.ConsumerState(); err != nil || s != Unconfigured {
		t.Fatalf("state %q %v, want unconfigured", s, err)
	}
	if err := c.Subscribe(event.HandlerFuncs{}); err == nil {
		t.Fatal("subscribing without group_id must fail")
	}
	topic := createTopic(t, tg, 1)
	if err := c.Send(context.Background(), topic, "k", []byte(`{"a":1}`)); err != nil {
		t.Fatalf("send: %v", err)
	}
	if err := c.Send(context.Background(), topic, "k", []byte(`{"a":`)); err == nil || !fault.IsPermanent(err) {
		t.Fatalf("send of invalid JSON: err = %v, want a permanent error", err)
	}
}

func TestNoSourceSystemCannotSend(t *testing.T) {
	c := newClient(t, newConfig(t, target{"mock", true}))
	if err := c.Send(context.Background(), "t", "k", []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "source_system") {
		t.Fatalf("err = %v, want one naming source_system", err)
	}
}

// TestSendAndHandle is the whole path on both targets: one client sends,
// another (a different group and source system) handles every message in
// per-key order and sees the source-system header.
func TestSendAndHandle(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			topic := createTopic(t, tg, 4)
			sender := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "sender" }))
			receiver := newClient(t, newConfig(t, tg, func(c *config.Config) {
				c.GroupID = testservices.UniqueName("receiver")
				c.SubscribedTopics = []string{topic}
			}))

			const perKey, keys = 20, 10
			var mu sync.Mutex
			next := map[string]int{}
			handled := 0
			err := receiver.Subscribe(event.HandlerFuncs{Message: func(ctx *event.Context, m *event.Message) error {
				var body struct{ N int }
				if err := json.Unmarshal(m.Payload, &body); err != nil {
					return fault.Permanent(err)
				}
				mu.Lock()
				defer mu.Unlock()
				if body.N != next[m.Key] {
					t.Errorf("key %s: got %d, want %d", m.Key, body.N, next[m.Key])
				}
				if m.SourceSystem != "sender" {
					t.Errorf("source-system header %q, want sender", m.SourceSystem)
				}
				next[m.Key] = body.N + 1
				handled++
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for n := 0; n < perKey; n++ {
				for k := 0; k < keys; k++ {
					p := fmt.Sprintf(`{"id":"%d-%d","type":"test","n":%d}`, k, n, n)
					if err := sender.Send(ctx, topic, fmt.Sprintf("key-%d", k), []byte(p)); err != nil {
						t.Fatalf("send: %v", err)
					}
				}
			}
			waitFor(t, time.Minute, "all messages handled", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return handled == perKey*keys
			})
			if n := receiver.AssignedPartitionCount(); n != 4 {
				t.Fatalf("assigned partitions %d, want 4", n)
			}
		})
	}
}

// TestFailureHandlingPerMode: how a failing handler is treated depends on
// the mode. Each case counts attempts for one message and checks that the
// consumer moves on to the next message of the same key.
func TestFailureHandlingPerMode(t *testing.T) {
	transient := errors.New("flaky dependency")
	tests := []struct {
		name         string
		mode         config.Mode
		fail         func(attempt int) error
		wantAttempts int
	}{
		{"pipeline with deferral off retries transient until success", config.ModePipeline, func(a int) error {
			if a < 5 {
				return transient
			}
			return nil
		}, 5},
		{"pipeline does not retry permanent", config.ModePipeline, func(int) error { return fault.Permanent(transient) }, 1},
		{"low-latency gives up after max_retries", config.ModeLowLatency, func(int) error { return transient }, 3},
		{"best-effort tries once", config.ModeBestEffort, func(int) error { return transient }, 1},
	}
	tg := target{"mock", true}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic := createTopic(t, tg, 1)
			c := newClient(t, newConfig(t, tg, func(c *config.Config) {
				c.GroupID = testservices.UniqueName("modes")
				c.SubscribedTopics = []string{topic}
				c.Mode = tt.mode
				c.MaxRetries = 2
				c.FailureTopic = "dead-letters"
				c.DeferEnabled = false // deferral has tests of its own (deferral_test.go)
			}))
			var mu sync.Mutex
			attempts, after := 0, false
			err := c.Subscribe(event.HandlerFuncs{Message: func(_ *event.Context, m *event.Message) error {
				mu.Lock()
				defer mu.Unlock()
				if string(m.Payload) == `{"second":true}` {
					after = true
					return nil
				}
				attempts++
				return tt.fail(attempts)
			}})
			if err != nil {
				t.Fatal(err)
			}
			producer := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "test" }))
			for _, p := range []string{`{"first":true}`, `{"second":true}`} {
				if err := producer.Send(context.Background(), topic, "same-key", []byte(p)); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, 30*time.Second, "the next message of the key", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return after
			})
			mu.Lock()
			defer mu.Unlock()
			if attempts != tt.wantAttempts {
				t.Fatalf("attempts = %d, want %d", attempts, tt.wantAttempts)
			}
		})
	}
}

// TestTimeoutCancelsHandler: a handler running past `timeout` sees its
// context cancelled with the timeout cause, and the event is retried.
func TestTimeoutCancelsHandler(t *testing.T) {
	tg := target{"mock", true}
	topic := createTopic(t, tg, 1)
	c := newClient(t, newConfig(t, tg, func(c *config.Config) {
		c.GroupID = testservices.UniqueName("timeout")
		c.SubscribedTopics = []string{topic}
		c.Timeout = config.Some(100 * time.Millisecond)
	}))
	var mu sync.Mutex
	attempts, causes := 0, []error{}
	done := make(chan struct{})
	err := c.Subscribe(event.HandlerFuncs{Message: func(ctx *event.Context, _ *event.Message) error {
		mu.Lock()
		attempts++
		first := attempts == 1
		mu.Unlock()
		if !first {
			close(done)
			return nil
		}
		select {
		case <-ctx.OnCancel():
		case <-time.After(10 * time.Second):
		}
		mu.Lock()
		causes = append(causes, ctx.Cause())
		mu.Unlock()
		return ctx.Err()
	}})
	if err != nil {
		t.Fatal(err)
	}
	// The client's own sends carry its group id as source system and would
	// be loop-filtered, so another client sends.
	sender := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "other" }))
	if err := sender.Send(context.Background(), topic, "k", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the timed-out event was not retried")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(causes) != 1 || !errors.Is(causes[0], event.ErrTimeout) {
		t.Fatalf("causes = %v, want one ErrTimeout", causes)
	}
}

// TestProbeServer: with probe_port set (0 = any free port) and a real
// broker, /readyz reports the assigned partitions and /livez is healthy;
// the server goes away on unsubscribe. Mock mode never starts it.
func TestProbeServer(t *testing.T) {
	tg := target{"kafka", false}
	testservices.RequireKafka(t)
	topic := createTopic(t, tg, 3)
	c := newClient(t, newConfig(t, tg, func(c *config.Config) {
		c.GroupID = testservices.UniqueName("probe")
		c.SubscribedTopics = []string{topic}
		c.ProbePort = config.Some(0)
	}))
	if err := c.Subscribe(event.HandlerFuncs{}); err != nil {
		t.Fatal(err)
	}
	addr := c.ProbeAddr()
	if addr == "" {
		t.Fatal("probe server not started")
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor(t, time.Minute, "readiness", func() bool {
		code, body := get("/readyz")
		return code == 200 && body == "3 partitions assigned"
	})
	if code, body := get("/livez"); code != 200 || body != "No stalled components." {
		t.Fatalf("/livez = %d %q", code, body)
	}
	if err := c.Unsubscribe(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, _ := get("/readyz"); code != 0 {
		t.Fatalf("probe server still answering after unsubscribe (%d)", code)
	}

	mock := newClient(t, newConfig(t, target{"mock", true}, func(c *config.Config) {
		c.GroupID = testservices.UniqueName("probe-mock")
		c.SubscribedTopics = []string{topic}
		c.ProbePort = config.Some(0)
	}))
	if err := mock.Subscribe(event.HandlerFuncs{}); err != nil {
		t.Fatal(err)
	}
	if mock.ProbeAddr() != "" {
		t.Fatal("mock mode must not start the probe server")
	}
}

// TestMissingTopicFailsSubscribe: subscribing to a topic that does not
// exist fails with its name instead of waiting silently.
func TestMissingTopicFailsSubscribe(t *testing.T) {
	testservices.RequireKafka(t)
	missing := testservices.UniqueName("missing")
	c := newClient(t, newConfig(t, target{"kafka", false}, func(c *config.Config) {
		c.GroupID = testservices.UniqueName("g")
		c.SubscribedTopics = []string{missing}
	}))
	if err := c.Subscribe(event.HandlerFuncs{}); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("err = %v, want one naming %s", err, missing)
	}
}

// TestRegexSubscription: "^prefix" subscribes to the existing topics that
// match.
func TestRegexSubscription(t *testing.T) {
	tg := target{"mock", true}
	prefix := testservices.UniqueName("rx")
	a, err := admin.New(admin.Options{Brokers: testservices.KafkaAddrs(), Mock: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, suffix := range []string{"-a", "-b"} {
		if err := a.CreateTopic(context.Background(), admin.TopicSpec{Name: prefix + suffix, Partitions: 1}); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, newConfig(t, tg, func(c *config.Config) {
		c.GroupID = testservices.UniqueName("g")
		c.SubscribedTopics = []string{"^" + prefix + "-.*"}
	}))
	if err := c.Subscribe(event.HandlerFuncs{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "both topics assigned", func() bool { return c.AssignedPartitionCount() == 2 })
}

// TestNoGoroutineLeaksAfterUnsubscribe subscribes and unsubscribes several
// times, then checks that nothing the client started is still running.
func TestNoGoroutineLeaksAfterUnsubscribe(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			topic := createTopic(t, tg, 2)
			c, err := New(newConfig(t, tg, func(c *config.Config) {
				c.GroupID = testservices.UniqueName("leak")
				c.SubscribedTopics = []string{topic}
				c.ProbePort = config.Some(0)
			}), WithLogger(quietLogger()))
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 3; i++ {
				if err := c.Subscribe(event.HandlerFuncs{}); err != nil {
					t.Fatal(err)
				}
				waitFor(t, time.Minute, "assignment", func() bool { return c.AssignedPartitionCount() == 2 })
				if err := c.Unsubscribe(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			closeClient(t, c)
			goleak.VerifyNone(t, testservices.LeakOptions()...)
		})
	}
}

// TestMockNeverDialsBootstrapServers: in mock mode the configured servers
// are validated but never contacted; here they point at a closed port, and
// sending and consuming still work against the in-process cluster.
func TestMockNeverDialsBootstrapServers(t *testing.T) {
	tg := target{"mock", true}
	closedPort := func(c *config.Config) { c.BootstrapServers = []string{"127.0.0.1:1"} }
	topic := createTopic(t, tg, 1)
	sender := newClient(t, newConfig(t, tg, closedPort, func(c *config.Config) { c.SourceSystem = "s" }))
	receiver := newClient(t, newConfig(t, tg, closedPort, func(c *config.Config) {
		c.GroupID = testservices.UniqueName("g")
		c.SubscribedTopics = []string{topic}
	}))
	got := make(chan string, 1)
	if err := receiver.Subscribe(event.HandlerFuncs{Message: func(_ *event.Context, m *event.Message) error {
		got <- m.Key
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sender.Send(ctx, topic, "k1", []byte(`{"ok":true}`)); err != nil {
		t.Fatalf("send: %v", err)
	}
	select {
	case k := <-got:
		if k != "k1" {
			t.Fatalf("key %q", k)
		}
	case <-ctx.Done():
		t.Fatal("message not handled")
	}
}
