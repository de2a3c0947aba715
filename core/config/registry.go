package config

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prosody-events/prosody-go/core/secret"
)

// maxTTL is the longest TTL Cassandra accepts: 20 years in seconds.
const maxTTL = 630_720_000 * time.Second

// configOptions is the table of every Config option. Loading (env.go,
// json.go), Default and the per-option part of validation all walk it; rules
// that involve several options live in validate.go and state.go.
//
// Adding an option: add the Config field, a row here and a row in the
// per-option test table (TestEveryOption); a guard test fails otherwise.
var configOptions = []option[Config]{
	// Core.
	opt("bootstrap_servers", "PROSODY_BOOTSTRAP_SERVERS", func(c *Config) *[]string { return &c.BootstrapServers }, listKind, nil,
		atLeastOneEntry("server"), noEmptyEntries),
	opt("group_id", "PROSODY_GROUP_ID", func(c *Config) *string { return &c.GroupID }, stringKind, ""),
	opt("subscribed_topics", "PROSODY_SUBSCRIBED_TOPICS", func(c *Config) *[]string { return &c.SubscribedTopics }, listKind, nil,
		noEmptyEntries, validTopicPatterns, topicNames),
	opt("allowed_events", "PROSODY_ALLOWED_EVENTS", func(c *Config) *[]string { return &c.AllowedEvents }, prefixListKind, nil,
		notExplicitlyEmpty),
	opt("source_system", "PROSODY_SOURCE_SYSTEM", func(c *Config) *string { return &c.SourceSystem }, stringKind, ""),
	opt("mock", "PROSODY_MOCK", func(c *Config) *bool { return &c.Mock }, boolKind, false),
	jsonOnly(opt("mode", "", func(c *Config) *Mode { return &c.Mode }, enumKind[Mode](), ModePipeline,
		oneOf(ModePipeline, ModeLowLatency, ModeBestEffort))),

	// Kafka security (librdkafka's names). Rules between them are in
	// security.go.
	opt("security_protocol", "PROSODY_SECURITY_PROTOCOL", func(c *Config) *SecurityProtocol { return &c.SecurityProtocol }, caseFoldEnum[SecurityProtocol](strings.ToLower), ProtocolPlaintext,
		oneOf(ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL)),
	opt("sasl_mechanism", "PROSODY_SASL_MECHANISM", func(c *Config) *SASLMechanism { return &c.SaslMechanism }, caseFoldEnum[SASLMechanism](strings.ToUpper), "",
		unsetOr(oneOf(MechanismPlain, MechanismScramSHA256, MechanismScramSHA512, MechanismOAuthBearer))),
	opt("sasl_username", "PROSODY_SASL_USERNAME", func(c *Config) *string { return &c.SaslUsername }, stringKind, ""),
	secretOpt("sasl_password", "PROSODY_SASL_PASSWORD", func(c *Config) *secret.Secret { return &c.SaslPassword }),
	opt("sasl_oauthbearer_token_file", "PROSODY_SASL_OAUTHBEARER_TOKEN_FILE", func(c *Config) *string { return &c.SaslOauthbearerTokenFile }, stringKind, ""),
	opt("ssl_ca_location", "PROSODY_SSL_CA_LOCATION", func(c *Config) *string { return &c.SslCaLocation }, stringKind, ""),
	opt("ssl_certificate_location", "PROSODY_SSL_CERTIFICATE_LOCATION", func(c *Config) *string { return &c.SslCertificateLocation }, stringKind, ""),
	opt("ssl_key_location", "PROSODY_SSL_KEY_LOCATION", func(c *Config) *string { return &c.SslKeyLocation }, stringKind, ""),
	opt("ssl_server_name", "PROSODY_SSL_SERVER_NAME", func(c *Config) *string { return &c.SslServerName }, stringKind, ""),
	opt("enable_ssl_certificate_verification", "PROSODY_ENABLE_SSL_CERTIFICATE_VERIFICATION", func(c *Config) *bool { return &c.EnableSslCertificateVerification }, boolKind, true),

	// Consumer.
	opt("max_concurrency", "PROSODY_MAX_CONCURRENCY", func(c *Config) *int { return &c.MaxConcurrency }, intKind, 32,
		atLeast(1)),
	// The uncommitted limit also sizes queues whose capacity is 16-bit in
	// the original.
	opt("max_uncommitted", "PROSODY_MAX_UNCOMMITTED", func(c *Config) *int { return &c.MaxUncommitted }, intKind, 64,
		within(1, 65535)),
	opt("commit_interval", "PROSODY_COMMIT_INTERVAL", func(c *Config) *time.Duration { return &c.CommitInterval }, durationKind, time.Second,
		positive),
	opt("poll_interval", "PROSODY_POLL_INTERVAL", func(c *Config) *time.Duration { return &c.PollInterval }, durationKind, 100*time.Millisecond,
		positive),
	opt("shutdown_timeout", "PROSODY_SHUTDOWN_TIMEOUT", func(c *Config) *time.Duration { return &c.ShutdownTimeout }, durationKind, 30*time.Second,
		positive),
	opt("stall_threshold", "PROSODY_STALL_THRESHOLD", func(c *Config) *time.Duration { return &c.StallThreshold }, durationKind, 5*time.Minute,
		positive),
	opt("timeout", "PROSODY_TIMEOUT", func(c *Config) *Optional[time.Duration] { return &c.Timeout }, optionalKind(durationKind, false), None[time.Duration](),
		whenSet(positive)),
	// JSON null disables the probe server here, unlike for other options
	// where null means "not given".
	opt("probe_port", "PROSODY_PROBE_PORT", func(c *Config) *Optional[int] { return &c.ProbePort }, optionalKind(intKind, true), Some(8000),
		whenSet(within(0, 65535))),
	opt("failure_topic", "PROSODY_FAILURE_TOPIC", func(c *Config) *string { return &c.FailureTopic }, stringKind, "",
		topicName),
	opt("idempotence_cache_size", "PROSODY_IDEMPOTENCE_CACHE_SIZE", func(c *Config) *int { return &c.IdempotenceCacheSize }, intKind, 8192,
		atLeast(0)),
	opt("idempotence_version", "PROSODY_IDEMPOTENCE_VERSION", func(c *Config) *string { return &c.IdempotenceVersion }, stringKind, "1"),
	opt("idempotence_ttl", "PROSODY_IDEMPOTENCE_TTL", func(c *Config) *time.Duration { return &c.IdempotenceTTL }, durationKind, 7*day,
		durationWithin(time.Minute, maxTTL)),
	// Slab ids are computed from whole seconds, so a slab shorter than a
	// second would put every timer in slab 0.
	opt("slab_size", "PROSODY_SLAB_SIZE", func(c *Config) *time.Duration { return &c.SlabSize }, durationKind, time.Hour,
		atLeastDuration(time.Second)),
	opt("message_spans", "PROSODY_MESSAGE_SPANS", func(c *Config) *SpanLinking { return &c.MessageSpans }, enumKind[SpanLinking](), SpanChild,
		oneOf(SpanChild, SpanFollowsFrom)),
	opt("timer_spans", "PROSODY_TIMER_SPANS", func(c *Config) *SpanLinking { return &c.TimerSpans }, enumKind[SpanLinking](), SpanFollowsFrom,
		oneOf(SpanChild, SpanFollowsFrom)),

	// Producer.
	opt("send_timeout", "PROSODY_SEND_TIMEOUT", func(c *Config) *Optional[time.Duration] { return &c.SendTimeout }, optionalKind(durationKind, false), Some(time.Second),
		whenSet(positive)),

	// Retry.
	opt("max_retries", "PROSODY_MAX_RETRIES", func(c *Config) *int { return &c.MaxRetries }, intKind, 3,
		within(0, 4294967295)),
	opt("retry_base", "PROSODY_RETRY_BASE", func(c *Config) *time.Duration { return &c.RetryBase }, durationKind, 20*time.Millisecond,
		positive),
	opt("max_retry_delay", "PROSODY_RETRY_MAX_DELAY", func(c *Config) *time.Duration { return &c.MaxRetryDelay }, durationKind, 5*time.Minute,
		positive),

	// Deferral.
	opt("defer_enabled", "PROSODY_DEFER_ENABLED", func(c *Config) *bool { return &c.DeferEnabled }, boolKind, true),
	opt("defer_base", "PROSODY_DEFER_BASE", func(c *Config) *time.Duration { return &c.DeferBase }, durationKind, time.Second,
		atLeastDuration(time.Second)),
	opt("defer_max_delay", "PROSODY_DEFER_MAX_DELAY", func(c *Config) *time.Duration { return &c.DeferMaxDelay }, durationKind, 24*time.Hour,
		positive),
	opt("defer_failure_threshold", "PROSODY_DEFER_FAILURE_THRESHOLD", func(c *Config) *float64 { return &c.DeferFailureThreshold }, floatKind, 0.9,
		fraction),
	opt("defer_failure_window", "PROSODY_DEFER_FAILURE_WINDOW", func(c *Config) *time.Duration { return &c.DeferFailureWindow }, durationKind, 5*time.Minute,
		positive),
	opt("defer_cache_size", "PROSODY_DEFER_CACHE_SIZE", func(c *Config) *int { return &c.DeferCacheSize }, intKind, 1024,
		atLeast(1)),
	opt("defer_store_cache_size", "PROSODY_DEFER_STORE_CACHE_SIZE", func(c *Config) *int { return &c.DeferStoreCacheSize }, intKind, 8192,
		atLeast(1)),
	opt("defer_seek_timeout", "PROSODY_DEFER_SEEK_TIMEOUT", func(c *Config) *time.Duration { return &c.DeferSeekTimeout }, durationKind, 30*time.Second,
		positive),
	opt("defer_discard_threshold", "PROSODY_DEFER_DISCARD_THRESHOLD", func(c *Config) *int { return &c.DeferDiscardThreshold }, intKind, 100,
		atLeast(0)),

	// Monopolization detection.
	opt("monopolization_enabled", "PROSODY_MONOPOLIZATION_ENABLED", func(c *Config) *bool { return &c.MonopolizationEnabled }, boolKind, true),
	opt("monopolization_threshold", "PROSODY_MONOPOLIZATION_THRESHOLD", func(c *Config) *float64 { return &c.MonopolizationThreshold }, floatKind, 0.9,
		fraction),
	opt("monopolization_window", "PROSODY_MONOPOLIZATION_WINDOW", func(c *Config) *time.Duration { return &c.MonopolizationWindow }, durationKind, 5*time.Minute,
		positive),
	opt("monopolization_cache_size", "PROSODY_MONOPOLIZATION_CACHE_SIZE", func(c *Config) *int { return &c.MonopolizationCacheSize }, intKind, 8192,
		atLeast(1)),

	// Fair scheduling.
	opt("scheduler_failure_weight", "PROSODY_SCHEDULER_FAILURE_WEIGHT", func(c *Config) *float64 { return &c.SchedulerFailureWeight }, floatKind, 0.3,
		fraction),
	opt("scheduler_max_wait", "PROSODY_SCHEDULER_MAX_WAIT", func(c *Config) *time.Duration { return &c.SchedulerMaxWait }, durationKind, 2*time.Minute,
		positive),
	opt("scheduler_wait_weight", "PROSODY_SCHEDULER_WAIT_WEIGHT", func(c *Config) *float64 { return &c.SchedulerWaitWeight }, floatKind, 200.0,
		nonNegativeFinite),
	opt("scheduler_cache_size", "PROSODY_SCHEDULER_CACHE_SIZE", func(c *Config) *int { return &c.SchedulerCacheSize }, intKind, 8192,
		atLeast(1)),

	// Telemetry emitter.
	opt("telemetry_enabled", "PROSODY_TELEMETRY_ENABLED", func(c *Config) *bool { return &c.TelemetryEnabled }, boolKind, true),
	opt("telemetry_topic", "PROSODY_TELEMETRY_TOPIC", func(c *Config) *string { return &c.TelemetryTopic }, stringKind, "prosody.telemetry-events",
		notEmpty, topicName),

	// Cassandra.
	opt("cassandra_nodes", "PROSODY_CASSANDRA_NODES", func(c *Config) *[]string { return &c.CassandraNodes }, listKind, nil,
		validHostPorts),
	opt("cassandra_keyspace", "PROSODY_CASSANDRA_KEYSPACE", func(c *Config) *string { return &c.CassandraKeyspace }, stringKind, "prosody",
		validKeyspace),
	opt("cassandra_user", "PROSODY_CASSANDRA_USER", func(c *Config) *string { return &c.CassandraUser }, stringKind, ""),
	secretOpt("cassandra_password", "PROSODY_CASSANDRA_PASSWORD", func(c *Config) *secret.Secret { return &c.CassandraPassword }),
	opt("cassandra_ssl_enabled", "PROSODY_CASSANDRA_SSL_ENABLED", func(c *Config) *bool { return &c.CassandraSslEnabled }, boolKind, false),
	opt("cassandra_ssl_ca_location", "PROSODY_CASSANDRA_SSL_CA_LOCATION", func(c *Config) *string { return &c.CassandraSslCaLocation }, stringKind, ""),
	opt("cassandra_ssl_certificate_location", "PROSODY_CASSANDRA_SSL_CERTIFICATE_LOCATION", func(c *Config) *string { return &c.CassandraSslCertificateLocation }, stringKind, ""),
	opt("cassandra_ssl_key_location", "PROSODY_CASSANDRA_SSL_KEY_LOCATION", func(c *Config) *string { return &c.CassandraSslKeyLocation }, stringKind, ""),
	opt("cassandra_ssl_server_name", "PROSODY_CASSANDRA_SSL_SERVER_NAME", func(c *Config) *string { return &c.CassandraSslServerName }, stringKind, ""),
	opt("cassandra_enable_ssl_certificate_verification", "PROSODY_CASSANDRA_ENABLE_SSL_CERTIFICATE_VERIFICATION", func(c *Config) *bool { return &c.CassandraEnableSslCertificateVerification }, boolKind, true),
	opt("cassandra_datacenter", "PROSODY_CASSANDRA_DATACENTER", func(c *Config) *string { return &c.CassandraDatacenter }, stringKind, ""),
	opt("cassandra_rack", "PROSODY_CASSANDRA_RACK", func(c *Config) *string { return &c.CassandraRack }, stringKind, ""),
	// The original's code default is 365 days; "1y" from the environment
	// is 365.25 days.
	opt("cassandra_retention", "PROSODY_CASSANDRA_RETENTION", func(c *Config) *time.Duration { return &c.CassandraRetention }, durationKind, 365*day,
		positive, durationAtMost(maxTTL)),

	// Keyed state. Their rules have fixed wording shared with the bindings
	// and are checked in state.go.
	jsonOnly(opt("state_collections", "", func(c *Config) *[]StateCollection { return &c.StateCollections }, collectionsKind, nil)),
	opt("state_cache_dir", "PROSODY_STATE_CACHE_DIR", func(c *Config) *Optional[string] { return &c.StateCacheDir }, optionalStringKind, None[string]()),
	opt("state_cache_size_bytes", "PROSODY_STATE_CACHE_SIZE_BYTES", func(c *Config) *Optional[uint64] { return &c.StateCacheSizeBytes }, cacheSizeKind, None[uint64]()),
	opt("state_recovery_delay", "PROSODY_STATE_RECOVERY_DELAY", func(c *Config) *time.Duration { return &c.StateRecoveryDelay }, durationKind, 30*time.Second),
	opt("subsystem", "PROSODY_SUBSYSTEM", func(c *Config) *Optional[string] { return &c.Subsystem }, optionalStringKind, None[string]()),
	opt("state_owned_cache_size", "PROSODY_STATE_OWNED_CACHE_SIZE", func(c *Config) *Optional[uint64] { return &c.StateOwnedCacheSize }, byteSizeKind, None[uint64]()),
	opt("state_read_cache_size", "PROSODY_STATE_READ_CACHE_SIZE", func(c *Config) *Optional[uint64] { return &c.StateReadCacheSize }, byteSizeKind, None[uint64]()),
	opt("state_read_cache_ttl", "PROSODY_STATE_READ_CACHE_TTL", func(c *Config) *Optional[time.Duration] { return &c.StateReadCacheTTL }, optionalKind(durationKind, false), Some(5*time.Second)),

	// Logging: environment only. The directive syntax belongs to the
	// logging setup; here we only refuse an empty filter.
	envOnly(opt("log", "PROSODY_LOG", func(c *Config) *string { return &c.Log }, stringKind, "info",
		notEmpty)),
}

