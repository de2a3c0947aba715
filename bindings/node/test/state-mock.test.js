"use strict";
// Keyed state end to end in mock mode (the in-process cluster and state
// store): per-key values, visibility within and across attempts, commit()
// and rollback(), map scans, deque capacity, message collections, handles
// leaked past their attempt, registration errors.
const test = require("node:test");
const assert = require("node:assert/strict");
const prosody = require("..");
const {
  ProsodyClient,
  TransientError,
  TransientStateError,
  PermanentStateError,
  Message,
  value,
  map,
  deque,
  messageDeque,
  messageValue,
  messageMap,
} = prosody;
const { mockConfig, waitFor, deferred, unique } = require("./helpers");

prosody.setLogger({ error() {}, warn() {}, info() {}, debug() {}, trace() {} });

/**
 * Runs `fn(client, topic, send)` with a mock client registering
 * `collections`; send(key, payload) sends to the client's topic.
 */
async function withState(collections, extra, fn) {
  const topic = unique("state");
  const client = new ProsodyClient(mockConfig({ subscribedTopics: topic, retryBaseMs: 10, stateCollections: collections, ...extra }));
  try {
    return await fn(client, topic, (key, payload) => client.send(topic, key, payload));
  } finally {
    await client.shutdown();
  }
}

test("a counter per key: each key's state is its own and survives across events", async () => {
  const COUNT = value("count", { ttlSeconds: 3600 });
  await withState([COUNT], {}, async (client, _topic, send) => {
    const counts = [];
    await client.subscribe({
      async onMessage(ctx, message) {
        const count = ctx.state(COUNT);
        const next = ((await count.get()) ?? 0) + 1;
        await count.set(next);
        counts.push([message.key, next]);
      },
    });
    for (const key of ["a", "b", "a", "c", "a", "b"]) await send(key, { key });
    await waitFor(() => counts.length === 6, "six messages");
    const last = Object.fromEntries(counts);
    assert.deepEqual(last, { a: 3, b: 2, c: 1 });
    for (const key of ["a", "b", "c"]) {
      assert.deepEqual(
        counts.filter(([k]) => k === key).map(([, n]) => n),
        [...Array(last[key]).keys()].map((i) => i + 1),
        `key ${key} counts up by one`,
      );
    }
  });
});

test("writes are visible within the attempt; handles are cached per definition", async () => {
  const V = value("v");
  const M = map("m");
  const D = deque("d");
  await withState([V, M, D], {}, async (client, _topic, send) => {
    const got = deferred();
    await client.subscribe({
      async onMessage(ctx) {
        try {
          const v = ctx.state(V);
          assert.equal(ctx.state(V), v);
          assert.equal(await v.get(), null);
          await v.set({ n: 1, s: "x", list: [true, null] });
          const afterSet = await v.get();
          await v.clear();
          const afterClear = await v.get();

          const m = ctx.state(M);
          await m.set("b", 2);
          await m.set("a", 1);
          await m.set("c", 3);
          await m.delete("c");
          const mapView = {
            get: await m.get("a"),
            missing: await m.get("zz"),
            has: [await m.has("a"), await m.has("c")],
            many: await m.getMany(["b", "zz", "a"]),
            none: await m.getMany([]),
            entries: await collect(m.entries()),
            keys: await collect(m.keys("backward")),
            values: await collect(m.values()),
            iter: await collect(m),
          };

          const d = ctx.state(D);
          await d.push("b");
          await d.push("c");
          await d.unshift("a");
          const dequeView = {
            len: await d.length(),
            empty: await d.isEmpty(),
            at: [await d.at(0), await d.at(1), await d.at(2), await d.at(3), await d.at(-1), await d.at(-3), await d.at(-4)],
            values: await collect(d.values()),
            backward: await collect(d.values("backward")),
            pop: await d.pop(),
            shift: await d.shift(),
            rest: await collect(d),
          };
          await d.clear();
          got.resolve({ afterSet, afterClear, mapView, dequeView, emptyAfter: await d.isEmpty(), popEmpty: await d.pop() });
        } catch (e) {
          got.reject(e);
        }
      },
    });
    await send("k", {});
    const r = await got.promise;
    assert.deepEqual(r.afterSet, { n: 1, s: "x", list: [true, null] });
    assert.equal(r.afterClear, null);
    assert.deepEqual(r.mapView, {
      get: 1,
      missing: null,
      has: [true, false],
      many: [2, null, 1],
      none: [],
      entries: [["a", 1], ["b", 2]],
      keys: ["b", "a"],
      values: [1, 2],
      iter: [["a", 1], ["b", 2]],
    });
    assert.deepEqual(r.dequeView, {
      len: 3,
      empty: false,
      at: ["a", "b", "c", null, "c", "a", null],
      values: ["a", "b", "c"],
      backward: ["c", "b", "a"],
      pop: "c",
      shift: "a",
      rest: ["b"],
    });
    assert.equal(r.emptyAfter, true);
    assert.equal(r.popEmpty, null);
  });
});

