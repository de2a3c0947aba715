// Package mockbroker provides the in-process Kafka cluster behind Prosody's
// mock mode (DESIGN.md §6, core-behavior.md §11).
//
// The cluster is github.com/twmb/franz-go/pkg/kfake. It speaks the real Kafka
// wire protocol on loopback, so the ordinary sarama code path (producer,
// consumer group, admin) runs against it unchanged; mock mode only swaps the
// bootstrap addresses. Nothing here dials a real broker.
//
// Every mock client in a process must see the same topics (a mock producer
// feeds a mock consumer), so Shared returns one process-wide cluster. It is
// started lazily on first use and is never closed: it lives until the process
// exits, like the original's librdkafka mock cluster. Tests that need an
// isolated cluster they can tear down use New and Close.
package mockbroker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
)

const (
	// DefaultPartitions is the partition count of auto-created topics and of
	// EnsureTopic calls that pass a non-positive count.
	//
	// Eight rather than the original mock's three: enough that keys spread
	// over several partitions (so per-key ordering and multi-member consumer
	// groups are actually exercised), yet small enough that sarama's
	// per-partition goroutines and fetches stay cheap in tests.
	DefaultPartitions = 8

	// ClusterID is the cluster id the mock cluster reports in metadata.
	ClusterID = "prosody-mock"

	// minSessionTimeout lowers kfake's (and Kafka's) 6 s floor for consumer
	// group session timeouts so that mock-mode tests of crashes and
	// rebalances need not wait that long. It only widens what is accepted:
	// any configuration valid against a real broker behaves the same here.
	minSessionTimeout = 100 * time.Millisecond
)

// KafkaVersion is the protocol version sarama clients should declare against
// the mock cluster. kfake implements current Kafka APIs and advertises them
// through ApiVersions, which sarama uses to cap each request version, so a
// modern version is safe; it is at least V0_11 as the idempotent producer
// requires.
var KafkaVersion = sarama.V3_9_0_0

// Cluster is an in-process Kafka cluster listening on 127.0.0.1.
type Cluster struct {
	kc     *kfake.Cluster
	addrs  []string
	shared bool
}

var (
	sharedMu sync.Mutex
	shared   *Cluster
)

// Shared returns the process-wide mock cluster, starting it on first use. It
// is safe for concurrent callers, which all get the same *Cluster. If
// starting fails the error is returned and the next call tries again, so a
// transient failure (say, descriptor exhaustion) is not remembered forever.
//
// The shared cluster is never closed; it lives until the process exits.
func Shared() (*Cluster, error) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		c, err := New()
		if err != nil {
			return nil, err
		}
		c.shared = true
		shared = c
	}
	return shared, nil
}

// New starts an isolated mock cluster, independent of the shared one. The
// caller owns it and should Close it. Most code wants Shared; New exists for
// tests that need a clean cluster.
func New() (*Cluster, error) {
	kc, err := kfake.NewCluster(
		// One broker, like the single-node Kafka used by the integration
		// tests: fewer connections and goroutines per client, and sarama
		// still performs its normal metadata/coordinator discovery.
		kfake.NumBrokers(1),
		// No Ports option: kfake then binds ephemeral ports, and it always
		// binds 127.0.0.1, so the cluster is unreachable from other hosts.
		kfake.ClusterID(ClusterID),
		// Like a default Kafka broker (auto.create.topics.enable=true), a
		// producer or consumer may name a topic nobody created yet; in mock
		// mode that should just work rather than fail on a missing topic.
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(DefaultPartitions),
		kfake.GroupMinSessionTimeout(minSessionTimeout),
	)
	if err != nil {
		return nil, fmt.Errorf("mockbroker: start kfake cluster: %w", err)
	}
	return &Cluster{kc: kc, addrs: kc.ListenAddrs()}, nil
}

// Addrs returns the cluster's bootstrap addresses (host:port on 127.0.0.1).
// The caller may modify the returned slice.
func (c *Cluster) Addrs() []string {
	return slices.Clone(c.addrs)
}

// Close shuts down a cluster made by New. On the shared cluster it does
// nothing: other clients in the process still depend on it.
func (c *Cluster) Close() {
	if c.shared {
		return
	}
	c.kc.Close()
}

// EnsureTopic creates topic name on the shared cluster with the given number
// of partitions (non-positive means DefaultPartitions). See
// (*Cluster).EnsureTopic.
func EnsureTopic(ctx context.Context, name string, partitions int32) error {
	c, err := Shared()
	if err != nil {
		return err
	}
	return c.EnsureTopic(ctx, name, partitions)
}

// EnsureTopic creates topic name with the given number of partitions
// (non-positive means DefaultPartitions). It is idempotent: if the topic
// already exists it returns nil and leaves the topic as it is, even if its
// partition count differs.
//
// It goes through sarama's ClusterAdmin, the same client code the rest of
// Prosody uses, rather than a kfake back door. Cancelling ctx closes the
// admin client, which aborts any request in flight.
func (c *Cluster) EnsureTopic(ctx context.Context, name string, partitions int32) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mockbroker: create topic %q: %w", name, err)
	}
	if partitions <= 0 {
		partitions = DefaultPartitions
	}

	admin, err := sarama.NewClusterAdmin(c.addrs, adminConfig(ctx))
	if err != nil {
		return fmt.Errorf("mockbroker: create topic %q: connect admin: %w", name, err)
	}
	var closeOnce sync.Once
	closeAdmin := func() { closeOnce.Do(func() { _ = admin.Close() }) }
	defer closeAdmin()
	stop := context.AfterFunc(ctx, closeAdmin)
	defer stop()

	err = admin.CreateTopic(name, &sarama.TopicDetail{
		NumPartitions: partitions,
		// -1 lets the broker pick its default (CreateTopics v4+, KIP-464);
		// with one broker that is 1.
		ReplicationFactor: -1,
	}, false)
	if ctxErr := ctx.Err(); ctxErr != nil {
		// The admin was closed under the request; report the cause,
		// not the resulting connection error.
		return fmt.Errorf("mockbroker: create topic %q: %w", name, ctxErr)
	}
	if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		return fmt.Errorf("mockbroker: create topic %q: %w", name, err)
	}
	return nil
}

// adminConfig is a sarama config for one short-lived admin client. If ctx has
// a deadline the network and admin timeouts are capped to it, so a call
// cannot outlive its context even inside a single blocking request.
func adminConfig(ctx context.Context) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = KafkaVersion
	cfg.ClientID = "prosody-mockbroker"
	if deadline, ok := ctx.Deadline(); ok {
		if d := time.Until(deadline); d > 0 {
			cfg.Net.DialTimeout = min(cfg.Net.DialTimeout, d)
			cfg.Net.ReadTimeout = min(cfg.Net.ReadTimeout, d)
			cfg.Net.WriteTimeout = min(cfg.Net.WriteTimeout, d)
			cfg.Admin.Timeout = min(cfg.Admin.Timeout, d)
		}
	}
	return cfg
}
