"use strict";
// Translates the camelCase Configuration of the Node API into the one JSON
// object of snake_case options that prosody_client_new takes. Options that
// are not given are left out, so the core applies the PROSODY_* variables
// and its defaults. Values are checked here only for what the JSON cannot
// say (units in the name, integer widths); the core checks the rest and its
// messages name the option.

const native = require("./native");

const U32_MAX = 4294967295;

const Mode = Object.freeze({ Pipeline: "Pipeline", LowLatency: "LowLatency", BestEffort: "BestEffort" });

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
  // A password: the message never shows what was given.
  secret: (name, v) => {
    if (typeof v === "string") return v;
    throw new ConfigurationError(`${name}: must be a string (the value is not shown)`);
  },
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
  mode: (name, v, node) =>
    (Object.hasOwn(node.values, v) ? node.values[v] : undefined) ??
    fail(name, `must be ${node.names.map((k) => `Mode.${k}`).join(", ").replace(/, ([^,]*)$/, " or $1")}`, v),
  // The core's JSON null disables the probe server.
  port: (name, v) => (v === null ? null : whole(name, v, 0, 65535)),
  spans: (name, v) => v, // the core checks it; its message names message_spans / timer_spans
};

// The option table comes from the core's option schema
// (prosody_config_schema): the Node names and units, types, integer
// widths and the Node-only rules are stated there, once, for both
// packages. Here they only choose the conversion of each option:
// camelCase option -> [snake_case option, kind, extra].
function kindOf(o) {
  if (o.secret) return "secret";
  const limits = o.limits ?? {};
  switch (o.type) {
    case "string":
    case "bool":
    case "list":
      return o.type;
    case "float":
      return "f64";
    case "duration":
      return o.node.unit === "s" ? "seconds" : "ms";
    case "enum":
      return o.node.values ? "mode" : "spans";
    case "int":
      if (o.null_is_value) return "port";
      return limits.max !== undefined && limits.max <= 65535 ? "u16" : "u32";
  }
  return "spans"; // unknown to this package: passed on, the core checks it
}

function loadOptions() {
  const schema = JSON.parse(native.configSchema());
  const options = {};
  const nodeEnv = {};
  const schemaEnv = {};
  for (const o of schema.options) {
    if (o.env) schemaEnv[o.name] = o.env;
    if (!o.node || o.type === "collections") continue;
    const node = { ...o.node };
    if (node.values) {
      // The Node names in the core's order of its values.
      node.names = (o.limits?.values ?? []).map((v) => Object.keys(node.values).find((k) => node.values[k] === v));
    }
    options[o.node.name] = [o.name, kindOf(o), node];
    if (o.node.env) nodeEnv[o.node.name] = [o.node.env, o.name];
  }
  return { options, nodeEnv, schemaEnv };
}

const { options: OPTIONS, nodeEnv: NODE_ENV, schemaEnv: SCHEMA_ENV } = loadOptions();

// A byte size as the core reads it: a number and an optional unit, "64 MiB".
const SIZE = /^\s*(\d+(?:\.\d+)?)\s*(b|k|kb|kib|m|mb|mib|g|gb|gib|t|tb|tib)?\s*$/i;

function byteSize(name, v) {
  if (typeof v === "number" && Number.isSafeInteger(v) && v > 0) return String(v);
  const m = typeof v === "string" ? SIZE.exec(v) : null;
  if (m === null || Number(m[1]) <= 0) fail(name, 'must be a byte size greater than 0, such as "64 MiB"', v);
  return v;
}