async function collect(it) {
  const out = [];
  for await (const v of it) out.push(v);
  return out;
}

test("a transient failure discards the attempt's writes; success commits them", async () => {
  const V = value("v");
  const M = map("m");
  await withState([V, M], {}, async (client, _topic, send) => {
    const seen = [];
    const done = deferred();
    await client.subscribe({
      async onMessage(ctx, message) {
        const v = ctx.state(V);
        const m = ctx.state(M);
        seen.push({ n: message.payload.n, value: await v.get(), entries: await collect(m.entries()) });
        await v.set(`written by ${message.payload.n} attempt ${seen.length}`);
        await m.set(`k${seen.length}`, seen.length);
        if (message.payload.n === 1 && seen.length === 1) throw new TransientError("fail the first attempt");
        if (message.payload.n === 2) done.resolve();
      },
    });
    await send("k", { n: 1 });
    await send("k", { n: 2 });
    await done.promise;
    assert.deepEqual(seen, [
      { n: 1, value: null, entries: [] },
      { n: 1, value: null, entries: [] }, // the failed attempt left nothing
      { n: 2, value: "written by 1 attempt 2", entries: [["k2", 2]] },
    ]);
  });
});

test("commit() sets a floor that survives a later failure; rollback() returns to it", async () => {
  const V = value("v");
  const D = deque("d");
  await withState([V, D], {}, async (client, _topic, send) => {
    const seen = [];
    const done = deferred();
    await client.subscribe({
      async onMessage(ctx, message) {
        const v = ctx.state(V);
        const d = ctx.state(D);
        const attempt = seen.length + 1;
        seen.push({ attempt, n: message.payload.n, value: await v.get(), items: await collect(d) });
        if (message.payload.n === 1 && attempt === 1) {
          await v.set("committed");
          await d.push("committed");
          await v.commit();
          await d.commit();
          await v.set("uncommitted");
          await d.push("uncommitted");
          throw new TransientError("fail after commit");
        }
        if (message.payload.n === 1) {
          await v.set("rolled back");
          await d.push("rolled back");
          await v.rollback();
          await d.rollback();
          seen.push({ afterRollback: await v.get(), items: await collect(d) });
          return;
        }
        done.resolve();
      },
    });
    await send("k", { n: 1 });
    await send("k", { n: 2 });
    await done.promise;
    assert.deepEqual(seen, [
      { attempt: 1, n: 1, value: null, items: [] },
      { attempt: 2, n: 1, value: "committed", items: ["committed"] },
      { afterRollback: "committed", items: ["committed"] },
      { attempt: 4, n: 2, value: "committed", items: ["committed"] },
    ]);
  });
});

test("map scans over 300+ entries are ordered and distinct in both directions, staged and committed", async () => {
  const M = map("big");
  const N = 333;
  const keys = Array.from({ length: N }, (_, i) => `key-${String(i).padStart(4, "0")}`);
  await withState([M], {}, async (client, _topic, send) => {
    const views = [];
    const done = deferred();
    await client.subscribe({
      async onMessage(ctx, message) {
        try {
          const m = ctx.state(M);
          if (message.payload.step === 1) {
            // Written in a shuffled order; half of them in this attempt.
            for (const i of shuffle([...Array(N).keys()])) await m.set(keys[i], { i });
          } else {
            // Staged changes merge with the stored ones.
            await m.delete(keys[7]);
            await m.set(`${keys[N - 1]}-extra`, { i: -1 });
          }
          views.push({
            forward: await collect(m.keys()),
            backward: await collect(m.keys("backward")),
            entries: await collect(m.entries()),
            values: (await collect(m.values("backward"))).length,
          });
          if (message.payload.step === 2) done.resolve();
        } catch (e) {
          done.reject(e);
        }
      },
    });
    await send("k", { step: 1 });
    await send("k", { step: 2 });
    await done.promise;
    const [first, second] = views;
    assert.deepEqual(first.forward, keys);
    assert.deepEqual(first.backward, [...keys].reverse());
    assert.deepEqual(first.entries.map(([k]) => k), keys);
    assert.ok(first.entries.every(([k, v]) => k === keys[v.i]));
    assert.equal(first.values, N);
    const expected = [...keys.filter((_, i) => i !== 7), `${keys[N - 1]}-extra`].sort();
    assert.deepEqual(second.forward, expected);
    assert.deepEqual(second.backward, [...expected].reverse());
    assert.equal(new Set(second.forward).size, second.forward.length, "distinct");
  });
});

