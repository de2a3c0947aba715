package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// optionCase describes the tests every option gets.
type optionCase struct {
	name string
	def  any // the default

	env     string // an environment value (unused when the option has no variable)
	envWant any    // what it resolves to

	// explicit overrides the environment value above. It is a JSON literal,
	// or environment syntax for options without a JSON key.
	explicit     string
	explicitWant any

	bad     string // an invalid explicit value (a JSON literal)
	wantErr string // a fragment of the resulting error

	badEnv     *string // an invalid environment value, if the type has one
	wantEnvErr string

	extra map[string]string // other options the case needs to be valid
	// defaultAlone loads the default without extra: for options whose
	// default is valid only without the others (a SASL mechanism is
	// required once a SASL protocol is chosen).
	defaultAlone bool
}

func text(s string) *string { return &s }

var optionCases = []optionCase{
	// Core.
	{name: "bootstrap_servers", def: []string(nil),
		env: "a:9092, b:9092", envWant: []string{"a:9092", "b:9092"},
		explicit: `["x:1"]`, explicitWant: []string{"x:1"},
		bad: `[]`, wantErr: "must list at least one server, got []",
		badEnv: text(" , "), wantEnvErr: "must list at least one server"},
	{name: "group_id", def: "",
		env: "g-env", envWant: "g-env",
		explicit: `"g-json"`, explicitWant: "g-json",
		bad: `5`, wantErr: "must be a string, got 5"},
	{name: "subscribed_topics", def: []string(nil),
		env: "t1,t2", envWant: []string{"t1", "t2"},
		explicit: `"t3, ^t4.*"`, explicitWant: []string{"t3", "^t4.*"},
		bad: `["^("]`, wantErr: "must be a valid regular expression",
		badEnv: text("^["), wantEnvErr: "must be a valid regular expression"},
	{name: "allowed_events", def: []string(nil),
		env: "user.,order.", envWant: []string{"user.", "order."},
		explicit: `["a"]`, explicitWant: []string{"a"},
		bad: `[]`, wantErr: "must not be an empty list"},
	{name: "source_system", def: "",
		env: "s-env", envWant: "s-env",
		explicit: `"s-json"`, explicitWant: "s-json",
		bad: `true`, wantErr: "must be a string, got true"},
	{name: "mock", def: false,
		env: "TRUE", envWant: true,
		explicit: `false`, explicitWant: false,
		bad: `"yes"`, wantErr: `must be true or false, got "yes"`,
		badEnv: text("yes"), wantEnvErr: `must be true or false, got "yes"`},
	{name: "mode", def: ModePipeline,
		explicit: `"low-latency"`, explicitWant: ModeLowLatency,
		bad: `"fast"`, wantErr: `must be "pipeline", "low-latency" or "best-effort", got "fast"`},

	// Kafka security.
	{name: "security_protocol", def: ProtocolPlaintext,
		env: "SSL", envWant: ProtocolSSL,
		explicit: `"Plaintext"`, explicitWant: ProtocolPlaintext,
		bad: `"tls"`, wantErr: `must be "plaintext", "ssl", "sasl_plaintext" or "sasl_ssl", got "tls"`,
		badEnv: text("ssl3"), wantEnvErr: `got "ssl3"`},
	{name: "sasl_mechanism", def: SASLMechanism(""),
		env: "scram-sha-512", envWant: MechanismScramSHA512,
		explicit: `"PLAIN"`, explicitWant: MechanismPlain,
		bad: `"GSSAPI"`, wantErr: `must be "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512" or "OAUTHBEARER", got "GSSAPI"`,
		badEnv: text("kerberos"), wantEnvErr: `got "KERBEROS"`,
		extra:        map[string]string{"security_protocol": `"sasl_ssl"`, "sasl_username": `"u"`, "sasl_password": `"p"`},
		defaultAlone: true},
	{name: "sasl_username", def: "",
		env: "alice", envWant: "alice",
		explicit: `"bob"`, explicitWant: "bob",
		bad: `1`, wantErr: "must be a string, got 1",
		extra:        map[string]string{"security_protocol": `"sasl_plaintext"`, "sasl_mechanism": `"PLAIN"`, "sasl_password": `"p"`},
		defaultAlone: true},
	{name: "sasl_password", def: "",
		env: "pw-env", envWant: "pw-env",
		explicit: `"pw-json"`, explicitWant: "pw-json",
		bad: `12345`, wantErr: "must be a string (the value is not shown)",
		extra:        map[string]string{"security_protocol": `"sasl_ssl"`, "sasl_mechanism": `"SCRAM-SHA-256"`, "sasl_username": `"u"`},
		defaultAlone: true},
	{name: "sasl_oauthbearer_token_file", def: "",
		env: "/run/token", envWant: "/run/token",
		explicit: `"token.jwt"`, explicitWant: "token.jwt",
		bad: `true`, wantErr: "must be a string, got true",
		extra:        map[string]string{"security_protocol": `"sasl_ssl"`, "sasl_mechanism": `"OAUTHBEARER"`},
		defaultAlone: true},
	{name: "ssl_ca_location", def: "",
		env: "/etc/ca.pem", envWant: "/etc/ca.pem",
		explicit: `"ca.pem"`, explicitWant: "ca.pem",
		bad: `5`, wantErr: "must be a string, got 5",
		extra: map[string]string{"security_protocol": `"ssl"`}},
	{name: "ssl_certificate_location", def: "",
		env: "c.pem", envWant: "c.pem",
		explicit: `"c2.pem"`, explicitWant: "c2.pem",
		bad: `5`, wantErr: "must be a string",
		extra:        map[string]string{"security_protocol": `"ssl"`, "ssl_key_location": `"k.pem"`},
		defaultAlone: true},
	{name: "ssl_key_location", def: "",
		env: "k.pem", envWant: "k.pem",
		explicit: `"k2.pem"`, explicitWant: "k2.pem",
		bad: `5`, wantErr: "must be a string",
		extra:        map[string]string{"security_protocol": `"sasl_ssl"`, "sasl_mechanism": `"PLAIN"`, "sasl_username": `"u"`, "sasl_password": `"p"`, "ssl_certificate_location": `"c.pem"`},
		defaultAlone: true},
	{name: "ssl_server_name", def: "",
		env: "kafka.internal", envWant: "kafka.internal",
		explicit: `"b1.kafka"`, explicitWant: "b1.kafka",
		bad: `[]`, wantErr: "must be a string, got an array",
		extra: map[string]string{"security_protocol": `"ssl"`}},
	{name: "enable_ssl_certificate_verification", def: true,
		env: "false", envWant: false,
		explicit: `true`, explicitWant: true,
		bad: `"off"`, wantErr: `must be true or false, got "off"`,
		badEnv: text("off"), wantEnvErr: `must be true or false, got "off"`,
		extra: map[string]string{"security_protocol": `"ssl"`}},

	// Consumer.
	{name: "max_concurrency", def: 32,
		env: "8", envWant: 8,
		explicit: `4`, explicitWant: 4,
		bad: `0`, wantErr: "must be at least 1, got 0",
		badEnv: text("0"), wantEnvErr: "max_concurrency: must be at least 1, got 0 (from PROSODY_MAX_CONCURRENCY)"},
	{name: "max_uncommitted", def: 64,
		env: "128", envWant: 128,
		explicit: `16`, explicitWant: 16,
		bad: `65536`, wantErr: "must be within [1, 65535], got 65536",
		badEnv: text("0"), wantEnvErr: "must be within [1, 65535], got 0"},
	{name: "commit_interval", def: time.Second,
		env: "5s", envWant: 5 * time.Second,
		explicit: `0.5`, explicitWant: 500 * time.Millisecond,
		bad: `0`, wantErr: "must be greater than 0, got 0s",
		badEnv: text("5"), wantEnvErr: "a unit must follow 5"},
	{name: "poll_interval", def: 100 * time.Millisecond,
		env: "250ms", envWant: 250 * time.Millisecond,
		explicit: `"50ms"`, explicitWant: 50 * time.Millisecond,
		bad: `-1`, wantErr: "must be greater than 0, got -1s",
		badEnv: text("fast"), wantEnvErr: `must be a duration such as "100ms", "30s" or "1h 30m", got "fast"`},
	{name: "shutdown_timeout", def: 30 * time.Second,
		env: "1m", envWant: time.Minute,
		explicit: `10`, explicitWant: 10 * time.Second,
		bad: `0`, wantErr: "must be greater than 0",
		badEnv: text("10"), wantEnvErr: "must be a duration"},
	{name: "stall_threshold", def: 5 * time.Minute,
		env: "2h 30m", envWant: 150 * time.Minute,
		explicit: `60`, explicitWant: time.Minute,
		bad: `0`, wantErr: "must be greater than 0",
		badEnv: text("1.5m"), wantEnvErr: "must be a duration"},
	{name: "timeout", def: None[time.Duration](),
		env: "30s", envWant: Some(30 * time.Second),
		explicit: `"10s"`, explicitWant: Some(10 * time.Second),
		bad: `0`, wantErr: "must be greater than 0, got 0s",
		badEnv: text("soon"), wantEnvErr: "must be a duration"},
	{name: "probe_port", def: Some(8000),
		env: "9000", envWant: Some(9000),
		explicit: `null`, explicitWant: None[int](),
		bad: `70000`, wantErr: "must be within [0, 65535], got 70000",
		badEnv: text("http"), wantEnvErr: `must be a whole number, got "http"`},
	{name: "failure_topic", def: "",
		env: "dlq-env", envWant: "dlq-env",
		explicit: `"dlq"`, explicitWant: "dlq",
		bad: `["x"]`, wantErr: "must be a string, got an array"},
	{name: "idempotence_cache_size", def: 8192,
		env: "0", envWant: 0,
		explicit: `100`, explicitWant: 100,
		bad: `-1`, wantErr: "must be at least 0, got -1",
		badEnv: text("lots"), wantEnvErr: "must be a whole number"},
	{name: "idempotence_version", def: "1",
		env: "2", envWant: "2",
		explicit: `"3"`, explicitWant: "3",
		bad: `3`, wantErr: "must be a string, got 3"},
	{name: "idempotence_ttl", def: 7 * 24 * time.Hour,
		env: "1d", envWant: 24 * time.Hour,
		explicit: `3600`, explicitWant: time.Hour,
		bad: `59`, wantErr: "must be within [1m, 630720000s], got 59s",
		badEnv: text("30s"), wantEnvErr: "must be within [1m, 630720000s], got 30s"},
	{name: "slab_size", def: time.Hour,
		env: "30m", envWant: 30 * time.Minute,
		explicit: `"2h"`, explicitWant: 2 * time.Hour,
		bad: `0.5`, wantErr: "must be at least 1s, got 500ms",
		badEnv: text("1h 5"), wantEnvErr: "a unit must follow 5"},
	{name: "message_spans", def: SpanChild,
		env: "follows_from", envWant: SpanFollowsFrom,
		explicit: `"child"`, explicitWant: SpanChild,
		bad: `"x"`, wantErr: `must be "child" or "follows_from", got "x"`,
		badEnv: text("parent"), wantEnvErr: `got "parent"`},
	{name: "timer_spans", def: SpanFollowsFrom,
		env: "child", envWant: SpanChild,
		explicit: `"follows_from"`, explicitWant: SpanFollowsFrom,
		bad: `"x"`, wantErr: `must be "child" or "follows_from", got "x"`,
		badEnv: text("x"), wantEnvErr: `must be "child" or "follows_from"`},

	// Producer.
	{name: "send_timeout", def: Some(time.Second),
		env: "none", envWant: None[time.Duration](),
		explicit: `"5s"`, explicitWant: Some(5 * time.Second),
		bad: `0`, wantErr: "must be greater than 0",
		badEnv: text("fast"), wantEnvErr: "must be a duration"},

	// Retry.
	{name: "max_retries", def: 3,
		env: "10", envWant: 10,
		explicit: `0`, explicitWant: 0,
		bad: `-1`, wantErr: "must be within [0, 4294967295], got -1",
		badEnv: text("-1"), wantEnvErr: "must be within [0, 4294967295]"},
	{name: "retry_base", def: 20 * time.Millisecond,
		env: "100ms", envWant: 100 * time.Millisecond,
		explicit: `0.05`, explicitWant: 50 * time.Millisecond,
		bad: `0`, wantErr: "must be greater than 0",
		badEnv: text("x"), wantEnvErr: "must be a duration"},
	{name: "max_retry_delay", def: 5 * time.Minute,
		env: "1m", envWant: time.Minute,
		explicit: `"10m"`, explicitWant: 10 * time.Minute,
		bad: `0.01`, wantErr: "must be at least retry_base (20ms), got 10ms",
		badEnv: text("10ms"), wantEnvErr: "must be at least retry_base (20ms), got 10ms"},

	// Deferral.
	{name: "defer_enabled", def: true,
		env: "false", envWant: false,
		explicit: `true`, explicitWant: true,
		bad: `1`, wantErr: "must be true or false, got 1",
		badEnv: text("maybe"), wantEnvErr: "must be true or false"},
	{name: "defer_base", def: time.Second,
		env: "2s", envWant: 2 * time.Second,
		explicit: `"5s"`, explicitWant: 5 * time.Second,
		bad: `0.5`, wantErr: "must be at least 1s, got 500ms",
		badEnv: text("500ms"), wantEnvErr: "must be at least 1s, got 500ms"},
	{name: "defer_max_delay", def: 24 * time.Hour,
		env: "1h", envWant: time.Hour,
		explicit: `7200`, explicitWant: 2 * time.Hour,
		bad: `"500ms"`, wantErr: "must be at least defer_base (1s), got 500ms",
		badEnv: text("500ms"), wantEnvErr: "must be at least defer_base (1s)"},
	{name: "defer_failure_threshold", def: 0.9,
		env: "0.5", envWant: 0.5,
		explicit: `0.75`, explicitWant: 0.75,
		bad: `1.5`, wantErr: "defer_failure_threshold: must be within [0, 1], got 1.5",
		badEnv: text("1.5"), wantEnvErr: "must be within [0, 1], got 1.5"},
	{name: "defer_failure_window", def: 5 * time.Minute,
		env: "10m", envWant: 10 * time.Minute,
		explicit: `"1m"`, explicitWant: time.Minute,
		bad: `0`, wantErr: "must be greater than 0",
		badEnv: text("0s"), wantEnvErr: "must be greater than 0, got 0s"},
	{name: "defer_cache_size", def: 1024,
		env: "10", envWant: 10,
		explicit: `20`, explicitWant: 20,
		bad: `0`, wantErr: "must be at least 1",
		badEnv: text("0"), wantEnvErr: "must be at least 1"},
	{name: "defer_store_cache_size", def: 8192,
		env: "10", envWant: 10,
		explicit: `20`, explicitWant: 20,
		bad: `0`, wantErr: "must be at least 1",
		badEnv: text("many"), wantEnvErr: "must be a whole number"},
	{name: "defer_seek_timeout", def: 30 * time.Second,
		env: "1m", envWant: time.Minute,
		explicit: `5`, explicitWant: 5 * time.Second,
		bad: `0`, wantErr: "must be greater than 0",
		badEnv: text("0ms"), wantEnvErr: "must be greater than 0"},
	{name: "defer_discard_threshold", def: 100,
		env: "0", envWant: 0,
		explicit: `50`, explicitWant: 50,
		bad: `-5`, wantErr: "must be at least 0, got -5",
		badEnv: text("x"), wantEnvErr: "must be a whole number"},

	// Monopolization detection.
	{name: "monopolization_enabled", def: true,
		env: "False", envWant: false,
		explicit: `true`, explicitWant: true,
		bad: `"no"`, wantErr: "must be true or false",
		badEnv: text("no"), wantEnvErr: "must be true or false"},
	{name: "monopolization_threshold", def: 0.9,
		env: "0.2", envWant: 0.2,
		explicit: `0.3`, explicitWant: 0.3,
		bad: `-0.1`, wantErr: "must be within [0, 1], got -0.1",
		badEnv: text("2"), wantEnvErr: "must be within [0, 1], got 2"},
	{name: "monopolization_window", def: 5 * time.Minute,
		env: "1m", envWant: time.Minute,
		explicit: `120`, explicitWant: 2 * time.Minute,
		bad: `0`, wantErr: "must be greater than 0",
		badEnv: text(""), wantEnvErr: `got "" (empty)`},
	{name: "monopolization_cache_size", def: 8192,
		env: "16", envWant: 16,
		explicit: `32`, explicitWant: 32,
		bad: `0`, wantErr: "must be at least 1",
		badEnv: text("0"), wantEnvErr: "must be at least 1"},

	// Fair scheduling.
	{name: "scheduler_failure_weight", def: 0.3,
		env: "0.5", envWant: 0.5,
		explicit: `0`, explicitWant: 0.0,
		bad: `1.01`, wantErr: "must be within [0, 1], got 1.01",
		badEnv: text("abc"), wantEnvErr: `must be a number, got "abc"`},
	{name: "scheduler_max_wait", def: 2 * time.Minute,
		env: "30s", envWant: 30 * time.Second,
		explicit: `60`, explicitWant: time.Minute,
		bad: `0`, wantErr: "must be greater than 0",
		badEnv: text("2"), wantEnvErr: "must be a duration"},
	{name: "scheduler_wait_weight", def: 200.0,
		env: "50", envWant: 50.0,
		explicit: `0`, explicitWant: 0.0,
		bad: `-1`, wantErr: "must be a finite number of at least 0, got -1",
		badEnv: text("Inf"), wantEnvErr: "must be a finite number of at least 0, got +Inf"},
	{name: "scheduler_cache_size", def: 8192,
		env: "1", envWant: 1,
		explicit: `2`, explicitWant: 2,
		bad: `0`, wantErr: "must be at least 1",
		badEnv: text("0"), wantEnvErr: "must be at least 1"},

	// Telemetry emitter.
	{name: "telemetry_enabled", def: true,
		env: "false", envWant: false,
		explicit: `true`, explicitWant: true,
		bad: `"on"`, wantErr: "must be true or false",
		badEnv: text("on"), wantEnvErr: "must be true or false"},
	{name: "telemetry_topic", def: "prosody.telemetry-events",
		env: "tele", envWant: "tele",
		explicit: `"t2"`, explicitWant: "t2",
		bad: `""`, wantErr: `must not be empty, got ""`,
		badEnv: text(""), wantEnvErr: "must not be empty"},

	// Cassandra.
	{name: "cassandra_nodes", def: []string(nil),
		env: "c1:9042, c2", envWant: []string{"c1:9042", "c2"},
		explicit: `["[::1]:9042"]`, explicitWant: []string{"[::1]:9042"},
		bad: `["c1:99999"]`, wantErr: "must have a port in 1..65535",
		badEnv: text("c1:x"), wantEnvErr: "must have a port in 1..65535"},
	{name: "cassandra_keyspace", def: "prosody",
		env: "ks_env", envWant: "ks_env",
		explicit: `"ks"`, explicitWant: "ks",
		bad: `"my-ks"`, wantErr: `must be 1 to 48 letters, digits or underscores, got "my-ks"`,
		badEnv: text("a b"), wantEnvErr: "must be 1 to 48 letters"},
	{name: "cassandra_user", def: "",
		env: "u", envWant: "u",
		explicit: `"u2"`, explicitWant: "u2",
		bad: `1`, wantErr: "must be a string"},
	{name: "cassandra_password", def: "",
		env: "p", envWant: "p",
		explicit: `"p2"`, explicitWant: "p2",
		bad: `false`, wantErr: "must be a string (the value is not shown)",
		extra: map[string]string{"cassandra_user": `"u"`}},
	{name: "cassandra_ssl_enabled", def: false,
		env: "true", envWant: true,
		explicit: `false`, explicitWant: false,
		bad: `"yes"`, wantErr: `must be true or false, got "yes"`},
	{name: "cassandra_ssl_ca_location", def: "",
		env: "/etc/ca.pem", envWant: "/etc/ca.pem",
		explicit: `"ca.pem"`, explicitWant: "ca.pem",
		bad: `1`, wantErr: "must be a string",
		extra: map[string]string{"cassandra_ssl_enabled": `true`}},
	{name: "cassandra_ssl_certificate_location", def: "",
		env: "c.pem", envWant: "c.pem",
		explicit: `"c2.pem"`, explicitWant: "c2.pem",
		bad: `[]`, wantErr: "must be a string",
		extra:        map[string]string{"cassandra_ssl_enabled": `true`, "cassandra_ssl_key_location": `"k.pem"`},
		defaultAlone: true},
	{name: "cassandra_ssl_key_location", def: "",
		env: "k.pem", envWant: "k.pem",
		explicit: `"k2.pem"`, explicitWant: "k2.pem",
		bad: `{}`, wantErr: "must be a string",
		extra:        map[string]string{"cassandra_ssl_enabled": `true`, "cassandra_ssl_certificate_location": `"c.pem"`},
		defaultAlone: true},
	{name: "cassandra_ssl_server_name", def: "",
		env: "cassandra.internal", envWant: "cassandra.internal",
		explicit: `"c1.cassandra"`, explicitWant: "c1.cassandra",
		bad: `[]`, wantErr: "must be a string, got an array",
		extra: map[string]string{"cassandra_ssl_enabled": `true`}},
	{name: "cassandra_enable_ssl_certificate_verification", def: true,
		env: "false", envWant: false,
		explicit: `true`, explicitWant: true,
		bad: `0`, wantErr: "must be true or false, got 0",
		extra: map[string]string{"cassandra_ssl_enabled": `true`}},
	{name: "cassandra_datacenter", def: "",
		env: "dc1", envWant: "dc1",
		explicit: `"dc2"`, explicitWant: "dc2",
		bad: `{}`, wantErr: "must be a string, got an object"},
	{name: "cassandra_rack", def: "",
		env: "r1", envWant: "r1",
		explicit: `"r2"`, explicitWant: "r2",
		bad: `3`, wantErr: "must be a string",
		extra: map[string]string{"cassandra_datacenter": `"dc1"`}},
	{name: "cassandra_retention", def: 365 * 24 * time.Hour,
		env: "1y", envWant: 31_557_600 * time.Second,
		explicit: `86400`, explicitWant: 24 * time.Hour,
		bad: `630720001`, wantErr: "must be at most 630720000s",
		badEnv: text("0s"), wantEnvErr: "must be greater than 0, got 0s"},

	// Keyed state.
	{name: "state_collections", def: []StateCollection(nil),
		explicit: `[{"name":"a","kind":"map","payload":"json","ttl_seconds":60,"keyset_limit":10}]`,
		explicitWant: []StateCollection{{Name: "a", Kind: CollectionMap, Payload: PayloadJSON,
			TTL: Some(time.Minute), KeysetLimit: Some(10)}},
		bad: `[{"name":"","kind":"value","payload":"json"}]`, wantErr: "state_collections[0].name: must not be empty"},
	{name: "state_cache_dir", def: None[string](),
		env: "/tmp/env", envWant: Some("/tmp/env"),
		explicit: `"/tmp/x"`, explicitWant: Some("/tmp/x"),
		bad: `""`, wantErr: "state_cache_dir: must not be an empty string",
		badEnv: text(""), wantEnvErr: "state_cache_dir: must not be an empty string (from PROSODY_STATE_CACHE_DIR)"},
	{name: "state_cache_size_bytes", def: None[uint64](),
		env: "1048576", envWant: Some[uint64](1 << 20),
		explicit: `18446744073709551615`, explicitWant: Some[uint64](1<<64 - 1),
		bad: `0`, wantErr: "state_cache_size_bytes: must be greater than 0",
		badEnv: text("-1"), wantEnvErr: "state_cache_size_bytes: must be an integer in 1..=18446744073709551615"},
	{name: "state_recovery_delay", def: 30 * time.Second,
		env: "10s", envWant: 10 * time.Second,
		explicit: `5`, explicitWant: 5 * time.Second,
		bad: `2.5`, wantErr: "state_recovery_delay: must be a whole number of seconds",
		badEnv: text("0s"), wantEnvErr: "state_recovery_delay: must be >= 1 second"},
	{name: "subsystem", def: None[string](),
		env: "checkout", envWant: Some("checkout"),
		explicit: `"orders"`, explicitWant: Some("orders"),
		bad: `""`, wantErr: "subsystem: must not be an empty string"},
	{name: "state_owned_cache_size", def: None[uint64](),
		env: "64 MiB", envWant: Some[uint64](64 << 20),
		explicit: `"1.5 kB"`, explicitWant: Some[uint64](1500),
		bad: `"0"`, wantErr: `state_owned_cache_size: must be a size such as "64 MiB" or a number of bytes, at least 1, got "0"`,
		badEnv: text("nonsense"), wantEnvErr: `state_owned_cache_size: must be a size such as "64 MiB" or a number of bytes, at least 1, got "nonsense"`},
	{name: "state_read_cache_size", def: None[uint64](),
		env: "2MiB", envWant: Some[uint64](2 << 20),
		explicit: `4096`, explicitWant: Some[uint64](4096),
		bad: `"-1 MiB"`, wantErr: `state_read_cache_size: must be a size such as "64 MiB" or a number of bytes, at least 1, got "-1 MiB"`},
	{name: "state_read_cache_ttl", def: Some(5 * time.Second),
		env: "none", envWant: None[time.Duration](),
		explicit: `"250ms"`, explicitWant: Some(250 * time.Millisecond),
		bad: `true`, wantErr: "state_read_cache_ttl: must be a number of seconds"},

	// Logging (environment only, so "explicit" is environment syntax).
	{name: "log", def: "info",
		env: "debug", envWant: "debug",
		explicit: "prosody=trace", explicitWant: "prosody=trace",
		badEnv: text(""), wantEnvErr: `log: must not be empty, got "" (from PROSODY_LOG)`},
}