// ---- rules specific to Config options ----

func oneOf[T ~string](allowed ...T) rule[T] {
	quoted := make([]string, len(allowed))
	for i, a := range allowed {
		quoted[i] = strconv.Quote(string(a))
	}
	text := "must be " + strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
	values := make([]string, len(allowed))
	for i, a := range allowed {
		values[i] = string(a)
	}
	return ruleOf(func(v T) string {
		for _, a := range allowed {
			if v == a {
				return ""
			}
		}
		return text
	}, map[string]any{"values": values})
}

// unsetOr applies r only when the value is not "".
func unsetOr[T ~string](r rule[T]) rule[T] {
	return ruleOf(func(v T) string {
		if v == "" {
			return ""
		}
		return r.check(v)
	}, r.facts)
}

func atLeastOneEntry(what string) rule[[]string] {
	return ruleOf(func(items []string) string {
		if len(items) == 0 {
			return "must list at least one " + what
		}
		return ""
	}, map[string]any{"rule": "at least one " + what})
}

// notExplicitlyEmpty rejects an empty, non-nil list: leaving the option unset
// is how one allows everything.
var notExplicitlyEmpty = ruleOf(isNotExplicitlyEmpty, map[string]any{"rule": "not an empty list (leave it unset to allow every event)"})

func isNotExplicitlyEmpty(items []string) string {
	if items != nil && len(items) == 0 {
		return "must not be an empty list (leave it unset to allow every event)"
	}
	return ""
}

