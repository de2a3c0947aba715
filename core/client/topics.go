package client

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/kafkasec"
	"github.com/prosody-events/prosody-go/core/mockbroker"
)

// subscriptionTopics returns the topics to consume. Outside mock mode it
// fails, naming them, when a subscribed topic or (in low-latency mode) the
// failure topic does not exist: subscribing to a missing topic would
// otherwise wait silently, or, on a broker that creates topics on first use,
// create it with the broker's defaults. Regex subscriptions (entries
// starting with "^") expand to the existing topics they match; a topic
// created later that matches is picked up by the next subscribe. The
// broker's topics are listed once, and only when one of these needs them.
func (c *Client) subscriptionTopics() ([]string, error) {
	var plain []string
	var patterns []*regexp.Regexp
	for _, t := range c.cfg.SubscribedTopics {
		if !strings.HasPrefix(t, "^") {
			plain = append(plain, t)
			continue
		}
		re, err := regexp.Compile(t)
		if err != nil {
			return nil, fmt.Errorf("subscribed_topics: invalid pattern %q: %w", t, err)
		}
		patterns = append(patterns, re)
	}
	if c.cfg.Mock && len(patterns) == 0 {
		return plain, nil // mock topics are created on subscribe
	}
	existing, err := c.listTopics()
	if err != nil {
		return nil, err
	}
	if !c.cfg.Mock {
		if err := c.requireTopics(plain, existing); err != nil {
			return nil, err
		}
	}
	topics := plain
	seen := map[string]bool{}
	for _, t := range plain {
		seen[t] = true
	}
	for _, t := range existing {
		if seen[t] || strings.HasPrefix(t, "__") {
			continue
		}
		for _, re := range patterns {
			if re.MatchString(t) {
				topics = append(topics, t)
				seen[t] = true
				break
			}
		}
	}
	if len(topics) == 0 {
		return nil, fmt.Errorf("subscribed_topics: no existing topic matches %v", c.cfg.SubscribedTopics)
	}
	return topics, nil
}

// requireTopics fails when a plain subscribed topic or, in low-latency
// mode, the failure topic is missing from existing.
func (c *Client) requireTopics(plain, existing []string) error {
	want := map[string]string{}
	for _, t := range plain {
		want[t] = "subscribed_topics"
	}
	if c.cfg.Mode == config.ModeLowLatency && c.cfg.FailureTopic != "" {
		want[c.cfg.FailureTopic] = "failure_topic"
	}
	have := map[string]bool{}
	for _, t := range existing {
		have[t] = true
	}
	var missing []string
	for t, option := range want {
		if !have[t] {
			missing = append(missing, fmt.Sprintf("%s (%s)", t, option))
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("topics not found: %s", strings.Join(missing, ", "))
	}
	return nil
}

// listTopics asks the cluster (the mock one in mock mode) for its topics,
// without letting the metadata request create any.
func (c *Client) listTopics() ([]string, error) {
	brokers := c.cfg.BootstrapServers
	if c.cfg.Mock {
		cluster, err := mockbroker.Shared()
		if err != nil {
			return nil, err
		}
		brokers = cluster.Addrs()
	}
	sc := sarama.NewConfig()
	sc.Version = mockbroker.KafkaVersion
	sc.Metadata.AllowAutoTopicCreation = false
	sc.Net.DialTimeout = 10 * time.Second
	security := kafkasec.FromConfig(c.cfg)
	if !c.cfg.Mock {
		if err := security.Apply(sc); err != nil {
			return nil, err
		}
	}
	client, err := sarama.NewClient(brokers, sc)
	if err != nil {
		err = security.Explain(err)
		if kafkasec.IsAuthError(err) {
			return nil, fmt.Errorf("connecting to Kafka at %v: %w", brokers, err)
		}
		return nil, fmt.Errorf("bootstrap_servers: cannot reach Kafka at %v: %w", brokers, err)
	}
	defer client.Close()
	topics, err := client.Topics()
	if err != nil {
		return nil, fmt.Errorf("listing topics: %w", err)
	}
	return topics, nil
}
