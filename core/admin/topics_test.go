package admin

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/internal/testservices"
)

// backends are the clusters every lifecycle test runs against: the shared
// in-memory one and the real broker on localhost:9094.
var backends = []struct {
	name string
	opts func(t *testing.T) Options
}{
	{"mock", func(*testing.T) Options {
		// A dead address: mock mode must not dial it.
		return Options{Brokers: []string{"127.0.0.1:1"}, Mock: true}
	}},
	{"kafka", func(t *testing.T) Options {
		return Options{Brokers: testservices.RequireKafka(t)}
	}},
}

func newClient(t *testing.T, opts Options) *Client {
	t.Helper()
	c, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestTopicLifecycle(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			c := newClient(t, b.opts(t))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			spec := TopicSpec{
				Name:          testservices.UniqueName("admin"),
				Partitions:    3,
				CleanupPolicy: "compact",
				Retention:     time.Hour,
			}

			if err := c.CreateTopic(ctx, spec); err != nil {
				t.Fatalf("CreateTopic: %v", err)
			}
			assertTopic(t, c, spec.Name, 3, map[string]string{"cleanup.policy": "compact", "retention.ms": "3600000"})

			// Creating it again is not an error and changes nothing.
			again := spec
			again.Partitions = 5
			if err := c.CreateTopic(ctx, again); err != nil {
				t.Fatalf("second CreateTopic: %v", err)
			}
			assertTopic(t, c, spec.Name, 3, nil)

			if err := c.DeleteTopic(ctx, spec.Name); err != nil {
				t.Fatalf("DeleteTopic: %v", err)
			}
			err := c.DeleteTopic(ctx, testservices.UniqueName("missing"))
			if !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
				t.Errorf("DeleteTopic of a missing topic = %v, want ErrUnknownTopicOrPartition", err)
			}
		})
	}
}

// Unset partitions and replication take the broker defaults.
func TestCreateTopicBrokerDefaults(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			c := newClient(t, b.opts(t))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			name := testservices.UniqueName("admin-defaults")
			if err := c.CreateTopic(ctx, TopicSpec{Name: name}); err != nil {
				t.Fatalf("CreateTopic: %v", err)
			}
			defer func() {
				if err := c.DeleteTopic(ctx, name); err != nil {
					t.Errorf("DeleteTopic: %v", err)
				}
			}()
			meta := describe(t, c, name)
			if len(meta.Partitions) < 1 {
				t.Errorf("topic has %d partitions", len(meta.Partitions))
			}
		})
	}
}

func TestCreateTopicRejectsBadSpecs(t *testing.T) {
	c := newClient(t, Options{Brokers: []string{"unused:1"}, Mock: true})
	tests := []struct {
		name    string
		spec    TopicSpec
		wantErr string
	}{
		{"no name", TopicSpec{}, "name is required"},
		{"negative retention", TopicSpec{Name: "x", Retention: -time.Second}, "negative retention"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.CreateTopic(context.Background(), tt.spec)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("CreateTopic = %v, want an error mentioning %q", err, tt.wantErr)
			}
		})
	}
	if err := c.DeleteTopic(context.Background(), ""); err == nil {
		t.Error("DeleteTopic(\"\") succeeded")
	}
}

// A creation error other than "already exists" is reported at once, not
// as a readiness timeout. Only a real broker validates config values.
func TestCreateTopicReportsBrokerRejection(t *testing.T) {
	c := newClient(t, Options{Brokers: testservices.RequireKafka(t)})
	start := time.Now()
	err := c.CreateTopic(context.Background(), TopicSpec{Name: testservices.UniqueName("bad"), CleanupPolicy: "shred"})
	if !errors.Is(err, sarama.ErrInvalidConfig) {
		t.Errorf("CreateTopic with cleanup.policy=shred = %v, want ErrInvalidConfig", err)
	}
	if errors.Is(err, ErrTopicNotReady) || time.Since(start) > 5*time.Second {
		t.Errorf("rejection surfaced late (%s): %v", time.Since(start), err)
	}
}

// A topic that never becomes visible ends in ErrTopicNotReady.
func TestWaitReadyGivesUp(t *testing.T) {
	c := newClient(t, Options{Brokers: []string{"unused:1"}, Mock: true})
	c.readyTimeout = 300 * time.Millisecond
	err := c.waitReady(context.Background(), testservices.UniqueName("never-created"))
	if !errors.Is(err, ErrTopicNotReady) {
		t.Errorf("waitReady = %v, want ErrTopicNotReady", err)
	}
}

