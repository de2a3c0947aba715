"use strict";
// Translates the camelCase Configuration of the Node API into the one JSON
// object of snake_case options that prosody_client_new takes. Options that
// are not given are left out, so the core applies the PROSODY_* variables
// and its defaults. Values are checked here only for what the JSON cannot
// say (units in the name, integer widths); the core checks the rest and its
// messages name the option.

const U32_MAX = 4294967295;

const Mode = Object.freeze({ Pipeline: "Pipeline", LowLatency: "LowLatency", BestEffort: "BestEffort" });
const MODE_TO_CORE = { Pipeline: "pipeline", LowLatency: "low-latency", BestEffort: "best-effort" };

class ConfigurationError extends Error {
  constructor(message) {
    super(message);
    Object.defineProperty(this, "name", { value: "ConfigurationError", configurable: true, writable: true });
    this.code = "PROSODY_ERR_CONFIG";
  }
}

function fail(name, rule, value) {
  throw new ConfigurationError(`${name}: ${rule}, got ${describe(value)}`);
}

function describe(v) {
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "bigint") return `${v}n`;
  if (Array.isArray(v)) return "an array";
  if (v === null) return "null";
  if (typeof v === "object") return "an object";
  return String(v);
}

function whole(name, v, min, max) {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    fail(name, `must be a whole number in ${min}..=${max}`, v);
  }
  return v;
}

// Each kind turns a JS value into the JSON value the core reads.
const kinds = {
  string: (name, v) => (typeof v === "string" ? v : fail(name, "must be a string", v)),
  bool: (name, v) => (typeof v === "boolean" ? v : fail(name, "must be true or false", v)),
  list: (name, v) => {
    if (typeof v === "string") return v;
    if (Array.isArray(v) && v.every((s) => typeof s === "string")) return v;
    return fail(name, "must be a string or an array of strings", v);
  },
  u16: (name, v) => whole(name, v, 0, 65535),
  u32: (name, v) => whole(name, v, 0, U32_MAX),
  f64: (name, v) => (typeof v === "number" && Number.isFinite(v) ? v : fail(name, "must be a finite number", v)),
  // Durations cross as duration strings, the form the core reads exactly.
  ms: (name, v) => `${whole(name, v, 0, U32_MAX)}ms`,
  seconds: (name, v) => `${whole(name, v, 0, U32_MAX)}s`,
  mode: (name, v) => MODE_TO_CORE[v] ?? fail(name, 'must be Mode.Pipeline, Mode.LowLatency or Mode.BestEffort', v),
  // The core's JSON null disables the probe server.
  port: (name, v) => (v === null ? null : whole(name, v, 0, 65535)),
  spans: (name, v) => v, // the core checks it; its message names message_spans / timer_spans
};

// camelCase option -> [snake_case option, kind]. Every option of the docs.
const OPTIONS = {
  bootstrapServers: ["bootstrap_servers", "list"],
  mock: ["mock", "bool"],
  sendTimeoutMs: ["send_timeout", "ms"],
  groupId: ["group_id", "string"],
  idempotenceCacheSize: ["idempotence_cache_size", "u32"],
  idempotenceVersion: ["idempotence_version", "string"],
  idempotenceTtlS: ["idempotence_ttl", "seconds"],
  subscribedTopics: ["subscribed_topics", "list"],
  allowedEvents: ["allowed_events", "list"],
  sourceSystem: ["source_system", "string"],
  maxConcurrency: ["max_concurrency", "u32"],
  maxUncommitted: ["max_uncommitted", "u16"],
  stallThresholdMs: ["stall_threshold", "ms"],
  shutdownTimeoutMs: ["shutdown_timeout", "ms"],
  pollIntervalMs: ["poll_interval", "ms"],
  commitIntervalMs: ["commit_interval", "ms"],
  mode: ["mode", "mode"],
  retryBaseMs: ["retry_base", "ms"],
  maxRetries: ["max_retries", "u32"],
  maxRetryDelayMs: ["max_retry_delay", "ms"],
  failureTopic: ["failure_topic", "string"],
  probePort: ["probe_port", "port"],
  slabSizeMs: ["slab_size", "ms"],
  cassandraNodes: ["cassandra_nodes", "list"],
  cassandraKeyspace: ["cassandra_keyspace", "string"],
  cassandraDatacenter: ["cassandra_datacenter", "string"],
  cassandraRack: ["cassandra_rack", "string"],
  cassandraUser: ["cassandra_user", "string"],
  cassandraPassword: ["cassandra_password", "string"],
  cassandraRetentionSeconds: ["cassandra_retention", "seconds"],
  schedulerFailureWeight: ["scheduler_failure_weight", "f64"],
  schedulerMaxWaitMs: ["scheduler_max_wait", "ms"],
  schedulerWaitWeight: ["scheduler_wait_weight", "f64"],
  schedulerCacheSize: ["scheduler_cache_size", "u32"],
  monopolizationEnabled: ["monopolization_enabled", "bool"],
  monopolizationThreshold: ["monopolization_threshold", "f64"],
  monopolizationWindowMs: ["monopolization_window", "ms"],
  monopolizationCacheSize: ["monopolization_cache_size", "u32"],
  deferEnabled: ["defer_enabled", "bool"],
  deferBaseMs: ["defer_base", "ms"],
  deferMaxDelayMs: ["defer_max_delay", "ms"],
  deferFailureThreshold: ["defer_failure_threshold", "f64"],
  deferFailureWindowMs: ["defer_failure_window", "ms"],
  deferStoreCacheSize: ["defer_store_cache_size", "u32"],
  loaderCacheSize: ["defer_cache_size", "u32"],
  loaderSeekTimeoutMs: ["defer_seek_timeout", "ms"],
  loaderDiscardThreshold: ["defer_discard_threshold", "u32"],
  timeoutMs: ["timeout", "ms"],
  telemetryTopic: ["telemetry_topic", "string"],
  telemetryEnabled: ["telemetry_enabled", "bool"],
  messageSpans: ["message_spans", "spans"],
  timerSpans: ["timer_spans", "spans"],
  stateCacheDir: ["state_cache_dir", "string"],
  stateRecoveryDelaySeconds: ["state_recovery_delay", "seconds"],
};