func durationWithin(lo, hi time.Duration) rule[time.Duration] {
	return ruleOf(func(d time.Duration) string {
		if d < lo || d > hi {
			return fmt.Sprintf("must be within [%s, %s]", FormatDuration(lo), durationSeconds(hi))
		}
		return ""
	}, map[string]any{"min": lo.Seconds(), "max": hi.Seconds()})
}

func durationAtMost(max time.Duration) rule[time.Duration] {
	return ruleOf(func(d time.Duration) string {
		if d > max {
			return "must be at most " + durationSeconds(max)
		}
		return ""
	}, map[string]any{"max": max.Seconds()})
}

// durationSeconds prints a limit the way the original documents it.
func durationSeconds(d time.Duration) string {
	return strconv.FormatInt(int64(d/time.Second), 10) + "s"
}

// validTopicPatterns compiles every regex subscription (an entry starting
// with "^") so that a typo fails at startup rather than at subscribe time.
var validTopicPatterns = ruleOf(isValidTopicPatterns, map[string]any{"rule": "entries starting with ^ are regular expressions"})

func isValidTopicPatterns(topics []string) string {
	for _, t := range topics {
		if strings.HasPrefix(t, "^") {
			if _, err := regexp.Compile(t); err != nil {
				return fmt.Sprintf("entry %q must be a valid regular expression (%v)", t, err)
			}
		}
	}
	return ""
}

