package client

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/mockbroker"
)

// checkTopics fails when a subscribed topic (regex subscriptions aside) or,
// in low-latency mode, the failure topic does not exist. Subscribing to a
// missing topic would otherwise wait silently, or, on a broker that creates
// topics on first use, create it with the broker's defaults.
func (c *Client) checkTopics() error {
	want := map[string]string{}
	for _, t := range c.cfg.SubscribedTopics {
		if !strings.HasPrefix(t, "^") {
			want[t] = "subscribed_topics"
		}
	}
	if c.cfg.Mode == config.ModeLowLatency && c.cfg.FailureTopic != "" {
		want[c.cfg.FailureTopic] = "failure_topic"
	}
	if len(want) == 0 {
		return nil
	}
	sc := sarama.NewConfig()
	sc.Version = mockbroker.KafkaVersion
	sc.Metadata.AllowAutoTopicCreation = false
	sc.Net.DialTimeout = 10 * time.Second
	client, err := sarama.NewClient(c.cfg.BootstrapServers, sc)
	if err != nil {
		return fmt.Errorf("bootstrap_servers: cannot reach Kafka at %v: %w", c.cfg.BootstrapServers, err)
	}
	defer client.Close()
	existing, err := client.Topics()
	if err != nil {
		return fmt.Errorf("listing topics: %w", err)
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

// resolveTopics expands regex subscriptions (entries starting with "^")
// into the existing topics they match; plain names pass through. The match
// happens at subscribe time: a topic created later that matches a pattern
// is picked up by the next subscribe.
func (c *Client) resolveTopics() ([]string, error) {
	var patterns []*regexp.Regexp
	var topics []string
	for _, t := range c.cfg.SubscribedTopics {
		if !strings.HasPrefix(t, "^") {
			topics = append(topics, t)
			continue
		}
		re, err := regexp.Compile(t)
		if err != nil {
			return nil, fmt.Errorf("subscribed_topics: invalid pattern %q: %w", t, err)
		}
		patterns = append(patterns, re)
	}
	if len(patterns) == 0 {
		return topics, nil
	}
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
	client, err := sarama.NewClient(brokers, sc)
	if err != nil {
		return nil, fmt.Errorf("listing topics for subscribed_topics patterns: %w", err)
	}
	defer client.Close()
	existing, err := client.Topics()
	if err != nil {
		return nil, fmt.Errorf("listing topics for subscribed_topics patterns: %w", err)
	}
	seen := map[string]bool{}
	for _, t := range topics {
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
