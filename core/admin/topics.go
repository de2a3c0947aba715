package admin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/IBM/sarama"
)

// Readiness polling after a create, as in the original.
const (
	readyPollInterval = 100 * time.Millisecond
	readyPollTimeout  = 10 * time.Second
	readyCheckTimeout = 500 * time.Millisecond
)

// ErrTopicNotReady is wrapped by CreateTopic's error when the topic does not
// become usable within 10 s of the create request.
var ErrTopicNotReady = errors.New("admin: topic not ready")

// TopicSpec describes a topic to create. Zero values leave a setting to the
// broker.
type TopicSpec struct {
	// Name is required.
	Name string
	// Partitions is the partition count; zero or less means the broker
	// default.
	Partitions int32
	// ReplicationFactor; zero or less means the broker default.
	ReplicationFactor int16
	// CleanupPolicy is sent verbatim as cleanup.policy ("delete",
	// "compact" or "compact,delete"); empty leaves it unset.
	CleanupPolicy string
	// Retention is sent as retention.ms, rounded up to whole
	// milliseconds; zero leaves it unset. Negative values are rejected.
	Retention time.Duration
}

// CreateTopic creates a topic and waits until it is usable: its configuration
// can be described and every partition has a leader. A topic that already
// exists is not an error (its settings are left as they are); it is still
// waited for.
//
// Unlike the original, which ignores every per-topic result, other creation
// errors (an invalid config value, say) are returned at once rather than
// surfacing as a readiness timeout 10 s later.
func (c *Client) CreateTopic(ctx context.Context, spec TopicSpec) error {
	detail, err := spec.detail()
	if err != nil {
		return err
	}
	err = c.call(ctx, callTimeout, func(a sarama.ClusterAdmin) error {
		return a.CreateTopic(spec.Name, detail, false)
	})
	if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		return fmt.Errorf("admin: create topic %q: %w", spec.Name, err)
	}
	return c.waitReady(ctx, spec.Name)
}

// detail validates the spec and translates it for sarama.
func (s TopicSpec) detail() (*sarama.TopicDetail, error) {
	if s.Name == "" {
		return nil, errors.New("admin: create topic: name is required")
	}
	if s.Retention < 0 {
		return nil, fmt.Errorf("admin: create topic %q: negative retention %s", s.Name, s.Retention)
	}
	d := &sarama.TopicDetail{
		// -1 asks the broker for its default (CreateTopics v4+).
		NumPartitions:     -1,
		ReplicationFactor: -1,
	}
	if s.Partitions > 0 {
		d.NumPartitions = s.Partitions
	}
	if s.ReplicationFactor > 0 {
		d.ReplicationFactor = s.ReplicationFactor
	}
	configs := map[string]*string{}
	if s.CleanupPolicy != "" {
		v := s.CleanupPolicy
		configs["cleanup.policy"] = &v
	}
	if s.Retention > 0 {
		ms := (s.Retention + time.Millisecond - 1) / time.Millisecond
		v := strconv.FormatInt(int64(ms), 10)
		configs["retention.ms"] = &v
	}
	if len(configs) > 0 {
		d.ConfigEntries = configs
	}
	return d, nil
}

// waitReady polls until the topic is usable, for at most c.readyTimeout.
func (c *Client) waitReady(ctx context.Context, name string) error {
	deadline := time.NewTimer(c.readyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(readyPollInterval)
	defer tick.Stop()
	for {
		lastErr := c.checkReady(ctx, name)
		if lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("admin: wait for topic %q: %w", name, ctx.Err())
		case <-deadline.C:
			return fmt.Errorf("%w: %q after %s (last check: %v)", ErrTopicNotReady, name, c.readyTimeout, lastErr)
		case <-tick.C:
		}
	}
}

// checkReady returns nil when the topic's configuration can be described
// and its metadata lists every partition with a leader.
func (c *Client) checkReady(ctx context.Context, name string) error {
	err := c.call(ctx, readyCheckTimeout, func(a sarama.ClusterAdmin) error {
		_, err := a.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: name})
		return err
	})
	if err != nil {
		return fmt.Errorf("describe configs: %w", err)
	}
	var meta []*sarama.TopicMetadata
	err = c.call(ctx, readyCheckTimeout, func(a sarama.ClusterAdmin) error {
		var err error
		meta, err = a.DescribeTopics([]string{name})
		return err
	})
	if err != nil {
		return fmt.Errorf("describe topic: %w", err)
	}
	return topicUsable(meta, name)
}

// topicUsable checks the metadata of name for a leader on every partition.
func topicUsable(meta []*sarama.TopicMetadata, name string) error {
	for _, t := range meta {
		if t.Name != name {
			continue
		}
		if !errors.Is(t.Err, sarama.ErrNoError) {
			return t.Err
		}
		if len(t.Partitions) == 0 {
			return errors.New("no partitions yet")
		}
		for _, p := range t.Partitions {
			if !errors.Is(p.Err, sarama.ErrNoError) && !errors.Is(p.Err, sarama.ErrReplicaNotAvailable) {
				return fmt.Errorf("partition %d: %w", p.ID, p.Err)
			}
			if p.Leader < 0 {
				return fmt.Errorf("partition %d has no leader", p.ID)
			}
		}
		return nil
	}
	return errors.New("not in metadata")
}

// DeleteTopic deletes a topic. Deleting a topic that does not exist fails
// with an error wrapping sarama.ErrUnknownTopicOrPartition. Kafka removes
// the data asynchronously, so recreating the name at once may briefly fail.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	if name == "" {
		return errors.New("admin: delete topic: name is required")
	}
	err := c.call(ctx, callTimeout, func(a sarama.ClusterAdmin) error {
		return a.DeleteTopic(name)
	})
	if err != nil {
		return fmt.Errorf("admin: delete topic %q: %w", name, err)
	}
	return nil
}
