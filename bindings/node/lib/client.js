"use strict";

const util = require("node:util");
const native = require("./native");
const telemetry = require("./telemetry");
const { toCoreJSON, ConfigurationError, OPTIONS, STATE_CORE_NAMES } = require("./config");
const { TransientError, PermanentError, fromNative } = require("./errors");
const { Dispatcher } = require("./events");
const keyedState = require("./state");

const ConsumerState = Object.freeze({
  Shutdown: "Shutdown",
  Unconfigured: "Unconfigured",
  Configured: "Configured",
  Running: "Running",
  ConfigurationFailed: "ConfigurationFailed",
});
const STATES = [ConsumerState.Unconfigured, ConsumerState.Configured, ConsumerState.Running];
const kShown = Symbol("shown");

// Per-client state of the glue, kept beside (not inside) the native client
// so that any object with a `nativeClient` behaves as a client.
const runtimes = new WeakMap();
function runtimeOf(nativeClient) {
  let rt = runtimes.get(nativeClient);
  if (rt === undefined) {
    rt = { dispatcher: null, shutdown: null, closed: false, collections: null };
    runtimes.set(nativeClient, rt);
  }
  return rt;
}

// The core names options in snake_case; users wrote camelCase. Each line
// of its message gets both names: "maxConcurrency (max_concurrency): ...".
const CAMEL = Object.fromEntries(Object.entries(OPTIONS).map(([camel, [snake]]) => [snake, camel]));
CAMEL.state_collections = "stateCollections";
Object.assign(CAMEL, STATE_CORE_NAMES);
function configError(message) {
  const text = message
    .split("\n")
    .map((line) => line.replace(/^([a-z_]+)(?=[:\[])/, (snake) => (CAMEL[snake] && CAMEL[snake] !== snake ? `${CAMEL[snake]} (${snake})` : snake)))
    .join("\n");
  return new ConfigurationError(text);
}

function abortError(reason) {
  if (reason instanceof Error) return reason;
  const err = new Error(reason === undefined ? "This operation was aborted" : String(reason));
  err.name = "AbortError";
  return err;
}

class ProsodyClient {
  /**
   * Builds a client synchronously; no network I/O happens here. Throws on
   * an invalid configuration, naming the option.
   */
  constructor(config) {
    const { json, unknown } = toCoreJSON(config);
    for (const name of unknown) {
      process.emitWarning(`ProsodyClient: unknown option "${name}" is ignored`, { type: "ProsodyWarning", code: "PROSODY_UNKNOWN_OPTION" });
    }
    let nativeClient;
    try {
      nativeClient = new native.Client(json);
    } catch (e) {
      throw e.code === "PROSODY_ERR_CONFIG" ? configError(e.message) : e;
    }
    try {
      nativeClient.consumerState();
    } catch (e) {
      nativeClient.release().catch(() => {});
      throw configError(`consumer configuration failed: ${e.message}`);
    }
    this.nativeClient = nativeClient;
    // The registered collections, by name: context.state() checks a
    // definition's payload kind against them (the C ABI opens by name and
    // kind only).
    if (Array.isArray(config.stateCollections) && config.stateCollections.length > 0) {
      runtimeOf(nativeClient).collections = new Map(config.stateCollections.map((c) => [c.name, { kind: c.kind, payload: c.payload }]));
    }
    // What inspection shows: identifying options only, never credentials.
    Object.defineProperty(this, kShown, {
      value: Object.fromEntries(["mode", "groupId", "subscribedTopics", "bootstrapServers"].map((k) => [k, config[k]])),
    });
  }

  /** util.inspect / console.log: mode, group, topics, servers and state; never secrets. */
  [util.inspect.custom](depth, options, inspect) {
    const shown = this[kShown] ?? {};
    return `ProsodyClient ${inspect({ ...shown, consumerState: this.consumerState }, options)}`;
  }

  /** The original's asynchronous factory; equivalent to `new ProsodyClient(config)`. */
  static async create(config) {
    return new ProsodyClient(config);
  }

  get sourceSystem() {
    return this.nativeClient.sourceSystem();
  }

  get consumerState() {
    const rt = runtimeOf(this.nativeClient);
    if (rt.closed) return ConsumerState.Shutdown;
    try {
      return STATES[this.nativeClient.consumerState()] ?? ConsumerState.ConfigurationFailed;
    } catch (e) {
      return e.code === "PROSODY_ERR_CLOSED" ? ConsumerState.Shutdown : ConsumerState.ConfigurationFailed;
    }
  }

  get assignedPartitionCount() {
    if (runtimeOf(this.nativeClient).closed) return 0;
    return this.nativeClient.assignedPartitionCount();
  }

  get isStalled() {
    if (runtimeOf(this.nativeClient).closed) return false;
    return this.nativeClient.isStalled();
  }

  /**
   * Sends `payload` as JSON under `key`. Resolves once the broker has it.
   * Aborting `signal` settles early; the record may still be delivered.
   */
  async send(topic, key, payload, signal) {
    if (typeof topic !== "string") throw new TypeError("send: topic must be a string");
    if (typeof key !== "string") throw new TypeError("send: key must be a string");
    let json;
    try {
      json = JSON.stringify(payload);
    } catch (e) {
      throw new TransientError(`send: payload cannot be represented as JSON: ${e.message}`, { cause: e });
    }
    if (json === undefined) throw new TransientError(`send: payload cannot be represented as JSON: ${typeof payload}`);
    if (signal?.aborted) throw abortError(signal.reason);
    const trace = telemetry.inject();
    const sent = this.nativeClient
      .send(topic, key, json, trace?.traceparent, trace?.tracestate, trace?.baggage)
      .catch((e) => {
        throw fromNative(e);
      });
    if (!signal) return sent;
    let onAbort;
    const aborted = new Promise((_, reject) => {
      onAbort = () => reject(abortError(signal.reason));
      signal.addEventListener("abort", onAbort, { once: true });
    });
    sent.catch(() => {}); // settled by the race below or ignored after an abort
    try {
      return await Promise.race([sent, aborted]);
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
  }

  /**
   * A read-only reader of the collection `definition` names that
   * `subsystem` publishes (a JSON definition made by value(), map() or
   * deque(); anything else rejects with TypeError).
   */
  async state(subsystem, definition) {
    return keyedState.openPublished(this.nativeClient, subsystem, definition);
  }

  /**
   * Starts consuming with `handler` (an object with optional onMessage and
   * onTimer). Resolves once the consumer runs.
   */
  async subscribe(handler) {
    if (handler === null || (typeof handler !== "object" && typeof handler !== "function")) {
      throw new TypeError("subscribe: handler must be an object with onMessage and/or onTimer");
    }
    for (const name of ["onMessage", "onTimer"]) {
      const fn = handler[name];
      if (fn !== undefined && typeof fn !== "function") throw new TypeError(`EventHandler.${name} must be a function`);
    }
    const rt = runtimeOf(this.nativeClient);
    if (rt.closed) throw new PermanentError("subscribe: the client was shut down");
    const dispatcher = new Dispatcher(handler, rt.collections);
    try {
      await this.nativeClient.subscribe(dispatcher.onBatch);
    } catch (e) {
      throw fromNative(e);
    }
    rt.dispatcher = dispatcher;
  }

  /** Stops consuming: in-flight work finishes (or is cancelled), offsets are committed. */
  async unsubscribe() {
    const rt = runtimeOf(this.nativeClient);
    try {
      await this.nativeClient.unsubscribe();
    } catch (e) {
      throw fromNative(e);
    }
    rt.dispatcher = null;
  }

  /** Stops everything and releases the client. Repeated calls share one Promise. */
  shutdown() {
    const rt = runtimeOf(this.nativeClient);
    rt.shutdown ??= (async () => {
      if (rt.dispatcher !== null) await this.unsubscribe().catch(() => {});
      rt.closed = true;
      await this.nativeClient.release().catch(() => {});
    })();
    return rt.shutdown;
  }
}

class AdminClient {
  /**
   * @param bootstrapServers "host:port", a comma-separated list or an array
   * @param options extension: `{mock: true}` uses the in-memory cluster
   */
  constructor(bootstrapServers, options = {}) {
    // mock and the Kafka security options, converted like the client's.
    const { json, unknown } = toCoreJSON({ ...options, bootstrapServers });
    for (const name of unknown) {
      process.emitWarning(`AdminClient: unknown option "${name}" is ignored`, { type: "ProsodyWarning", code: "PROSODY_UNKNOWN_OPTION" });
    }
    try {
      this.nativeAdmin = new native.Admin(json);
    } catch (e) {
      throw e.code === "PROSODY_ERR_CONFIG" ? new ConfigurationError(e.message) : e;
    }
  }

  async createTopic(name, partitionCount, replicationFactor) {
    if (typeof name !== "string" || name === "") throw new TypeError("createTopic: name must be a non-empty string");
    for (const [what, v] of [["partitionCount", partitionCount], ["replicationFactor", replicationFactor]]) {
      if (!Number.isInteger(v) || v < 1 || v > 65535) throw new RangeError(`createTopic: ${what} must be a whole number in 1..=65535, got ${v}`);
    }
    const spec = JSON.stringify({ name, partition_count: partitionCount, replication_factor: replicationFactor });
    try {
      await this.nativeAdmin.createTopic(spec);
    } catch (e) {
      throw fromNative(e);
    }
  }

  async deleteTopic(name) {
    if (typeof name !== "string" || name === "") throw new TypeError("deleteTopic: name must be a non-empty string");
    try {
      await this.nativeAdmin.deleteTopic(name);
    } catch (e) {
      throw fromNative(e);
    }
  }

  /** Releases the connections (also done when the object is collected). */
  close() {
    this.nativeAdmin.release();
  }
}

module.exports = { ProsodyClient, AdminClient, ConsumerState };
