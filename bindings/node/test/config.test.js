"use strict";
// Construction and validation: option translation, units, the core's
// messages, env fallback, unknown options.
const test = require("node:test");
const assert = require("node:assert/strict");
const { ProsodyClient, ConsumerState, Mode, AdminClient } = require("..");
const { mockConfig } = require("./helpers");

function withEnv(vars, fn) {
  const saved = {};
  for (const [k, v] of Object.entries(vars)) {
    saved[k] = process.env[k];
    process.env[k] = v;
  }
  try {
    return fn();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

test("a valid mock configuration builds a configured client", async () => {
  const client = new ProsodyClient(mockConfig({ sourceSystem: "src-a" }));
  assert.equal(client.consumerState, ConsumerState.Configured);
  assert.equal(client.sourceSystem, "src-a");
  assert.equal(client.assignedPartitionCount, 0);
  assert.equal(client.isStalled, false);
  await client.shutdown();
  assert.equal(client.consumerState, ConsumerState.Shutdown);
});

test("sourceSystem defaults to groupId; a producer-only client is Unconfigured", async () => {
  const a = new ProsodyClient(mockConfig({ sourceSystem: undefined, groupId: "the-group" }));
  assert.equal(a.sourceSystem, "the-group");
  const b = new ProsodyClient({ bootstrapServers: "mock:1", mock: true, sourceSystem: "only-sends" });
  assert.equal(b.consumerState, ConsumerState.Unconfigured);
  await Promise.all([a.shutdown(), b.shutdown()]);
});

test("ProsodyClient.create resolves to an equivalent client", async () => {
  const client = await ProsodyClient.create(mockConfig());
  assert.ok(client instanceof ProsodyClient);
  assert.equal(client.consumerState, ConsumerState.Configured);
  await client.shutdown();
});

test("an object with a nativeClient behaves as a client", async () => {
  const real = new ProsodyClient(mockConfig({ sourceSystem: "borrowed" }));
  const other = Object.create(ProsodyClient.prototype);
  other.nativeClient = real.nativeClient;
  assert.equal(other.sourceSystem, "borrowed");
  assert.equal(other.consumerState, ConsumerState.Configured);
  await real.shutdown();
});

test("shutdown shares one promise", async () => {
  const client = new ProsodyClient(mockConfig());
  const a = client.shutdown();
  assert.equal(client.shutdown(), a);
  await a;
});

test("an unknown option warns with its name and construction goes on", async () => {
  const warnings = [];
  const onWarning = (w) => warnings.push(w);
  process.on("warning", onWarning);
  const client = new ProsodyClient(mockConfig({ notAnOption: 1 }));
  await new Promise((r) => setImmediate(r));
  process.off("warning", onWarning);
  assert.ok(warnings.some((w) => w.message.includes('"notAnOption"')), warnings.map((w) => w.message).join("; "));
  await client.shutdown();
});

test("millisecond options must be whole numbers in u32 range", () => {
  for (const bad of [-1, 1.5, 2 ** 32, "1s", NaN]) {
    assert.throws(() => new ProsodyClient(mockConfig({ sendTimeoutMs: bad })), /sendTimeoutMs: must be a whole number/);
  }
  assert.throws(() => new ProsodyClient(mockConfig({ maxUncommitted: 70000 })), /maxUncommitted: .*0\.\.=65535/);
});

test("units in option names reach the core: timeoutMs 0 is refused as a zero duration", () => {
  assert.throws(() => new ProsodyClient(mockConfig({ timeoutMs: 0 })), /timeoutMs \(timeout\): must be greater than 0/);
  assert.throws(() => new ProsodyClient(mockConfig({ idempotenceTtlS: 59 })), /idempotenceTtlS \(idempotence_ttl\)/);
  // 60 s is the lowest accepted TTL: seconds, not milliseconds.
  return new ProsodyClient(mockConfig({ idempotenceTtlS: 60 })).shutdown();
});

test("the core's validation messages name the option", () => {
  assert.throws(() => new ProsodyClient(mockConfig({ maxConcurrency: 0 })), /maxConcurrency \(max_concurrency\): must be at least 1/);
  assert.throws(() => new ProsodyClient(mockConfig({ messageSpans: "sideways" })), /message_spans/);
  assert.throws(() => new ProsodyClient(mockConfig({ timerSpans: "sideways" })), /timer_spans/);
  assert.throws(() => new ProsodyClient(mockConfig({ mode: "Fast" })), /mode: must be Mode.Pipeline/);
  assert.throws(() => new ProsodyClient(mockConfig({ mode: Mode.LowLatency })), /failureTopic \(failure_topic\)/);
  assert.throws(() => new ProsodyClient({ ...mockConfig(), mock: false }), /cassandraNodes \(cassandra_nodes\)/);
});

test("every mode constructs", async () => {
  for (const mode of Object.values(Mode)) {
    const c = new ProsodyClient(mockConfig({ mode, failureTopic: "dead-letters" }));
    assert.equal(c.consumerState, ConsumerState.Configured);
    await c.shutdown();
  }
});

test("idempotenceCacheSize 0 is refused from the option and from the variable", () => {
  assert.throws(() => new ProsodyClient(mockConfig({ idempotenceCacheSize: 0 })), /idempotenceCacheSize: must be greater than 0/);
  withEnv({ PROSODY_IDEMPOTENCE_CACHE_SIZE: "0" }, () => {
    assert.throws(() => new ProsodyClient(mockConfig()), /PROSODY_IDEMPOTENCE_CACHE_SIZE/);
  });
});

// The library is loaded by now; variables the core reads are still seen when
// they change afterwards in this process.
test("PROSODY_* variables set after the library loaded are seen", () => {
  new ProsodyClient(mockConfig()).shutdown();
  withEnv({ PROSODY_MAX_CONCURRENCY: "lots" }, () => {
    assert.throws(() => new ProsodyClient(mockConfig()), /PROSODY_MAX_CONCURRENCY/);
  });
  const c = new ProsodyClient(mockConfig());
  assert.equal(c.consumerState, ConsumerState.Configured);
  c.shutdown();
});

// Set for a child process, as an application would set them before start.
test("options fall back to PROSODY_* variables; explicit options win", () => {
  const { execFileSync } = require("node:child_process");
  const script = `
    const { ProsodyClient } = require(${JSON.stringify(require.resolve(".."))});
    const base = { bootstrapServers: "mock:1", mock: true, subscribedTopics: "t", probePort: null };
    try { new ProsodyClient(base); console.log("no error"); } catch (e) { console.log(e.message); }
    const c = new ProsodyClient({ ...base, maxConcurrency: 4 });
    console.log("source=" + c.sourceSystem);
    c.shutdown();
  `;
  const out = execFileSync(process.execPath, ["-e", script], {
    env: { ...process.env, PROSODY_GROUP_ID: "from-env", PROSODY_MAX_CONCURRENCY: "0", PROSODY_LOG: "warn" },
    encoding: "utf8",
  });
  // The variable's bad value is reported, naming it...
  assert.match(out, /max_concurrency\): must be at least 1, got 0 \(from PROSODY_MAX_CONCURRENCY\)/);
  // ...unless the option is given; groupId comes from its variable.
  assert.match(out, /source=from-env/);
});

test("the Node loader variables feed the loader options", () => {
  // Read by the binding itself (the core's names are PROSODY_DEFER_*).
  withEnv({ PROSODY_LOADER_CACHE_SIZE: "0" }, () => {
    assert.throws(() => new ProsodyClient(mockConfig()), /loaderCacheSize \(defer_cache_size\)/);
  });
  withEnv({ PROSODY_LOADER_SEEK_TIMEOUT: "soon" }, () => {
    assert.throws(() => new ProsodyClient(mockConfig()), /loaderSeekTimeoutMs \(defer_seek_timeout\)/);
  });
});

test("stateCollections entries are checked with their index", () => {
  assert.throws(
    () => new ProsodyClient(mockConfig({ stateCollections: [{ name: "a", kind: "set", payload: "json" }] })),
    /stateCollections\[0\]\.kind: expected "value", "map", or "deque", got "set"/,
  );
  assert.throws(
    () => new ProsodyClient(mockConfig({ stateCollections: [{ name: "a", kind: "value", payload: "json", capacity: 3 }] })),
    /stateCollections\[0\]\.capacity: only valid for deque collections/,
  );
});

test("the keyed-state options reach the core", async () => {
  const { toCoreJSON } = require("../lib/config");
  const { value, map, messageDeque } = require("..");
  const config = {
    subsystem: "checkout",
    stateOwnedCacheSize: "64 MiB",
    stateReadCacheSize: "1MiB",
    stateReadCache: { ttlMs: 2500 },
    stateCollections: [value("order", { published: true, readCache: { ttlMs: 100 } }), map("m", { published: true, readCache: false }), messageDeque("q", { capacity: 3 })],
  };
  assert.deepEqual(JSON.parse(toCoreJSON(config).json), {
    subsystem: "checkout",
    state_owned_cache_size: "64 MiB",
    state_read_cache_size: "1MiB",
    state_read_cache_ttl: "2500ms",
    state_collections: [
      { name: "order", kind: "value", payload: "json", published: true, read_cache: { ttl_ms: 100 } },
      { name: "m", kind: "map", payload: "json", published: true, read_cache: false },
      { name: "q", kind: "deque", payload: "message", capacity: 3 },
    ],
  });
  assert.equal(JSON.parse(toCoreJSON({ stateReadCache: { disabled: true } }).json).state_read_cache_ttl, "none");
  assert.deepEqual(JSON.parse(toCoreJSON({ stateReadCache: {} }).json), {});
  // The core accepts them.
  const client = new ProsodyClient(mockConfig(config));
  assert.equal(client.consumerState, ConsumerState.Configured);
  await client.shutdown();
});

test("the keyed-state options are checked", () => {
  for (const bad of ["0", "-1 MiB", "nonsense", 0, ""]) {
    assert.throws(() => new ProsodyClient(mockConfig({ stateOwnedCacheSize: bad })), /^ConfigurationError: stateOwnedCacheSize: /m);
  }
  assert.throws(() => new ProsodyClient(mockConfig({ stateReadCacheSize: "0" })), /stateReadCacheSize: /);
  assert.throws(() => new ProsodyClient(mockConfig({ stateReadCache: { ttlMs: 5, disabled: true } })), /stateReadCache: cannot set both ttlMs and disabled/);
  assert.throws(() => new ProsodyClient(mockConfig({ stateReadCache: { ttlMs: -1 } })), /stateReadCache\.ttlMs/);
  assert.throws(() => new ProsodyClient(mockConfig({ subsystem: 7 })), /subsystem: must be a string/);
  const published = { name: "v", kind: "value", payload: "json", published: true };
  assert.throws(() => new ProsodyClient(mockConfig({ stateCollections: [published] })), /stateCollections.*\[0\]\.published: .*subsystem/);
  assert.throws(
    () => new ProsodyClient(mockConfig({ subsystem: "s", stateCollections: [{ ...published, payload: "message" }] })),
    /\[0\]\.published: only JSON collections/,
  );
  assert.throws(() => new ProsodyClient(mockConfig({ stateCollections: [{ ...published, published: "yes" }] })), /\[0\]\.published: must be true or false/);
  assert.throws(() => new ProsodyClient(mockConfig({ stateCollections: [{ name: "v", kind: "value", payload: "json", readCache: true }] })), /\[0\]\.readCache: /);
});

test("the config must be an object", () => {
  assert.throws(() => new ProsodyClient(null), TypeError);
  assert.throws(() => new ProsodyClient("bootstrap"), TypeError);
});

test("AdminClient validates its counts before any I/O", async () => {
  const admin = new AdminClient("mock:1", { mock: true });
  await assert.rejects(admin.createTopic("t", 0, 1), RangeError);
  await assert.rejects(admin.createTopic("t", 1, 70000), RangeError);
  await assert.rejects(admin.deleteTopic(""), TypeError);
  admin.close();
});
