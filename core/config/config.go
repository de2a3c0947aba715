package config

import (
	"time"

	"github.com/prosody-events/prosody-go/core/secret"
)

// Mode selects how failed work is handled.
type Mode string

const (
	// ModePipeline retries transient failures until they succeed, keeping
	// per-key order. It is the default. A failing key is deferred (parked
	// durably and retried with backoff, so it does not hold its partition)
	// unless deferral is off or most recent calls fail.
	ModePipeline Mode = "pipeline"
	// ModeLowLatency retries briefly and then writes failures to the
	// failure topic.
	ModeLowLatency Mode = "low-latency"
	// ModeBestEffort makes one attempt and moves on.
	ModeBestEffort Mode = "best-effort"
)

// SpanLinking says how a processing span relates to the trace context the
// work carried.
type SpanLinking string

const (
	// SpanChild makes the span a child in the same trace.
	SpanChild SpanLinking = "child"
	// SpanFollowsFrom starts a new trace that links to the carried one.
	SpanFollowsFrom SpanLinking = "follows_from"
)

// Config is a complete, resolved client configuration. Build one with Load
// or FromJSON; Default returns the built-in defaults only.
//
// Every field corresponds to one option of the option table (registry.go);
// the comment gives its JSON name, environment variable and default.
type Config struct {
	// Core.

	BootstrapServers []string // bootstrap_servers, PROSODY_BOOTSTRAP_SERVERS; at least one
	GroupID          string   // group_id, PROSODY_GROUP_ID; "" for a producer-only client
	SubscribedTopics []string // subscribed_topics, PROSODY_SUBSCRIBED_TOPICS; "^" starts a regex
	// AllowedEvents lists event-type prefixes (allowed_events,
	// PROSODY_ALLOWED_EVENTS). Nil lets every event through.
	AllowedEvents []string
	SourceSystem  string // source_system, PROSODY_SOURCE_SYSTEM; "" means the group id
	Mock          bool   // mock, PROSODY_MOCK; false
	Mode          Mode   // mode (no variable); pipeline

	// Kafka security, with librdkafka's names (security.go has the rules
	// between them). Every connection the client opens (consumer group,
	// fetches, deferred-message loads, producer, admin, topic checks) uses
	// them.

	SecurityProtocol SecurityProtocol // security_protocol, PROSODY_SECURITY_PROTOCOL; plaintext
	SaslMechanism    SASLMechanism    // sasl_mechanism, PROSODY_SASL_MECHANISM; required with a sasl_* protocol
	SaslUsername     string           // sasl_username, PROSODY_SASL_USERNAME
	SaslPassword     secret.Secret    // sasl_password, PROSODY_SASL_PASSWORD; prints redacted
	// SaslOauthbearerTokenFile holds the OAUTHBEARER token
	// (sasl_oauthbearer_token_file, PROSODY_SASL_OAUTHBEARER_TOKEN_FILE);
	// it is read at every authentication, so a sidecar can refresh it.
	SaslOauthbearerTokenFile string
	SslCaLocation            string // ssl_ca_location, PROSODY_SSL_CA_LOCATION; PEM CA bundle, "" for the system roots
	SslCertificateLocation   string // ssl_certificate_location, PROSODY_SSL_CERTIFICATE_LOCATION; PEM client certificate (mutual TLS)
	SslKeyLocation           string // ssl_key_location, PROSODY_SSL_KEY_LOCATION; PEM private key of that certificate
	SslServerName            string // ssl_server_name, PROSODY_SSL_SERVER_NAME; overrides the name verified, "" for the broker's host
	// EnableSslCertificateVerification (enable_ssl_certificate_verification,
	// PROSODY_ENABLE_SSL_CERTIFICATE_VERIFICATION; true): false accepts any
	// broker certificate, for development only.
	EnableSslCertificateVerification bool

	// Consumer.

	MaxConcurrency int           // max_concurrency, PROSODY_MAX_CONCURRENCY; 32
	MaxUncommitted int           // max_uncommitted, PROSODY_MAX_UNCOMMITTED; 64
	CommitInterval time.Duration // commit_interval, PROSODY_COMMIT_INTERVAL; 1s
	PollInterval   time.Duration // poll_interval, PROSODY_POLL_INTERVAL; 100ms
	// ShutdownTimeout is the drain budget per revoked partition
	// (shutdown_timeout, PROSODY_SHUTDOWN_TIMEOUT; 30s).
	ShutdownTimeout time.Duration
	StallThreshold  time.Duration // stall_threshold, PROSODY_STALL_THRESHOLD; 5m
	// Timeout is the handler deadline (timeout, PROSODY_TIMEOUT). Unset means
	// 4/5 of StallThreshold; use HandlerTimeout to read the effective value.
	Timeout Optional[time.Duration]
	// ProbePort is the port of the health probe server (probe_port,
	// PROSODY_PROBE_PORT; 8000). Absent disables the server; 0 lets the
	// operating system pick a free port.
	ProbePort    Optional[int]
	FailureTopic string // failure_topic, PROSODY_FAILURE_TOPIC; required in low-latency mode
	// IdempotenceCacheSize sizes the producer's event-id cache, which
	// skips a resend of a (topic, key, id) already delivered, and the
	// consumer's cache of handled message ids in front of the
	// deduplication store (pipeline mode) (idempotence_cache_size,
	// PROSODY_IDEMPOTENCE_CACHE_SIZE; 8192); 0 turns both off.
	IdempotenceCacheSize int
	IdempotenceVersion   string        // idempotence_version, PROSODY_IDEMPOTENCE_VERSION; "1"
	IdempotenceTTL       time.Duration // idempotence_ttl, PROSODY_IDEMPOTENCE_TTL; 7d
	SlabSize             time.Duration // slab_size, PROSODY_SLAB_SIZE; 1h
	MessageSpans         SpanLinking   // message_spans, PROSODY_MESSAGE_SPANS; child
	TimerSpans           SpanLinking   // timer_spans, PROSODY_TIMER_SPANS; follows_from

	// Producer.

	// SendTimeout bounds a whole send (send_timeout, PROSODY_SEND_TIMEOUT;
	// 1s). Absent means no bound.
	SendTimeout Optional[time.Duration]

	// Retry.

	MaxRetries    int           // max_retries, PROSODY_MAX_RETRIES; 3
	RetryBase     time.Duration // retry_base, PROSODY_RETRY_BASE; 20ms
	MaxRetryDelay time.Duration // max_retry_delay, PROSODY_RETRY_MAX_DELAY; 5m

	// Deferral (pipeline mode; core/deferral and the defer layers of
	// core/middleware). The enabled flag and the failure-rate gate decide
	// only a key's first deferral; a key deferred earlier drains either
	// way. defer_cache_size counts the loader's recently read records;
	// defer_seek_timeout bounds one point read of a deferred message;
	// defer_discard_threshold is how far apart two loads of a partition
	// may be and share a read.

	DeferEnabled          bool          // defer_enabled, PROSODY_DEFER_ENABLED; true
	DeferBase             time.Duration // defer_base, PROSODY_DEFER_BASE; 1s
	DeferMaxDelay         time.Duration // defer_max_delay, PROSODY_DEFER_MAX_DELAY; 24h
	DeferFailureThreshold float64       // defer_failure_threshold, PROSODY_DEFER_FAILURE_THRESHOLD; 0.9
	DeferFailureWindow    time.Duration // defer_failure_window, PROSODY_DEFER_FAILURE_WINDOW; 5m
	DeferCacheSize        int           // defer_cache_size, PROSODY_DEFER_CACHE_SIZE; 1024
	DeferStoreCacheSize   int           // defer_store_cache_size, PROSODY_DEFER_STORE_CACHE_SIZE; 8192
	DeferSeekTimeout      time.Duration // defer_seek_timeout, PROSODY_DEFER_SEEK_TIMEOUT; 30s
	DeferDiscardThreshold int           // defer_discard_threshold, PROSODY_DEFER_DISCARD_THRESHOLD; 100

	// Monopolization detection (pipeline mode; core/monopolization). The
	// cache is a table of the next power of two of slots at or above the
	// size, one key a slot.

	MonopolizationEnabled   bool          // monopolization_enabled, PROSODY_MONOPOLIZATION_ENABLED; true
	MonopolizationThreshold float64       // monopolization_threshold, PROSODY_MONOPOLIZATION_THRESHOLD; 0.9
	MonopolizationWindow    time.Duration // monopolization_window, PROSODY_MONOPOLIZATION_WINDOW; 5m
	MonopolizationCacheSize int           // monopolization_cache_size, PROSODY_MONOPOLIZATION_CACHE_SIZE; 8192

	// Fair scheduling.

	SchedulerFailureWeight float64       // scheduler_failure_weight, PROSODY_SCHEDULER_FAILURE_WEIGHT; 0.3
	SchedulerMaxWait       time.Duration // scheduler_max_wait, PROSODY_SCHEDULER_MAX_WAIT; 2m
	SchedulerWaitWeight    float64       // scheduler_wait_weight, PROSODY_SCHEDULER_WAIT_WEIGHT; 200
	SchedulerCacheSize     int           // scheduler_cache_size, PROSODY_SCHEDULER_CACHE_SIZE; 8192

	// Telemetry emitter. It never runs in mock mode.

	TelemetryEnabled bool   // telemetry_enabled, PROSODY_TELEMETRY_ENABLED; true
	TelemetryTopic   string // telemetry_topic, PROSODY_TELEMETRY_TOPIC; prosody.telemetry-events

	// Cassandra.

	CassandraNodes      []string      // cassandra_nodes, PROSODY_CASSANDRA_NODES; "host" or "host:port"
	CassandraKeyspace   string        // cassandra_keyspace, PROSODY_CASSANDRA_KEYSPACE; prosody
	CassandraUser       string        // cassandra_user, PROSODY_CASSANDRA_USER
	CassandraPassword   secret.Secret // cassandra_password, PROSODY_CASSANDRA_PASSWORD; prints redacted
	CassandraDatacenter string        // cassandra_datacenter, PROSODY_CASSANDRA_DATACENTER
	CassandraRack       string        // cassandra_rack, PROSODY_CASSANDRA_RACK; needs a datacenter
	CassandraRetention  time.Duration // cassandra_retention, PROSODY_CASSANDRA_RETENTION; 365 days
	// Cassandra TLS: the Kafka TLS options with a cassandra_ prefix, used
	// only when CassandraSslEnabled is set.
	CassandraSslEnabled                       bool   // cassandra_ssl_enabled, PROSODY_CASSANDRA_SSL_ENABLED; false
	CassandraSslCaLocation                    string // cassandra_ssl_ca_location, PROSODY_CASSANDRA_SSL_CA_LOCATION
	CassandraSslCertificateLocation           string // cassandra_ssl_certificate_location, PROSODY_CASSANDRA_SSL_CERTIFICATE_LOCATION
	CassandraSslKeyLocation                   string // cassandra_ssl_key_location, PROSODY_CASSANDRA_SSL_KEY_LOCATION
	CassandraSslServerName                    string // cassandra_ssl_server_name, PROSODY_CASSANDRA_SSL_SERVER_NAME; overrides the name verified, "" for each node's address
	CassandraEnableSslCertificateVerification bool   // cassandra_enable_ssl_certificate_verification, PROSODY_CASSANDRA_ENABLE_SSL_CERTIFICATE_VERIFICATION; true

	// Keyed state.

	StateCollections []StateCollection // state_collections (JSON and Go only)
	// StateCacheDir is the local keyed-state workspace (state_cache_dir,
	// PROSODY_STATE_CACHE_DIR). Absent means a temporary directory per client.
	StateCacheDir Optional[string]
	// StateCacheSizeBytes sizes the in-memory keyed-state cache
	// (state_cache_size_bytes, PROSODY_STATE_CACHE_SIZE_BYTES). Absent means
	// the storage engine's default.
	StateCacheSizeBytes Optional[uint64]
	StateRecoveryDelay  time.Duration // state_recovery_delay, PROSODY_STATE_RECOVERY_DELAY; 30s
	// Subsystem names the service that publishes this client's published
	// collections (subsystem, PROSODY_SUBSYSTEM); required when one is.
	Subsystem Optional[string]
	// StateOwnedCacheSize sizes the keyed-state cache in bytes
	// (state_owned_cache_size, PROSODY_STATE_OWNED_CACHE_SIZE, a size such
	// as "64 MiB"); it wins over StateCacheSizeBytes.
	StateOwnedCacheSize Optional[uint64]
	// StateReadCacheSize sizes the published readers' cache
	// (state_read_cache_size, PROSODY_STATE_READ_CACHE_SIZE); absent: the
	// owned cache's size if that is set, else 1 MiB.
	StateReadCacheSize Optional[uint64]
	// StateReadCacheTTL is how stale a reader's cached answer may be
	// (state_read_cache_ttl, PROSODY_STATE_READ_CACHE_TTL); "none" turns
	// the cache off. 5s.
	StateReadCacheTTL Optional[time.Duration]

	// Logging.

	Log string // PROSODY_LOG only; the log filter directive, "info"

	// envVars remembers which options took their value from the environment,
	// so that validation errors can name the variable.
	envVars map[string]string
}

// Default returns the built-in defaults, without reading the environment.
// It does not validate: bootstrap_servers has no default.
func Default() Config {
	var c Config
	for _, o := range configOptions {
		o.reset(&c)
	}
	return c
}

// HandlerTimeout returns the handler deadline: Timeout if set, otherwise
// four fifths of StallThreshold, so that a slow handler is cancelled before
// the liveness probe reports a stall.
func (c *Config) HandlerTimeout() time.Duration {
	if t, ok := c.Timeout.Get(); ok {
		return t
	}
	return c.StallThreshold * 4 / 5
}

// SourceSystemOrGroup returns the value written to the source-system header
// of sent messages: SourceSystem, or the group id when that is unset.
func (c *Config) SourceSystemOrGroup() string {
	if c.SourceSystem != "" {
		return c.SourceSystem
	}
	return c.GroupID
}

// ConsumerConfigured reports whether the configuration describes a consumer:
// a group id and at least one topic. A producer-only client has neither.
func (c *Config) ConsumerConfigured() bool {
	return c.GroupID != "" && len(c.SubscribedTopics) > 0
}