// The Node package names the Kafka loader's variables PROSODY_LOADER_*
// where the core reads PROSODY_DEFER_*; the binding reads them itself.
const NODE_ENV = {
  loaderCacheSize: ["PROSODY_LOADER_CACHE_SIZE", "defer_cache_size"],
  loaderSeekTimeoutMs: ["PROSODY_LOADER_SEEK_TIMEOUT", "defer_seek_timeout"],
  loaderDiscardThreshold: ["PROSODY_LOADER_DISCARD_THRESHOLD", "defer_discard_threshold"],
};

// Keyed-state options whose engine arrives with keyed state (a later
// issue): accepted and checked for shape, not yet passed on.
const LATER = new Set(["stateOwnedCacheSize", "stateReadCacheSize", "stateReadCache", "subsystem"]);

function collections(list) {
  if (!Array.isArray(list)) fail("stateCollections", "must be an array", list);
  return list.map((c, i) => {
    const at = `stateCollections[${i}]`;
    if (c === null || typeof c !== "object") fail(at, "must be an object", c);
    if (!["value", "map", "deque"].includes(c.kind)) {
      throw new ConfigurationError(`${at}.kind: expected "value", "map", or "deque", got ${describe(c.kind)}`);
    }
    if (!["json", "message"].includes(c.payload)) {
      throw new ConfigurationError(`${at}.payload: expected "json" or "message", got ${describe(c.payload)}`);
    }
    const out = { name: c.name, kind: c.kind, payload: c.payload };
    const check = (field, min) => {
      const v = c[field];
      if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > U32_MAX) {
        throw new ConfigurationError(`${at}.${field}: must be a whole number in ${min}..=${U32_MAX}`);
      }
      return v;
    };
    if (c.ttlSeconds !== undefined) out.ttl_seconds = check("ttlSeconds", 0);
    if (c.readUncommitted !== undefined) out.read_uncommitted = c.readUncommitted;
    if (c.keysetLimit !== undefined) {
      if (c.kind !== "map") throw new ConfigurationError(`${at}.keysetLimit: only valid for map collections`);
      out.keyset_limit = check("keysetLimit", 0);
    }
    if (c.capacity !== undefined) {
      if (c.kind !== "deque") throw new ConfigurationError(`${at}.capacity: only valid for deque collections`);
      out.capacity = check("capacity", 1);
    }
    return out;
  });
}

/**
 * @returns {{json: string, unknown: string[]}}
 */
function toCoreJSON(config) {
  if (config === null || typeof config !== "object" || Array.isArray(config)) {
    throw new TypeError("ProsodyClient: config must be an object");
  }
  const out = {};
  const unknown = [];
  for (const name of Object.keys(config)) {
    const value = config[name];
    if (value === undefined) continue; // as if not given
    if (name === "stateCollections") {
      out.state_collections = collections(value);
      continue;
    }
    if (LATER.has(name)) continue;
    const entry = OPTIONS[name];
    if (!entry) {
      unknown.push(name);
      continue;
    }
    const [snake, kind] = entry;
    out[snake] = kinds[kind](name, value);
  }
  for (const [name, [env, snake]] of Object.entries(NODE_ENV)) {
    const raw = process.env[env];
    if (!(snake in out) && raw !== undefined && raw.trim() !== "") {
      // Passed as given: the core parses whole numbers and duration strings.
      out[snake] = /^\s*\d+\s*$/.test(raw) && name !== "loaderSeekTimeoutMs" ? Number(raw) : raw;
    }
  }
  // The core would accept 0 (no id cache); this package refuses it, from the
  // option or the variable.
  const cacheSize = out.idempotence_cache_size ?? process.env.PROSODY_IDEMPOTENCE_CACHE_SIZE;
  if (cacheSize !== undefined && String(cacheSize).trim() === "0") {
    const from = out.idempotence_cache_size === undefined ? " (from PROSODY_IDEMPOTENCE_CACHE_SIZE)" : "";
    throw new ConfigurationError(`idempotenceCacheSize: must be greater than 0, got 0${from}`);
  }
  return { json: JSON.stringify(out), unknown };
}

module.exports = { toCoreJSON, Mode, ConfigurationError, OPTIONS };
