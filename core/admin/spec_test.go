package admin

import (
	"os"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
)

// TestSpecFromEnvironment: the PROSODY_TOPIC_* variables fill what the
// caller leaves unset, and explicit values win over them.
func TestSpecFromEnvironment(t *testing.T) {
	t.Setenv("PROSODY_TOPIC_PARTITIONS", "6")
	t.Setenv("PROSODY_TOPIC_REPLICATION_FACTOR", "1")
	t.Setenv("PROSODY_TOPIC_CLEANUP_POLICY", "compact")
	t.Setenv("PROSODY_TOPIC_RETENTION", "2h")
	tests := []struct {
		name string
		set  func(*config.TopicConfig)
		want TopicSpec
	}{
		{"environment fills in", func(tc *config.TopicConfig) { tc.Name = "orders" },
			TopicSpec{Name: "orders", Partitions: 6, ReplicationFactor: 1, CleanupPolicy: "compact", Retention: 2 * time.Hour}},
		{"explicit wins", func(tc *config.TopicConfig) {
			tc.Name = "orders"
			tc.Partitions = config.Some(3)
			tc.CleanupPolicy = "delete"
		}, TopicSpec{Name: "orders", Partitions: 3, ReplicationFactor: 1, CleanupPolicy: "delete", Retention: 2 * time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc, err := config.LoadTopic(tt.set)
			if err != nil {
				t.Fatal(err)
			}
			if got := SpecFrom(tc); got != tt.want {
				t.Fatalf("spec = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSpecFromDefaultsToBroker(t *testing.T) {
	for _, v := range []string{"PARTITIONS", "REPLICATION_FACTOR", "CLEANUP_POLICY", "RETENTION", "NAME"} {
		t.Setenv("PROSODY_TOPIC_"+v, "") // restored after the test
		os.Unsetenv("PROSODY_TOPIC_" + v)
	}
	tc, err := config.LoadTopic(func(tc *config.TopicConfig) { tc.Name = "t" })
	if err != nil {
		t.Fatal(err)
	}
	if got := SpecFrom(tc); got != (TopicSpec{Name: "t"}) {
		t.Fatalf("spec = %+v, want only the name (broker defaults)", got)
	}
}
