package config

import (
	"errors"
	"fmt"
)

// errorList collects option errors, naming the environment variable when the
// offending value came from one.
type errorList struct {
	envVars map[string]string
	errs    []error
}

func (l *errorList) add(option, message string) {
	l.errs = append(l.errs, &OptionError{Option: option, EnvVar: l.envVars[option], Message: message})
}

// Validate checks every option and the rules between them. It returns nil or
// the errors.Join of one *OptionError per problem. It runs in mock mode too.
// Load and FromJSON call it; call it again after changing a Config by hand.
func (c *Config) Validate() error {
	return errors.Join(c.validate()...)
}

func (c *Config) validate() []error {
	errs := &errorList{envVars: c.envVars}
	checkOptions(configOptions, c, errs)

	if c.DeferMaxDelay < c.DeferBase {
		errs.add("defer_max_delay", fmt.Sprintf("must be at least defer_base (%s), got %s",
			FormatDuration(c.DeferBase), FormatDuration(c.DeferMaxDelay)))
	}
	if c.MaxRetryDelay < c.RetryBase {
		errs.add("max_retry_delay", fmt.Sprintf("must be at least retry_base (%s), got %s",
			FormatDuration(c.RetryBase), FormatDuration(c.MaxRetryDelay)))
	}
	if c.CassandraRack != "" && c.CassandraDatacenter == "" {
		errs.add("cassandra_rack", fmt.Sprintf("needs cassandra_datacenter to be set too, got %q", c.CassandraRack))
	}
	// The next rules only concern clients that consume: a producer-only
	// client neither dead-letters nor stores timers.
	if c.ConsumerConfigured() {
		if c.Mode == ModeLowLatency && c.FailureTopic == "" {
			errs.add("failure_topic", `must be set in low-latency mode, got ""`)
		}
		if !c.Mock && len(c.CassandraNodes) == 0 {
			errs.add("cassandra_nodes", "must list at least one node unless mock is enabled, got []")
		}
	}
	validateSecurity(c, errs)
	validateState(c, errs)
	return errs.errs
}

// ValidateConsumer reports what a client still lacks before it can
// subscribe: a group id and at least one topic.
func (c *Config) ValidateConsumer() error {
	errs := &errorList{envVars: c.envVars}
	if c.GroupID == "" {
		errs.add("group_id", `must be set to consume, got ""`)
	}
	if len(c.SubscribedTopics) == 0 {
		errs.add("subscribed_topics", "must list at least one topic to consume, got []")
	}
	return errors.Join(errs.errs...)
}

// ValidateProducer reports whether a client can send: every sent message
// carries a source system, which defaults to the group id.
func (c *Config) ValidateProducer() error {
	if c.SourceSystemOrGroup() == "" {
		errs := &errorList{envVars: c.envVars}
		errs.add("source_system", `must be set to send (or set group_id, its default), got ""`)
		return errors.Join(errs.errs...)
	}
	return nil
}

// checkOptions applies the per-option rules of a table.
func checkOptions[C any](opts []option[C], c *C, errs *errorList) {
	for _, o := range opts {
		if msg := o.check(c); msg != "" {
			errs.add(o.name, msg)
		}
	}
}
