package config

import (
	"sync"
	"time"

	"github.com/goccy/go-json"
)

// The option schema: every option of Config with its JSON name, type,
// default, environment variable and what its rules allow, as one JSON
// document (prosody_config_schema hands it to the bindings). The bindings
// build their option tables, conversions and messages from it rather than
// keeping copies of their own, so a rule is stated once, here.
//
// Where a binding's API differs from the JSON names by design (Node's
// camelCase names with units, its loader options, its stricter
// idempotenceCacheSize), the difference is data in nodeOptions below.

// SchemaVersion changes when the document's shape does.
const SchemaVersion = 1

// schemaOption is one option in the document.
type schemaOption struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Env      string `json:"env,omitempty"`
	EnvOnly  bool   `json:"env_only,omitempty"`
	JSONOnly bool   `json:"json_only,omitempty"`
	Nullable bool   `json:"null_is_value,omitempty"`
	// Secret marks a password: a binding must not show its value in an
	// error or a printed configuration.
	Secret  bool           `json:"secret,omitempty"`
	Default any            `json:"default"`
	Limits  map[string]any `json:"limits,omitempty"`
	Node    *nodeOption    `json:"node,omitempty"`
}

// nodeOption is how the Node package names and checks an option.
type nodeOption struct {
	// Name is the camelCase key of the Node Configuration.
	Name string `json:"name"`
	// Unit is the unit a duration's number is in: "ms" or "s".
	Unit string `json:"unit,omitempty"`
	// Min overrides the core's lower bound where the Node docs are
	// stricter.
	Min *int `json:"min,omitempty"`
	// Env is a variable the Node package reads for the option instead of
	// the core's.
	Env string `json:"env,omitempty"`
	// Values maps the Node API's values of an enum to the core's.
	Values map[string]string `json:"values,omitempty"`
}

func ms(name string) *nodeOption   { return &nodeOption{Name: name, Unit: "ms"} }
func secs(name string) *nodeOption { return &nodeOption{Name: name, Unit: "s"} }
func node(name string) *nodeOption { return &nodeOption{Name: name} }

var one = 1

