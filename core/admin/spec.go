package admin

import "github.com/prosody-events/prosody-go/core/config"

// SpecFrom turns a validated topic configuration (explicit values, then the
// PROSODY_TOPIC_* variables, then the broker's defaults) into a TopicSpec.
func SpecFrom(tc *config.TopicConfig) TopicSpec {
	return TopicSpec{
		Name:              tc.Name,
		Partitions:        int32(tc.Partitions.Or(0)),
		ReplicationFactor: int16(tc.ReplicationFactor.Or(0)),
		CleanupPolicy:     tc.CleanupPolicy,
		Retention:         tc.Retention.Or(0),
	}
}
