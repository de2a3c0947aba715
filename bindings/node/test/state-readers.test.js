"use strict";
// Published-state readers in mock mode: another client reads the committed
// state an owner publishes (one in-memory store per process), through the
// read cache.
const test = require("node:test");
const assert = require("node:assert/strict");
const prosody = require("..");
const { ProsodyClient, PermanentStateError, PublishedValue, PublishedMap, PublishedDeque, value, map, deque } = prosody;
const { mockConfig, deferred, unique } = require("./helpers");

prosody.setLogger({ error() {}, warn() {}, info() {}, debug() {}, trace() {} });

/**
 * An owner publishing `collections` under a fresh subsystem, subscribed
 * with `handler`, and a reader client with no consumer.
 */
async function withOwner(collections, handler, fn, readerOptions = {}) {
  const topic = unique("published");
  const subsystem = unique("subsystem");
  const owner = new ProsodyClient(mockConfig({ subscribedTopics: topic, subsystem, stateCollections: collections }));
  const reader = new ProsodyClient({ bootstrapServers: "mock:9092", mock: true, probePort: null, ...readerOptions });
  try {
    await owner.subscribe(handler);
    return await fn({ owner, reader, subsystem, send: (key, payload) => owner.send(topic, key, payload) });
  } finally {
    await Promise.all([owner.shutdown(), reader.shutdown()]);
  }
}