// nodeOptions are the Node names of the options (node-api.md §3); an
// option missing here is not part of the Node API.
var nodeOptions = map[string]*nodeOption{
	"bootstrap_servers": node("bootstrapServers"),
	"mock":              node("mock"),
	"send_timeout":      ms("sendTimeoutMs"),
	"group_id":          node("groupId"),
	// The Node docs reject 0, which the core reads as "no id cache".
	"idempotence_cache_size":             {Name: "idempotenceCacheSize", Min: &one},
	"idempotence_version":                node("idempotenceVersion"),
	"idempotence_ttl":                    secs("idempotenceTtlS"),
	"subscribed_topics":                  node("subscribedTopics"),
	"allowed_events":                     node("allowedEvents"),
	"source_system":                      node("sourceSystem"),
	"max_concurrency":                    node("maxConcurrency"),
	"max_uncommitted":                    node("maxUncommitted"),
	"stall_threshold":                    ms("stallThresholdMs"),
	"shutdown_timeout":                   ms("shutdownTimeoutMs"),
	"poll_interval":                      ms("pollIntervalMs"),
	"commit_interval":                    ms("commitIntervalMs"),
	"mode":                               {Name: "mode", Values: map[string]string{"Pipeline": "pipeline", "LowLatency": "low-latency", "BestEffort": "best-effort"}},
	"retry_base":                         ms("retryBaseMs"),
	"max_retries":                        node("maxRetries"),
	"max_retry_delay":                    ms("maxRetryDelayMs"),
	"failure_topic":                      node("failureTopic"),
	"probe_port":                         node("probePort"),
	"slab_size":                          ms("slabSizeMs"),
	"cassandra_nodes":                    node("cassandraNodes"),
	"cassandra_keyspace":                 node("cassandraKeyspace"),
	"cassandra_datacenter":               node("cassandraDatacenter"),
	"cassandra_rack":                     node("cassandraRack"),
	"cassandra_user":                     node("cassandraUser"),
	"cassandra_password":                 node("cassandraPassword"),
	"cassandra_retention":                secs("cassandraRetentionSeconds"),
	"cassandra_ssl_enabled":              node("cassandraSslEnabled"),
	"cassandra_ssl_ca_location":          node("cassandraSslCaLocation"),
	"cassandra_ssl_certificate_location": node("cassandraSslCertificateLocation"),
	"cassandra_ssl_key_location":         node("cassandraSslKeyLocation"),
	"cassandra_ssl_server_name":          node("cassandraSslServerName"),
	"cassandra_enable_ssl_certificate_verification": node("cassandraEnableSslCertificateVerification"),
	"security_protocol":                             node("securityProtocol"),
	"sasl_mechanism":                                node("saslMechanism"),
	"sasl_username":                                 node("saslUsername"),
	"sasl_password":                                 node("saslPassword"),
	"sasl_oauthbearer_token_file":                   node("saslOauthbearerTokenFile"),
	"ssl_ca_location":                               node("sslCaLocation"),
	"ssl_certificate_location":                      node("sslCertificateLocation"),
	"ssl_key_location":                              node("sslKeyLocation"),
	"ssl_server_name":                               node("sslServerName"),
	"enable_ssl_certificate_verification":           node("enableSslCertificateVerification"),
	"scheduler_failure_weight":                      node("schedulerFailureWeight"),
	"scheduler_max_wait":                            ms("schedulerMaxWaitMs"),
	"scheduler_wait_weight":                         node("schedulerWaitWeight"),
	"scheduler_cache_size":                          node("schedulerCacheSize"),
	"monopolization_enabled":                        node("monopolizationEnabled"),
	"monopolization_threshold":                      node("monopolizationThreshold"),
	"monopolization_window":                         ms("monopolizationWindowMs"),
	"monopolization_cache_size":                     node("monopolizationCacheSize"),
	"defer_enabled":                                 node("deferEnabled"),
	"defer_base":                                    ms("deferBaseMs"),
	"defer_max_delay":                               ms("deferMaxDelayMs"),
	"defer_failure_threshold":                       node("deferFailureThreshold"),
	"defer_failure_window":                          ms("deferFailureWindowMs"),
	"defer_store_cache_size":                        node("deferStoreCacheSize"),
	// The Node package calls the Kafka loader's options loader* and reads
	// PROSODY_LOADER_* for them.
	"defer_cache_size":        {Name: "loaderCacheSize", Env: "PROSODY_LOADER_CACHE_SIZE"},
	"defer_seek_timeout":      {Name: "loaderSeekTimeoutMs", Unit: "ms", Env: "PROSODY_LOADER_SEEK_TIMEOUT"},
	"defer_discard_threshold": {Name: "loaderDiscardThreshold", Env: "PROSODY_LOADER_DISCARD_THRESHOLD"},
	"timeout":                 ms("timeoutMs"),
	"telemetry_topic":         node("telemetryTopic"),
	"telemetry_enabled":       node("telemetryEnabled"),
	"message_spans":           node("messageSpans"),
	"timer_spans":             node("timerSpans"),
	"state_collections":       node("stateCollections"),
	"state_cache_dir":         node("stateCacheDir"),
	"state_recovery_delay":    secs("stateRecoveryDelaySeconds"),
	"subsystem":               node("subsystem"),
	"state_owned_cache_size":  node("stateOwnedCacheSize"),
	"state_read_cache_size":   node("stateReadCacheSize"),
	// stateReadCache ({ttlMs, disabled}) is the Node form of
	// state_read_cache_ttl; the package converts it.
}

var (
	schemaOnce sync.Once
	schemaDoc  []byte
)

// SchemaJSON returns the option schema document:
//
//	{"version":1,"options":[{"name":"max_concurrency","type":"int",
//	  "env":"PROSODY_MAX_CONCURRENCY","default":32,"limits":{"min":1},
//	  "node":{"name":"maxConcurrency"}}, ...]}
//
// Durations (defaults and limits) are in seconds.
func SchemaJSON() []byte {
	schemaOnce.Do(func() {
		doc := struct {
			Version int            `json:"version"`
			Options []schemaOption `json:"options"`
		}{Version: SchemaVersion}
		for _, o := range configOptions {
			var c Config
			o.reset(&c)
			entry := schemaOption{
				Name: o.name, Type: o.typ, Env: o.env, EnvOnly: o.envOnly, JSONOnly: o.env == "" && !o.envOnly,
				Nullable: o.null, Secret: o.secret, Default: schemaValue(o.value(&c)), Node: nodeOptions[o.name],
			}
			if len(o.facts) > 0 {
				entry.Limits = o.facts
			}
			doc.Options = append(doc.Options, entry)
		}
		out, err := json.Marshal(doc)
		if err != nil {
			panic("config: the option schema cannot be encoded: " + err.Error())
		}
		schemaDoc = out
	})
	return schemaDoc
}

// schemaValue is a default as the schema states it: durations in seconds,
// absent optionals as null.
func schemaValue(v any) any {
	switch v := v.(type) {
	case time.Duration:
		return v.Seconds()
	case Optional[time.Duration]:
		if d, ok := v.Get(); ok {
			return d.Seconds()
		}
		return nil
	case Optional[int]:
		if n, ok := v.Get(); ok {
			return n
		}
		return nil
	case Optional[string]:
		if s, ok := v.Get(); ok {
			return s
		}
		return nil
	case Optional[uint64]:
		if n, ok := v.Get(); ok {
			return n
		}
		return nil
	case []StateCollection:
		return nil
	}
	return v
}