function shuffle(a) {
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

test("breaking out of a scan early leaves the collection usable", async () => {
  const D = deque("d");
  await withState([D], {}, async (client, _topic, send) => {
    const got = deferred();
    await client.subscribe({
      async onMessage(ctx) {
        try {
          const d = ctx.state(D);
          for (let i = 0; i < 600; i++) await d.push(i);
          let n = 0;
          for await (const item of d) {
            if (++n === 10) break;
            void item;
          }
          await d.push(600);
          got.resolve({ len: await d.length(), last: await d.at(-1), count: (await collect(d.values("backward"))).length });
        } catch (e) {
          got.reject(e);
        }
      },
    });
    await send("k", {});
    assert.deepEqual(await got.promise, { len: 601, last: 600, count: 601 });
  });
});

test("a deque with a capacity drops its oldest items", async () => {
  const RECENT = deque("recent", { capacity: 3 });
  await withState([RECENT], {}, async (client, _topic, send) => {
    const views = [];
    await client.subscribe({
      async onMessage(ctx, message) {
        const d = ctx.state(RECENT);
        await d.push(message.payload.seq);
        views.push(await collect(d));
      },
    });
    for (let seq = 1; seq <= 5; seq++) await send("k", { seq });
    await waitFor(() => views.length === 5, "five messages");
    assert.deepEqual(views, [[1], [1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5]]);
  });
});

test("message collections round-trip topic, partition, offset, key, timestamp and payload", async () => {
  const PENDING = messageDeque("pending");
  const LAST = messageValue("last");
  const BY_ID = messageMap("by-id");
  await withState([PENDING, LAST, BY_ID], {}, async (client, topic, send) => {
    const received = [];
    const done = deferred();
    await client.subscribe({
      async onMessage(ctx, message) {
        try {
          received.push(message);
          const pending = ctx.state(PENDING);
          if (message.payload.flush) {
            const batch = await collect(pending.values());
            done.resolve({ batch, last: await ctx.state(LAST).get(), byId: await ctx.state(BY_ID).get("e-2"), front: await pending.at(0) });
            return;
          }
          await pending.push(message);
          await ctx.state(LAST).set(message);
          await ctx.state(BY_ID).set(message.payload.id, message);
        } catch (e) {
          done.reject(e);
        }
      },
    });
    await send("user-1", { id: "e-1", text: "héllo ✓", n: [1, 2] });
    await send("user-1", { id: "e-2", nested: { ok: true } });
    await send("user-1", { flush: true });
    const { batch, last, byId, front } = await done.promise;
    const same = (stored, original) => {
      assert.ok(stored instanceof Message);
      assert.equal(stored.topic, topic);
      assert.equal(stored.partition, original.partition);
      assert.equal(stored.offset, original.offset);
      assert.equal(stored.key, original.key);
      assert.equal(stored.timestamp.getTime(), original.timestamp.getTime());
      assert.deepEqual(stored.payload, original.payload);
    };
    assert.equal(batch.length, 2);
    same(batch[0], received[0]);
    same(batch[1], received[1]);
    same(last, received[1]);
    same(byId, received[1]);
    same(front, received[0]);
  });
});

test("a handle or iterator leaked past its attempt rejects transient and changes nothing", async () => {
  const V = value("v");
  const M = map("m");
  await withState([V, M], {}, async (client, _topic, send) => {
    let leaked;
    let leakedMap;
    let leakedContext;
    let leakedIterator;
    const first = deferred();
    const second = deferred();
    await client.subscribe({
      async onMessage(ctx, message) {
        if (message.payload.n === 1) {
          leaked = ctx.state(V);
          leakedMap = ctx.state(M);
          await leaked.set("kept");
          await leakedMap.set("a", 1);
          await leakedMap.set("b", 2);
          leakedIterator = leakedMap.entries();
          leakedContext = ctx;
          first.resolve();
        } else {
          second.resolve({ v: await ctx.state(V).get(), entries: await collect(ctx.state(M).entries()) });
        }
      },
    });
    await send("k", { n: 1 });
    await first.promise;
    // Give the completion time to go out.
    await new Promise((r) => setTimeout(r, 200));
    await assert.rejects(leaked.get(), TransientStateError);
    await assert.rejects(leaked.set("leaked"), TransientStateError);
    await assert.rejects(leakedMap.set("c", 3), TransientStateError);
    await assert.rejects(leakedIterator.next(), TransientStateError);
    assert.deepEqual(await leakedIterator.next(), { value: undefined, done: true });
    await assert.rejects(async () => leakedContext.state(value("v")).get(), TransientStateError);
    await assert.rejects(async () => leakedContext.state(V).clear(), TransientStateError);
    await send("k", { n: 2 });
    assert.deepEqual(await second.promise, { v: "kept", entries: [["a", 1], ["b", 2]] });
  });
});

test("a handle leaked from a failed attempt rejects transient too", async () => {
  const V = value("v");
  await withState([V], {}, async (client, _topic, send) => {
    let leaked;
    let attempts = 0;
    const done = deferred();
    await client.subscribe({
      async onMessage(ctx) {
        attempts++;
        if (attempts === 1) {
          leaked = ctx.state(V);
          await leaked.set("from the failed attempt");
          throw new TransientError("fail");
        }
        done.resolve(await ctx.state(V).get());
      },
    });
    await send("k", {});
    assert.equal(await done.promise, null);
    await assert.rejects(leaked.get(), TransientStateError);
    await assert.rejects(leaked.set("x"), TransientStateError);
  });
});

test("registration: unknown names and other kinds or payloads are PermanentStateError; null writes TransientStateError", async () => {
  const V = value("v");
  const M = map("m");
  await withState([V, M], {}, async (client, _topic, send) => {
    const got = deferred();
    await client.subscribe({
      async onMessage(ctx) {
        const errors = {};
        const capture = async (name, fn) => {
          try {
            await fn();
            errors[name] = "no error";
          } catch (e) {
            errors[name] = e;
          }
        };
        await capture("unregistered", () => ctx.state(value("never-registered")));
        await capture("otherKind", () => ctx.state(deque("v")));
        await capture("otherPayload", () => ctx.state(messageValue("v")));
        await capture("notADefinition", () => ctx.state({ name: "v", kind: "value", payload: "json" }));
        await capture("nullValue", () => ctx.state(V).set(null));
        await capture("nullMap", () => ctx.state(M).set("a", undefined));
        got.resolve(errors);
      },
    });
    await send("k", {});
    const e = await got.promise;
    assert.ok(e.unregistered instanceof PermanentStateError, String(e.unregistered));
    assert.match(e.unregistered.message, /never-registered|not registered/);
    assert.ok(e.otherKind instanceof PermanentStateError, String(e.otherKind));
    assert.ok(e.otherPayload instanceof PermanentStateError, String(e.otherPayload));
    assert.ok(e.notADefinition instanceof TransientStateError);
    assert.ok(e.nullValue instanceof TransientStateError);
    assert.match(e.nullValue.message, /clear/);
    assert.ok(e.nullMap instanceof TransientStateError);
  });
});

test("timers see their key's state", async () => {
  const V = value("v");
  await withState([V], {}, async (client, _topic, send) => {
    const got = deferred();
    await client.subscribe({
      async onMessage(ctx) {
        await ctx.state(V).set("from the message");
        await ctx.schedule(new Date(Date.now() + 1000));
      },
      async onTimer(ctx, timer) {
        got.resolve([timer.key, await ctx.state(V).get()]);
      },
    });
    await send("timer-key", {});
    assert.deepEqual(await got.promise, ["timer-key", "from the message"]);
  });
});

test("an unawaited write still lands before the event completes", async () => {
  const V = value("v");
  await withState([V], {}, async (client, _topic, send) => {
    const seen = [];
    await client.subscribe({
      onMessage(ctx, message) {
        if (message.payload.n === 1) {
          ctx.state(V).set("not awaited"); // the attempt waits for it
          seen.push("written");
          return;
        }
        return ctx
          .state(V)
          .get()
          .then((v) => seen.push(v));
      },
    });
    await send("k", { n: 1 });
    await send("k", { n: 2 });
    await waitFor(() => seen.length === 2, "two messages");
    assert.deepEqual(seen, ["written", "not awaited"]);
  });
});