// Keyed-state options whose Node form differs from the core's: each gives
// the core options it stands for.
const STATE_OPTIONS = {
  subsystem: (v) => ({ subsystem: kinds.string("subsystem", v) }),
  stateOwnedCacheSize: (v) => ({ state_owned_cache_size: byteSize("stateOwnedCacheSize", v) }),
  stateReadCacheSize: (v) => ({ state_read_cache_size: byteSize("stateReadCacheSize", v) }),
  // {ttlMs} or {disabled: true}: the core's state_read_cache_ttl, a
  // duration or "none".
  stateReadCache: (v) => {
    if (v === null || typeof v !== "object" || Array.isArray(v)) fail("stateReadCache", "must be an object {ttlMs?, disabled?}", v);
    if (v.ttlMs !== undefined && v.disabled !== undefined) {
      throw new ConfigurationError("stateReadCache: cannot set both ttlMs and disabled");
    }
    if (v.disabled !== undefined) {
      kinds.bool("stateReadCache.disabled", v.disabled);
      return v.disabled ? { state_read_cache_ttl: "none" } : {};
    }
    if (v.ttlMs !== undefined) return { state_read_cache_ttl: kinds.ms("stateReadCache.ttlMs", v.ttlMs) };
    return {};
  },
};
// The core's names of these, for its messages.
const STATE_CORE_NAMES = {
  state_owned_cache_size: "stateOwnedCacheSize",
  state_read_cache_size: "stateReadCacheSize",
  state_read_cache_ttl: "stateReadCache",
};

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
    // Publication (JSON collections; the core checks that and that a
    // subsystem is named).
    if (c.published !== undefined) {
      if (typeof c.published !== "boolean") throw new ConfigurationError(`${at}.published: must be true or false, got ${describe(c.published)}`);
      out.published = c.published;
    }
    if (c.readCache !== undefined) {
      const rc = c.readCache;
      if (rc === false) {
        out.read_cache = false;
      } else if (rc !== null && typeof rc === "object" && !Array.isArray(rc)) {
        const ms = rc.ttlMs;
        if (typeof ms !== "number" || !Number.isInteger(ms) || ms < 0 || ms > U32_MAX) {
          throw new ConfigurationError(`${at}.readCache.ttlMs: must be a whole number in 0..=${U32_MAX}`);
        }
        out.read_cache = { ttl_ms: ms };
      } else {
        throw new ConfigurationError(`${at}.readCache: must be {ttlMs: number} or false, got ${describe(rc)}`);
      }
    }
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
    if (Object.hasOwn(STATE_OPTIONS, name)) {
      Object.assign(out, STATE_OPTIONS[name](value));
      continue;
    }
    const entry = OPTIONS[name];
    if (!entry) {
      unknown.push(name);
      continue;
    }
    const [snake, kind, node] = entry;
    out[snake] = kinds[kind](name, value, node);
  }
  for (const [name, [env, snake]] of Object.entries(NODE_ENV)) {
    const raw = process.env[env];
    if (!(snake in out) && raw !== undefined && raw.trim() !== "") {
      // Passed as given: the core parses whole numbers and duration strings.
      out[snake] = /^\s*\d+\s*$/.test(raw) && name !== "loaderSeekTimeoutMs" ? Number(raw) : raw;
    }
  }
  // Where the Node docs are stricter than the core (idempotenceCacheSize:
  // the core reads 0 as "no id cache"), the schema gives the Node minimum;
  // it holds for the option and for its variable alike.
  for (const [name, [snake, , node]] of Object.entries(OPTIONS)) {
    if (node.min === undefined) continue;
    const env = SCHEMA_ENV[snake];
    const raw = out[snake] ?? (env !== undefined ? process.env[env] : undefined);
    if (raw === undefined || String(raw).trim() === "") continue;
    const n = Number(raw);
    if (Number.isFinite(n) && n < node.min) {
      const from = out[snake] === undefined ? ` (from ${env})` : "";
      throw new ConfigurationError(`${name}: must be ${node.min === 1 ? "greater than 0" : `at least ${node.min}`}, got ${raw}${from}`);
    }
  }
  return { json: JSON.stringify(out), unknown };
}

module.exports = { toCoreJSON, Mode, ConfigurationError, OPTIONS, STATE_CORE_NAMES };
