package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/IBM/sarama"
)

func saramaConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V3_0_0_0
	c.Net.DialTimeout = 3 * time.Second
	c.Net.ReadTimeout = 5 * time.Second
	c.Metadata.Retry.Max = 1
	c.Consumer.Return.Errors = true
	return c
}

// Admin is the harness's view of the broker.
type Admin struct {
	client sarama.Client
	admin  sarama.ClusterAdmin
}

// NewAdmin connects to bootstrap.
func NewAdmin(bootstrap string) (*Admin, error) {
	c, err := sarama.NewClient([]string{bootstrap}, saramaConfig())
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	a, err := sarama.NewClusterAdminFromClient(c)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("workload: %w", err), c.Close())
	}
	return &Admin{client: c, admin: a}, nil
}

// Close closes the connection.
func (a *Admin) Close() error { return a.admin.Close() }

// CreateTopic creates topic with n partitions.
func (a *Admin) CreateTopic(topic string, n int32) error {
	err := a.admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: n, ReplicationFactor: 1}, false)
	if err != nil {
		return fmt.Errorf("workload: create %s: %w", topic, err)
	}
	return nil
}

// Members is the number of members of group with partitions assigned,
// once the group is stable.
func (a *Admin) Members(group string) (int, error) {
	ds, err := a.admin.DescribeConsumerGroups([]string{group})
	if err != nil {
		return 0, fmt.Errorf("workload: %w", err)
	}
	if len(ds) != 1 || ds[0].State != "Stable" {
		return 0, nil
	}
	n := 0
	for _, m := range ds[0].Members {
		if len(m.MemberAssignment) > 0 {
			n++
		}
	}
	return n, nil
}

// Committed is the group's committed offset of each partition of topic
// (-1 where none).
func (a *Admin) Committed(group, topic string, partitions int32) (map[int32]int64, error) {
	ps := make([]int32, partitions)
	for i := range ps {
		ps[i] = int32(i)
	}
	r, err := a.admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: ps})
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	if r.Err != sarama.ErrNoError {
		return nil, fmt.Errorf("workload: offsets of %s: %w", group, r.Err)
	}
	out := map[int32]int64{}
	for p, b := range r.Blocks[topic] {
		if b.Err != sarama.ErrNoError {
			return nil, fmt.Errorf("workload: offset of %s/%d: %w", topic, p, b.Err)
		}
		out[p] = b.Offset
	}
	return out, nil
}

// Ends is the high watermark of each partition of topic.
func (a *Admin) Ends(topic string, partitions int32) (map[int32]int64, error) {
	out := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		o, err := a.client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			return nil, fmt.Errorf("workload: end of %s/%d: %w", topic, p, err)
		}
		out[p] = o
	}
	return out, nil
}

// Lag is the sum over partitions of end minus committed.
func (a *Admin) Lag(group, topic string, partitions int32) (int64, error) {
	ends, err := a.Ends(topic, partitions)
	if err != nil {
		return 0, err
	}
	com, err := a.Committed(group, topic, partitions)
	if err != nil {
		return 0, err
	}
	var lag int64
	for p, e := range ends {
		c := com[p]
		if c < 0 {
			c = 0
		}
		lag += e - c
	}
	return lag, nil
}

// Commit is one line of commits.log: a committed offset seen at a time.
type Commit struct {
	Time      int64 `json:"t"`
	Partition int32 `json:"p"`
	Offset    int64 `json:"o"`
}

// SampleCommits appends the group's committed offsets to path every
// interval until ctx ends; while the broker is away it samples nothing.
func SampleCommits(ctx context.Context, bootstrap, group, topic string, partitions int32, path string, interval time.Duration) error {
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("workload: %w", err)
	}
	defer out.Close()
	var a *Admin
	defer func() {
		if a != nil {
			_ = a.Close()
		}
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if a == nil {
			if a, err = NewAdmin(bootstrap); err != nil {
				a = nil
				continue
			}
		}
		com, err := a.Committed(group, topic, partitions)
		if err != nil {
			_ = a.Close()
			a = nil
			continue
		}
		// The time is taken after the answer: everything the answer says
		// was committed was committed before it.
		now := time.Now().UnixNano()
		for p, o := range com {
			line, _ := json.Marshal(Commit{Time: now, Partition: p, Offset: o})
			if _, err := out.Write(append(line, '\n')); err != nil {
				return fmt.Errorf("workload: %w", err)
			}
		}
	}
}

// TopicRecord is one line of topic.log: a record read back from the topic.
type TopicRecord struct {
	Partition int32           `json:"p"`
	Offset    int64           `json:"o"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"v"`
}

// ReadTopic reads every record of topic up to its current end into path.
func (a *Admin) ReadTopic(topic string, partitions int32, path string) (int, error) {
	ends, err := a.Ends(topic, partitions)
	if err != nil {
		return 0, err
	}
	out, err := os.Create(path)
	if err != nil {
		return 0, fmt.Errorf("workload: %w", err)
	}
	defer out.Close()
	cons, err := sarama.NewConsumerFromClient(a.client)
	if err != nil {
		return 0, fmt.Errorf("workload: %w", err)
	}
	defer cons.Close()
	n := 0
	for p := int32(0); p < partitions; p++ {
		if ends[p] == 0 {
			continue
		}
		pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			return n, fmt.Errorf("workload: read %s/%d: %w", topic, p, err)
		}
		for m := range pc.Messages() {
			line, _ := json.Marshal(TopicRecord{Partition: p, Offset: m.Offset, Key: string(m.Key), Value: m.Value})
			if _, err := out.Write(append(line, '\n')); err != nil {
				_ = pc.Close()
				return n, fmt.Errorf("workload: %w", err)
			}
			n++
			if m.Offset >= ends[p]-1 {
				break
			}
		}
		if err := pc.Close(); err != nil {
			return n, fmt.Errorf("workload: read %s/%d: %w", topic, p, err)
		}
	}
	return n, nil
}