/** Polls `read` until it returns something deepEqual to `expected`. */
async function eventually(read, expected, what, ms = 10000) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    last = await read();
    try {
      assert.deepEqual(last, expected);
      return;
    } catch (e) {
      if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(last)} after ${ms} ms`, { cause: e });
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function collect(it) {
  const out = [];
  for await (const v of it) out.push(v);
  return out;
}

test("a published value is read by user key from another client", async () => {
  const ORDER = value("current-order", { published: true, readCache: false });
  const done = [];
  await withOwner(
    [ORDER],
    {
      async onMessage(ctx, message) {
        await ctx.state(ORDER).set(message.payload);
        done.push(message.key);
      },
    },
    async ({ reader, subsystem, send }) => {
      const orders = await reader.state(subsystem, ORDER);
      assert.ok(orders instanceof PublishedValue);
      await send("customer-1", { sku: "book" });
      await send("customer-2", { sku: "pen" });
      await eventually(() => orders.get("customer-1"), { sku: "book" }, "customer-1");
      await eventually(() => orders.get("customer-2"), { sku: "pen" }, "customer-2");
      assert.equal(await orders.get("nobody"), null);
    },
  );
});

test("a published map: get, getMany, has and ordered scans both ways", async () => {
  const TOTALS = map("totals", { published: true, readCache: false });
  const N = 300;
  const keys = Array.from({ length: N }, (_, i) => `item-${String(i).padStart(3, "0")}`);
  await withOwner(
    [TOTALS],
    {
      async onMessage(ctx) {
        const m = ctx.state(TOTALS);
        for (let i = N - 1; i >= 0; i--) await m.set(keys[i], { i });
      },
    },
    async ({ reader, subsystem, send }) => {
      const totals = await reader.state(subsystem, TOTALS);
      assert.ok(totals instanceof PublishedMap);
      await send("user", {});
      await eventually(async () => (await collect(totals.keys("user"))).length, N, "all entries");
      assert.deepEqual(await totals.get("user", keys[5]), { i: 5 });
      assert.equal(await totals.get("user", "missing"), null);
      assert.deepEqual(await totals.getMany("user", [keys[1], "missing", keys[2]]), [{ i: 1 }, null, { i: 2 }]);
      assert.deepEqual(await totals.getMany("user", []), []);
      assert.equal(await totals.has("user", keys[0]), true);
      assert.equal(await totals.has("user", "missing"), false);
      assert.deepEqual(await collect(totals.keys("user")), keys);
      assert.deepEqual(await collect(totals.keys("user", "backward")), [...keys].reverse());
      const entries = await collect(totals.entries("user"));
      assert.deepEqual(entries.map(([k]) => k), keys);
      assert.ok(entries.every(([k, v]) => k === keys[v.i]));
      assert.equal((await collect(totals.values("user", "backward")))[0].i, N - 1);
      assert.deepEqual(await collect(totals.entries("another-user")), []);
    },
  );
});

test("a published deque: length, isEmpty, at and values", async () => {
  const RECENT = deque("recent", { published: true, readCache: false, capacity: 4 });
  await withOwner(
    [RECENT],
    {
      async onMessage(ctx, message) {
        await ctx.state(RECENT).push(message.payload.seq);
      },
    },
    async ({ reader, subsystem, send }) => {
      const recent = await reader.state(subsystem, RECENT);
      assert.ok(recent instanceof PublishedDeque);
      for (let seq = 1; seq <= 6; seq++) await send("user", { seq });
      await eventually(() => collect(recent.values("user")), [3, 4, 5, 6], "the last four");
      assert.equal(await recent.length("user"), 4);
      assert.equal(await recent.isEmpty("user"), false);
      assert.equal(await recent.isEmpty("nobody"), true);
      assert.equal(await recent.at("user", 0), 3);
      assert.equal(await recent.at("user", -1), 6);
      assert.equal(await recent.at("user", -2), 5);
      assert.equal(await recent.at("user", 2), 5);
      assert.equal(await recent.at("user", 4), null);
      assert.equal(await recent.at("user", -5), null);
      assert.equal(await recent.at("user", 2 ** 32), null);
      await assert.rejects(recent.at("user", 0.5), prosody.TransientStateError);
      assert.deepEqual(await collect(recent.values("user", "backward")), [6, 5, 4, 3]);
    },
  );
});

test("readers see committed state only, never an attempt's staged write", async () => {
  const V = value("v", { published: true, readCache: false });
  const staged = deferred();
  const release = deferred();
  await withOwner(
    [V],
    {
      async onMessage(ctx, message) {
        await ctx.state(V).set(message.payload.n);
        if (message.payload.n === 2) {
          staged.resolve();
          await release.promise;
        }
      },
    },
    async ({ reader, subsystem, send }) => {
      const v = await reader.state(subsystem, V);
      await send("k", { n: 1 });
      await eventually(() => v.get("k"), 1, "the first write");
      await send("k", { n: 2 });
      await staged.promise;
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(await v.get("k"), 1, "the staged write is not visible");
      release.resolve();
      await eventually(() => v.get("k"), 2, "the second write once committed");
    },
  );
});

test("the read cache serves within its window; readCache: false reads through", async () => {
  const CACHED = value("cached", { published: true, readCache: { ttlMs: 60000 } });
  const FRESH = value("fresh", { published: true, readCache: false });
  const handled = [];
  await withOwner(
    [CACHED, FRESH],
    {
      async onMessage(ctx, message) {
        await ctx.state(CACHED).set(message.payload.n);
        await ctx.state(FRESH).set(message.payload.n);
        handled.push(message.payload.n);
      },
    },
    async ({ reader, subsystem, send }) => {
      const cached = await reader.state(subsystem, CACHED);
      const fresh = await reader.state(subsystem, FRESH);
      await send("k", { n: 1 });
      await eventually(() => fresh.get("k"), 1, "the first write");
      await eventually(() => cached.get("k"), 1, "the first write, cached");
      await send("k", { n: 2 });
      await eventually(() => fresh.get("k"), 2, "the second write");
      assert.equal(await cached.get("k"), 1, "served from the cache within its window");
    },
  );
});

test("the client's stateReadCache sets the window of readers without their own", async () => {
  const V = value("v", { published: true });
  for (const [options, staleExpected] of [
    [{}, true], // the default window, 5 s
    [{ stateReadCache: { ttlMs: 60000 } }, true],
    [{ stateReadCache: { disabled: true } }, false],
  ]) {
    await withOwner(
      [V],
      {
        async onMessage(ctx, message) {
          await ctx.state(V).set(message.payload.n);
        },
      },
      async ({ reader, subsystem, send }) => {
        const v = await reader.state(subsystem, V);
        // Sees what is committed, bypassing any cache.
        const probe = await reader.state(subsystem, value("v", { published: true, readCache: false }));
        await send("k", { n: 1 });
        await eventually(() => probe.get("k"), 1, "the first write");
        assert.equal(await v.get("k"), 1); // now in the cache, if there is one
        await send("k", { n: 2 });
        await eventually(() => probe.get("k"), 2, "the second write");
        assert.equal(await v.get("k"), staleExpected ? 1 : 2, JSON.stringify(options));
      },
      options,
    );
  }
});

test("a collection the subsystem does not publish rejects with PermanentStateError", async () => {
  const PUBLISHED = value("published", { published: true });
  const PRIVATE = value("private");
  await withOwner(
    [PUBLISHED, PRIVATE],
    { onMessage() {} },
    async ({ reader, subsystem }) => {
      const other = await reader.state(subsystem, PRIVATE);
      await assert.rejects(other.get("k"), PermanentStateError);
      const wrongKind = await reader.state(subsystem, map("published"));
      await assert.rejects(wrongKind.get("k", "x"), PermanentStateError);
      const unknown = await reader.state(unique("nobody"), PUBLISHED);
      await assert.rejects(unknown.get("k"), PermanentStateError);
    },
  );
});

test("client.state refuses message definitions and definitions not from the factories", async () => {
  const reader = new ProsodyClient({ bootstrapServers: "mock:9092", mock: true, probePort: null });
  try {
    await assert.rejects(reader.state("s", prosody.messageValue("m")), TypeError);
    await assert.rejects(reader.state("s", { name: "v", kind: "value", payload: "json" }), TypeError);
  } finally {
    await reader.shutdown();
  }
  await assert.rejects(reader.state("s", value("v")), PermanentStateError, "a shut-down client");
});
