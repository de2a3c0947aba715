package config

import (
	"errors"
	"time"
)

// TopicConfig describes a topic for the admin client's create call. Absent
// values leave the choice to the broker.
type TopicConfig struct {
	Name string // name, PROSODY_TOPIC_NAME; required
	// Partitions is the partition count (partition_count,
	// PROSODY_TOPIC_PARTITIONS), 1..65535.
	Partitions Optional[int]
	// ReplicationFactor (replication_factor,
	// PROSODY_TOPIC_REPLICATION_FACTOR), 1..65535.
	ReplicationFactor Optional[int]
	// CleanupPolicy is sent to Kafka unchanged as cleanup.policy
	// (cleanup_policy, PROSODY_TOPIC_CLEANUP_POLICY); Kafka understands
	// "delete", "compact" and "compact,delete". "" leaves the broker default.
	CleanupPolicy string
	// Retention is sent as retention.ms (retention, PROSODY_TOPIC_RETENTION).
	Retention Optional[time.Duration]

	envVars map[string]string
}

var topicOptions = []option[TopicConfig]{
	opt("name", "PROSODY_TOPIC_NAME", func(t *TopicConfig) *string { return &t.Name }, stringKind, "",
		notEmpty, topicName),
	opt("partition_count", "PROSODY_TOPIC_PARTITIONS", func(t *TopicConfig) *Optional[int] { return &t.Partitions }, optionalKind(intKind, false), None[int](),
		whenSet(within(1, 65535))),
	opt("replication_factor", "PROSODY_TOPIC_REPLICATION_FACTOR", func(t *TopicConfig) *Optional[int] { return &t.ReplicationFactor }, optionalKind(intKind, false), None[int](),
		whenSet(within(1, 65535))),
	opt("cleanup_policy", "PROSODY_TOPIC_CLEANUP_POLICY", func(t *TopicConfig) *string { return &t.CleanupPolicy }, stringKind, ""),
	opt("retention", "PROSODY_TOPIC_RETENTION", func(t *TopicConfig) *Optional[time.Duration] { return &t.Retention }, optionalKind(durationKind, false), None[time.Duration](),
		whenSet(positive)),
}

// LoadTopic builds a TopicConfig from the PROSODY_TOPIC_* variables and the
// explicit settings, which win, and validates it.
func LoadTopic(explicit ...func(*TopicConfig)) (*TopicConfig, error) {
	return buildTopic(nil, explicit)
}

// TopicFromJSON is LoadTopic with the explicit settings as one JSON object
// with the keys name, partition_count, replication_factor, cleanup_policy and
// retention.
func TopicFromJSON(data []byte) (*TopicConfig, error) {
	obj, err := decodeObject(data)
	if err != nil {
		return nil, err
	}
	return buildTopic(obj, nil)
}

func buildTopic(obj map[string]any, explicit []func(*TopicConfig)) (*TopicConfig, error) {
	var t TopicConfig
	envVars, errs := resolve(topicOptions, &t, obj, explicit)
	t.envVars = envVars
	return finish(&t, errs, t.validate)
}

// Validate checks a TopicConfig and returns the joined *OptionError values.
func (t *TopicConfig) Validate() error { return errors.Join(t.validate()...) }

func (t *TopicConfig) validate() []error {
	errs := &errorList{envVars: t.envVars}
	checkOptions(topicOptions, t, errs)
	return errs.errs
}