func TestTopicUsable(t *testing.T) {
	p := func(id, leader int32, err sarama.KError) *sarama.PartitionMetadata {
		return &sarama.PartitionMetadata{ID: id, Leader: leader, Err: err}
	}
	tests := []struct {
		name string
		meta []*sarama.TopicMetadata
		ok   bool
	}{
		{"all led", []*sarama.TopicMetadata{{Name: "t", Partitions: []*sarama.PartitionMetadata{p(0, 1, 0), p(1, 1, 0)}}}, true},
		{"replica unavailable is fine", []*sarama.TopicMetadata{{Name: "t", Partitions: []*sarama.PartitionMetadata{p(0, 1, sarama.ErrReplicaNotAvailable)}}}, true},
		{"missing", nil, false},
		{"other topic", []*sarama.TopicMetadata{{Name: "u", Partitions: []*sarama.PartitionMetadata{p(0, 1, 0)}}}, false},
		{"topic error", []*sarama.TopicMetadata{{Name: "t", Err: sarama.ErrUnknownTopicOrPartition}}, false},
		{"no partitions", []*sarama.TopicMetadata{{Name: "t"}}, false},
		{"leaderless", []*sarama.TopicMetadata{{Name: "t", Partitions: []*sarama.PartitionMetadata{p(0, 1, 0), p(1, -1, 0)}}}, false},
		{"partition error", []*sarama.TopicMetadata{{Name: "t", Partitions: []*sarama.PartitionMetadata{p(0, 1, sarama.ErrLeaderNotAvailable)}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := topicUsable(tt.meta, "t"); (err == nil) != tt.ok {
				t.Errorf("topicUsable = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestTopicSpecDetail(t *testing.T) {
	tests := []struct {
		name       string
		spec       TopicSpec
		partitions int32
		rf         int16
		configs    map[string]string
	}{
		{"defaults", TopicSpec{Name: "t"}, -1, -1, nil},
		{"explicit", TopicSpec{Name: "t", Partitions: 12, ReplicationFactor: 3}, 12, 3, nil},
		{"configs", TopicSpec{Name: "t", CleanupPolicy: "compact,delete", Retention: 7 * 24 * time.Hour}, -1, -1,
			map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "604800000"}},
		{"sub-millisecond retention rounds up", TopicSpec{Name: "t", Retention: 1500 * time.Microsecond}, -1, -1,
			map[string]string{"retention.ms": "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := tt.spec.detail()
			if err != nil {
				t.Fatal(err)
			}
			if d.NumPartitions != tt.partitions || d.ReplicationFactor != tt.rf {
				t.Errorf("partitions %d rf %d", d.NumPartitions, d.ReplicationFactor)
			}
			if len(d.ConfigEntries) != len(tt.configs) {
				t.Errorf("configs %v, want %v", d.ConfigEntries, tt.configs)
			}
			for k, v := range tt.configs {
				if got := d.ConfigEntries[k]; got == nil || *got != v {
					t.Errorf("config %s = %v, want %s", k, got, v)
				}
			}
		})
	}
}

func TestClosedClient(t *testing.T) {
	c, err := New(Options{Brokers: []string{"unused:1"}, Mock: true})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	c.Close() // idempotent
	if err := c.CreateTopic(context.Background(), TopicSpec{Name: "x"}); !errors.Is(err, ErrClosed) {
		t.Errorf("CreateTopic after Close = %v", err)
	}
	if err := c.DeleteTopic(context.Background(), "x"); !errors.Is(err, ErrClosed) {
		t.Errorf("DeleteTopic after Close = %v", err)
	}
}

func TestNewRequiresBrokers(t *testing.T) {
	if _, err := New(Options{Mock: true}); err == nil {
		t.Error("New without brokers succeeded")
	}
}

func TestCallHonoursContext(t *testing.T) {
	c := newClient(t, Options{Brokers: []string{"unused:1"}, Mock: true})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.CreateTopic(ctx, TopicSpec{Name: "x"}); !errors.Is(err, context.Canceled) {
		t.Errorf("CreateTopic with a cancelled context = %v", err)
	}
}

// assertTopic checks the partition count and, if given, config values.
func assertTopic(t *testing.T, c *Client, name string, partitions int, configs map[string]string) {
	t.Helper()
	if meta := describe(t, c, name); len(meta.Partitions) != partitions {
		t.Errorf("%s has %d partitions, want %d", name, len(meta.Partitions), partitions)
	}
	if configs == nil {
		return
	}
	entries, err := c.admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: name})
	if err != nil {
		t.Fatalf("DescribeConfig: %v", err)
	}
	got := map[string]string{}
	for _, e := range entries {
		got[e.Name] = e.Value
	}
	for k, want := range configs {
		if got[k] != want {
			t.Errorf("%s: %s = %q, want %q", name, k, got[k], want)
		}
	}
}

func describe(t *testing.T, c *Client, name string) *sarama.TopicMetadata {
	t.Helper()
	meta, err := c.admin.DescribeTopics([]string{name})
	if err != nil || len(meta) != 1 || !errors.Is(meta[0].Err, sarama.ErrNoError) {
		t.Fatalf("DescribeTopics(%s) = %v, %v", name, meta, err)
	}
	return meta[0]
}