func findOption[C any](t *testing.T, opts []option[C], name string) option[C] {
	t.Helper()
	for _, o := range opts {
		if o.name == name {
			return o
		}
	}
	t.Fatalf("no option %q", name)
	return option[C]{}
}

// explicitSetter turns a case's explicit value into a Go setter, the way a
// Go caller would pass it to Load.
func explicitSetter[C any](t *testing.T, o option[C], explicit string) func(*C) {
	t.Helper()
	if o.envOnly {
		set, err := o.fromText(explicit)
		if err != nil {
			t.Fatal(err)
		}
		return set
	}
	v, err := decodeObject([]byte(`{"v":` + explicit + `}`))
	if err != nil {
		t.Fatal(err)
	}
	set, err := o.fromJSON(v["v"])
	if err != nil {
		t.Fatal(err)
	}
	if set == nil {
		t.Fatalf("explicit value %s of %s would be ignored", explicit, o.name)
	}
	return set
}

func TestEveryOption(t *testing.T) {
	for _, tc := range optionCases {
		t.Run(tc.name, func(t *testing.T) {
			o := findOption(t, configOptions, tc.name)
			base := withBase(tc.extra)
			if tc.name == "bootstrap_servers" {
				delete(base, "bootstrap_servers") // the case supplies its own
			}
			check := func(label string, cfg *Config, want any) {
				t.Helper()
				if got := o.value(cfg); !reflect.DeepEqual(got, want) {
					t.Errorf("%s: got %#v, want %#v", label, got, want)
				}
			}

			t.Run("default", func(t *testing.T) {
				clearEnv(t)
				d := Default()
				check("Default()", &d, tc.def)
				if tc.name == "bootstrap_servers" {
					return // there is no valid configuration without servers
				}
				defBase := base
				if tc.defaultAlone {
					defBase = withBase(nil)
				}
				cfg, err := FromJSON(options(t, defBase))
				if err != nil {
					t.Fatal(err)
				}
				check("loaded", cfg, tc.def)
			})

			if o.env == "" {
				// Only the documented options are set explicitly alone; a
				// variable named after one must change nothing.
				t.Run("no environment variable", func(t *testing.T) {
					if tc.name != "mode" && tc.name != "state_collections" {
						t.Fatalf("%s has no environment variable, but the docs give it one", tc.name)
					}
					clearEnv(t)
					t.Setenv("PROSODY_"+strings.ToUpper(tc.name), fmt.Sprint(tc.explicit))
					cfg, err := FromJSON(options(t, base))
					if err != nil {
						t.Fatal(err)
					}
					check("PROSODY_"+strings.ToUpper(tc.name)+" set", cfg, tc.def)
				})
			}

			if o.env != "" {
				t.Run("environment", func(t *testing.T) {
					clearEnv(t)
					t.Setenv(o.env, tc.env)
					cfg, err := FromJSON(options(t, base))
					if err != nil {
						t.Fatal(err)
					}
					check(o.env+"="+tc.env, cfg, tc.envWant)
				})
			}

			t.Run("explicit beats environment", func(t *testing.T) {
				clearEnv(t)
				if o.env != "" {
					t.Setenv(o.env, tc.env)
				}
				if !o.envOnly {
					raw := withBase(base)
					raw[tc.name] = tc.explicit
					cfg, err := FromJSON(options(t, raw))
					if err != nil {
						t.Fatal(err)
					}
					check("JSON", cfg, tc.explicitWant)
				}
				setBase := explicitSetter(t, findOption(t, configOptions, "bootstrap_servers"), `"kafka:9092"`)
				var extra []func(*Config)
				for k, v := range tc.extra {
					extra = append(extra, explicitSetter(t, findOption(t, configOptions, k), v))
				}
				cfg, err := Load(append(extra, setBase, explicitSetter(t, o, tc.explicit))...)
				if err != nil {
					t.Fatal(err)
				}
				check("Go", cfg, tc.explicitWant)
				if env, ok := cfg.envVars[tc.name]; ok {
					t.Errorf("value still attributed to %s", env)
				}
			})

			t.Run("invalid", func(t *testing.T) {
				if tc.bad == "" && tc.badEnv == nil {
					t.Fatal("case has no invalid value")
				}
				clearEnv(t)
				if tc.bad != "" {
					raw := withBase(base)
					raw[tc.name] = tc.bad
					_, err := FromJSON(options(t, raw))
					e := requireOptionError(t, err, tc.name, tc.wantErr)
					if e.EnvVar != "" {
						t.Errorf("explicit value blamed on %s", e.EnvVar)
					}
				}
				if tc.badEnv != nil {
					t.Setenv(o.env, *tc.badEnv)
					_, err := FromJSON(options(t, base))
					requireOptionError(t, err, tc.name, tc.wantEnvErr, "(from "+o.env+")")
				}
			})
		})
	}
}