// validHostPorts accepts "host", "host:port", "[v6]:port" and a bare IPv6
// address, with a port in 1..65535.
var validHostPorts = ruleOf(isValidHostPorts, map[string]any{"rule": "host or host:port entries"})

func isValidHostPorts(nodes []string) string {
	for _, n := range nodes {
		host, port := n, ""
		if strings.HasPrefix(n, "[") || strings.Count(n, ":") == 1 {
			var err error
			if host, port, err = net.SplitHostPort(n); err != nil {
				return fmt.Sprintf("entry %q must be host or host:port", n)
			}
		}
		if host == "" || strings.ContainsAny(host, " \t/") {
			return fmt.Sprintf("entry %q must be host or host:port", n)
		}
		if port != "" {
			if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
				return fmt.Sprintf("entry %q must have a port in 1..65535", n)
			}
		}
	}
	return ""
}

var keyspacePattern = regexp.MustCompile(`^[A-Za-z0-9_]{1,48}$`)

// validKeyspace applies Cassandra's own naming rule, so that a bad name is
// reported here instead of by the keyspace creation at startup.
var validKeyspace = ruleOf(isValidKeyspace, map[string]any{"rule": "1 to 48 letters, digits or underscores"})

func isValidKeyspace(s string) string {
	if !keyspacePattern.MatchString(s) {
		return "must be 1 to 48 letters, digits or underscores"
	}
	return ""
}
