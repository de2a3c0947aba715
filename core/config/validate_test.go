package config

import (
	"math"
	"testing"
)

func TestCrossOptionRules(t *testing.T) {
	consumer := map[string]string{"group_id": `"g"`, "subscribed_topics": `"t"`, "cassandra_nodes": `"c1"`}
	tests := []struct {
		name    string
		raw     map[string]string
		option  string // "" when the configuration is valid
		wantErr string
	}{
		{name: "low-latency consumer needs a failure topic",
			raw:    merge(consumer, map[string]string{"mode": `"low-latency"`}),
			option: "failure_topic", wantErr: `failure_topic: must be set in low-latency mode, got ""`},
		{name: "low-latency consumer with a failure topic",
			raw: merge(consumer, map[string]string{"mode": `"low-latency"`, "failure_topic": `"dlq"`})},
		{name: "low-latency producer needs no failure topic",
			raw: map[string]string{"mode": `"low-latency"`}},
		{name: "consumer needs cassandra",
			raw:    merge(consumer, map[string]string{"cassandra_nodes": `[]`}),
			option: "cassandra_nodes", wantErr: "cassandra_nodes: must list at least one node unless mock is enabled, got []"},
		{name: "mock consumer needs no cassandra",
			raw: merge(consumer, map[string]string{"cassandra_nodes": `[]`, "mock": `true`})},
		{name: "producer needs no cassandra",
			raw: map[string]string{"group_id": `"g"`}},
		{name: "rack needs a datacenter",
			raw:    map[string]string{"cassandra_rack": `"r1"`},
			option: "cassandra_rack", wantErr: `cassandra_rack: needs cassandra_datacenter to be set too, got "r1"`},
		{name: "defer max below base",
			raw:    map[string]string{"defer_base": `"10s"`, "defer_max_delay": `"5s"`},
			option: "defer_max_delay", wantErr: "defer_max_delay: must be at least defer_base (10s), got 5s"},
		{name: "retry max equal to base",
			raw: map[string]string{"retry_base": `"1s"`, "max_retry_delay": `"1s"`}},
		{name: "bootstrap servers needed in mock mode too",
			raw:    map[string]string{"mock": `true`, "bootstrap_servers": `""`},
			option: "bootstrap_servers", wantErr: "must list at least one server"},
		{name: "valid regex subscription",
			raw: map[string]string{"subscribed_topics": `"^orders\\..*"`}},
		{name: "ipv6 and plain hosts",
			raw: map[string]string{"cassandra_nodes": `["::1", "[::1]:9042", "db.local", "10.0.0.1:9042"]`}},
		{name: "bad host",
			raw:    map[string]string{"cassandra_nodes": `["db local"]`},
			option: "cassandra_nodes", wantErr: `entry "db local" must be host or host:port`},
		{name: "number too large for a float",
			raw:    map[string]string{"scheduler_wait_weight": `1e309`},
			option: "scheduler_wait_weight", wantErr: "must be a number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			_, err := FromJSON(options(t, withBase(tc.raw)))
			if tc.option == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			requireOptionError(t, err, tc.option, tc.wantErr)
		})
	}
}

func merge(maps ...map[string]string) map[string]string {
	out := make(map[string]string)
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func TestConsumerConfigured(t *testing.T) {
	c := Default()
	if c.ConsumerConfigured() {
		t.Error("defaults describe a consumer")
	}
	c.GroupID = "g"
	if c.ConsumerConfigured() {
		t.Error("group without topics describes a consumer")
	}
	c.SubscribedTopics = []string{"t"}
	if !c.ConsumerConfigured() {
		t.Error("group and topic do not describe a consumer")
	}
}

func TestValidateConsumer(t *testing.T) {
	c := Default()
	err := c.ValidateConsumer()
	requireOptionError(t, err, "group_id", `group_id: must be set to consume, got ""`)
	requireOptionError(t, err, "subscribed_topics", "subscribed_topics: must list at least one topic to consume, got []")
	c.GroupID, c.SubscribedTopics = "g", []string{"t"}
	if err := c.ValidateConsumer(); err != nil {
		t.Error(err)
	}
}

func TestValidateProducer(t *testing.T) {
	c := Default()
	requireOptionError(t, c.ValidateProducer(), "source_system", "source_system: must be set to send")
	c.GroupID = "g"
	if err := c.ValidateProducer(); err != nil {
		t.Errorf("group id should serve as source system: %v", err)
	}
	c.GroupID, c.SourceSystem = "", "s"
	if err := c.ValidateProducer(); err != nil {
		t.Error(err)
	}
}

func TestValidateAfterHandEdits(t *testing.T) {
	clearEnv(t)
	cfg, err := FromJSON([]byte(`{"bootstrap_servers": "k:1"}`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MessageSpans = "sideways"
	cfg.ProbePort = Some(-1)
	cfg.SchedulerWaitWeight = math.NaN()
	cfg.MonopolizationThreshold = math.NaN()
	err = cfg.Validate()
	requireOptionError(t, err, "scheduler_wait_weight", "got NaN")
	requireOptionError(t, err, "monopolization_threshold", "must be within [0, 1], got NaN")
	requireOptionError(t, err, "message_spans", `message_spans: must be "child" or "follows_from", got "sideways"`)
	requireOptionError(t, err, "probe_port", "probe_port: must be within [0, 65535], got -1")
}