// TestOptionTableIsComplete keeps the option table, the Config struct and the
// per-option test cases in step.
func TestOptionTableIsComplete(t *testing.T) {
	cases := make(map[string]int)
	for _, tc := range optionCases {
		cases[tc.name]++
	}
	seen := make(map[string]bool)
	for _, o := range configOptions {
		if seen[o.name] {
			t.Errorf("option %s is registered twice", o.name)
		}
		seen[o.name] = true
		if cases[o.name] != 1 {
			t.Errorf("option %s has %d rows in optionCases, want 1", o.name, cases[o.name])
		}
	}
	for name := range cases {
		if !seen[name] {
			t.Errorf("optionCases has a row for unknown option %s", name)
		}
	}

	exported := 0
	for f := range reflect.TypeFor[Config]().Fields() {
		if f.IsExported() {
			exported++
		}
	}
	if exported != len(configOptions) {
		t.Errorf("Config has %d exported fields but %d options are registered", exported, len(configOptions))
	}
}

// TestVariableNames checks that each variable is PROSODY_ plus the upper-case
// option name, apart from the one the original names differently.
func TestVariableNames(t *testing.T) {
	renamed := map[string]string{"max_retry_delay": "PROSODY_RETRY_MAX_DELAY"}
	for _, o := range configOptions {
		want := "PROSODY_" + strings.ToUpper(o.name)
		if r, ok := renamed[o.name]; ok {
			want = r
		}
		if o.env != "" && o.env != want {
			t.Errorf("%s: variable %s, want %s", o.name, o.env, want)
		}
	}
}
