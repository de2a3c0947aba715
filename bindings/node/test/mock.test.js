"use strict";
// Behaviour of the binding against mock mode (the in-process Kafka cluster):
// messages, ordering, concurrency, timers, errors, cancellation, logging.
const test = require("node:test");
const assert = require("node:assert/strict");
const path = require("node:path");
const { execFile } = require("node:child_process");
const prosody = require("..");
const { ProsodyClient, ConsumerState, Mode, PermanentError, TransientError, AdminClient } = prosody;
const { mockConfig, waitFor, deferred, unique } = require("./helpers");

// Quiet by default; the logging test installs its own logger.
const records = [];
prosody.setLogger({
  error: (m, md) => records.push(["error", m, md]),
  warn: (m, md) => records.push(["warn", m, md]),
  info: (m, md) => records.push(["info", m, md]),
  debug: (m, md) => records.push(["debug", m, md]),
  trace: (m, md) => records.push(["trace", m, md]),
});

async function withClient(extra, fn) {
  const client = new ProsodyClient(mockConfig(extra));
  try {
    return await fn(client, client_topic(extra, client));
  } finally {
    await client.shutdown();
  }
}
function client_topic(extra) {
  return extra.subscribedTopics;
}

test("the quickstart example runs in mock mode and exits by itself", async () => {
  const script = path.join(__dirname, "..", "..", "..", "examples", "node", "quickstart.js");
  const { stdout } = await new Promise((resolve, reject) => {
    execFile(process.execPath, [script], { timeout: 30000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message}\n${stdout}\n${stderr}`)) : resolve({ stdout, stderr }),
    );
  });
  assert.match(stdout, /Received message: .*"key":"message-key".*"payload":\{"content":"Hello, Kafka!","scheduleFollowup":true\}/);
  assert.match(stdout, /Timer fired for key: message-key/);
  assert.match(stdout, /quickstart: done/);
});

test("a message arrives with typed fields; the client runs and stops", async () => {
  const topic = unique("fields");
  await withClient({ subscribedTopics: topic }, async (client) => {
    const got = deferred();
    await client.subscribe({ onMessage: (ctx, message, signal) => got.resolve({ ctx, message, signal }) });
    assert.equal(client.consumerState, ConsumerState.Running);
    const before = Date.now();
    await client.send(topic, "k-1", { id: "e-1", type: "t.created", n: 7 });
    const { message, signal } = await got.promise;
    assert.equal(message.topic, topic);
    assert.equal(message.key, "k-1");
    assert.equal(typeof message.partition, "number");
    assert.equal(typeof message.offset, "bigint");
    assert.equal(message.offset, 0n);
    assert.ok(message.timestamp instanceof Date);
    assert.ok(Math.abs(message.timestamp.getTime() - before) < 10000);
    assert.deepEqual(message.payload, { id: "e-1", type: "t.created", n: 7 });
    assert.equal(message.payload, message.payload, "payload is parsed once and cached");
    assert.ok(!Object.keys(message).includes("payload"), "fields are not own-enumerable");
    assert.ok(signal instanceof AbortSignal);
    await waitFor(() => client.assignedPartitionCount > 0, "partitions");
    await client.unsubscribe();
    assert.equal(client.consumerState, ConsumerState.Configured);
  });
});

test("messages of one key are handled in order, one at a time", async () => {
  const topic = unique("order");
  await withClient({ subscribedTopics: topic }, async (client) => {
    const seen = new Map();
    const active = new Map();
    let overlaps = 0;
    let total = 0;
    await client.subscribe({
      async onMessage(_ctx, m) {
        if (active.get(m.key)) overlaps++;
        active.set(m.key, true);
        await new Promise((r) => setTimeout(r, Math.random() * 3));
        (seen.get(m.key) ?? seen.set(m.key, []).get(m.key)).push(m.payload.seq);
        active.set(m.key, false);
        total++;
      },
    });
    const keys = ["a", "b", "c", "d"];
    // Each key's sends are awaited in turn (the C ABI does not keep the
    // order of concurrent sends); the keys interleave.
    await Promise.all(
      keys.map(async (k) => {
        for (let seq = 0; seq < 40; seq++) await client.send(topic, k, { seq });
      }),
    );
    await waitFor(() => total === 160, "160 messages");
    assert.equal(overlaps, 0);
    for (const k of keys) assert.deepEqual(seen.get(k), [...Array(40).keys()], `order of key ${k}`);
  });
});

test("different keys are handled concurrently", async () => {
  const topic = unique("concurrent");
  await withClient({ subscribedTopics: topic, maxConcurrency: 16 }, async (client) => {
    const all = deferred();
    let inFlight = 0;
    let peak = 0;
    await client.subscribe({
      async onMessage() {
        inFlight++;
        peak = Math.max(peak, inFlight);
        if (inFlight === 8) all.resolve();
        // Each handler waits until eight run at once: only possible when
        // the keys really run concurrently.
        await Promise.race([all.promise, new Promise((r) => setTimeout(r, 5000))]);
        inFlight--;
      },
    });
    for (let i = 0; i < 8; i++) await client.send(topic, `key-${i}`, { i });
    await waitFor(() => peak >= 8, "eight concurrent handlers", 10000);
  });
});

test("mock timers: schedule, list, fire with key and whole-second time", async () => {
  const topic = unique("timers");
  await withClient({ subscribedTopics: topic }, async (client) => {
    const fired = deferred();
    let listed;
    const at = new Date(Math.ceil(Date.now() / 1000) * 1000 + 1400); // rounds to a whole second
    await client.subscribe({
      async onMessage(ctx) {
        await ctx.schedule(at);
        await ctx.schedule(new Date(at.getTime() + 60000));
        await ctx.schedule(new Date(at.getTime() + 120000));
        await ctx.unschedule(new Date(at.getTime() + 120000));
        listed = await ctx.scheduled();
      },
      async onTimer(ctx, timer, signal) {
        fired.resolve({ timer, left: await ctx.scheduled(), signal });
        await ctx.clearScheduled();
      },
    });
    await client.send(topic, "timer-key", { go: true });
    const { timer, left, signal } = await fired.promise;
    assert.equal(timer.key, "timer-key");
    assert.ok(timer.time instanceof Date);
    assert.equal(timer.time.getTime() % 1000, 0);
    assert.equal(timer.time.getTime(), Math.round(at.getTime() / 1000) * 1000);
    assert.equal(listed.length, 2);
    assert.ok(listed.every((d) => d instanceof Date));
    assert.deepEqual(left.map((d) => d.getTime()), [listed[1].getTime()]);
    assert.ok(signal instanceof AbortSignal);
  });
});

test("clearAndSchedule replaces the key's timers", async () => {
  const topic = unique("replace");
  await withClient({ subscribedTopics: topic }, async (client) => {
    const result = deferred();
    await client.subscribe({
      async onMessage(ctx) {
        const base = Date.now() + 3600_000;
        await ctx.schedule(new Date(base));
        await ctx.schedule(new Date(base + 1000));
        await ctx.clearAndSchedule(new Date(base + 5000));
        result.resolve(await ctx.scheduled());
      },
    });
    await client.send(topic, "k", {});
    const times = await result.promise;
    assert.equal(times.length, 1);
  });
});

test("a thrown Error is transient and retried; a PermanentError is not", async () => {
  const topic = unique("errors");
  await withClient({ subscribedTopics: topic, retryBaseMs: 10 }, async (client) => {
    const attempts = { transient: 0, permanent: 0, sync: 0, decorated: 0 };
    const decorated = prosody.permanent(RangeError)(async () => {
      attempts.decorated++;
      throw new RangeError("out of range");
    });
    await client.subscribe({
      async onMessage(_ctx, m) {
        const kind = m.payload.kind;
        if (kind === "transient") {
          if (++attempts.transient < 3) throw new Error("try again");
        } else if (kind === "permanent") {
          attempts.permanent++;
          throw new PermanentError("never works");
        } else if (kind === "decorated") {
          await decorated();
        }
      },
    });
    await client.send(topic, "k1", { kind: "transient" });
    await client.send(topic, "k2", { kind: "permanent" });
    await client.send(topic, "k3", { kind: "decorated" });
    await waitFor(() => attempts.transient === 3 && attempts.permanent === 1 && attempts.decorated === 1, "attempts");
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(attempts.permanent, 1, "a permanent failure is not retried");
    assert.equal(attempts.decorated, 1, "@permanent makes the error permanent");
    assert.equal(attempts.transient, 3);
  });
});

test("a synchronous throw and a missing onTimer are handled", async () => {
  const topic = unique("sync");
  await withClient({ subscribedTopics: topic, retryBaseMs: 10 }, async (client) => {
    let calls = 0;
    await client.subscribe({
      onMessage(ctx) {
        if (++calls === 1) throw new TransientError("first call fails");
        return ctx.schedule(new Date(Date.now() - 1000)); // fires at once; no onTimer: acknowledged
      },
    });
    await client.send(topic, "k", {});
    await waitFor(() => calls === 2, "the retry");
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(calls, 2);
  });
});

test("subscribe validates the handler before touching the native layer", async () => {
  await withClient({}, async (client) => {
    await assert.rejects(client.subscribe({ onMessage: 3 }), { name: "TypeError", message: "EventHandler.onMessage must be a function" });
    await assert.rejects(client.subscribe({ onTimer: "x" }), { name: "TypeError", message: "EventHandler.onTimer must be a function" });
    await assert.rejects(client.subscribe(null), TypeError);
    assert.equal(client.consumerState, ConsumerState.Configured);
  });
});

test("subscribing twice is refused; resubscribing after unsubscribe works", async () => {
  const topic = unique("resub");
  await withClient({ subscribedTopics: topic }, async (client) => {
    await client.subscribe({});
    await assert.rejects(client.subscribe({}), /subscribed/);
    await client.unsubscribe();
    const got = deferred();
    await client.subscribe({ onMessage: (_c, m) => got.resolve(m.payload) });
    await client.send(topic, "k", { again: true });
    assert.deepEqual(await got.promise, { again: true });
  });
});

test("a handler timeout aborts the signal and resolves onCancel", async () => {
  const topic = unique("timeout");
  await withClient({ subscribedTopics: topic, timeoutMs: 300, mode: Mode.BestEffort }, async (client) => {
    const seen = deferred();
    await client.subscribe({
      async onMessage(ctx, _m, signal) {
        const started = Date.now();
        assert.equal(ctx.shouldCancel, false);
        await ctx.onCancel();
        seen.resolve({ aborted: signal.aborted, reason: signal.reason, shouldCancel: ctx.shouldCancel, ms: Date.now() - started });
        throw signal.reason;
      },
    });
    await client.send(topic, "slow", {});
    const r = await seen.promise;
    assert.equal(r.aborted, true);
    assert.equal(r.reason.message, "message cancelled");
    assert.equal(r.shouldCancel, true);
    assert.ok(r.ms >= 250 && r.ms < 5000, `cancelled after ${r.ms} ms`);
  });
});

test("unsubscribe cancels handlers still running", async () => {
  const topic = unique("drain");
  await withClient({ subscribedTopics: topic, shutdownTimeoutMs: 1000 }, async (client) => {
    const started = deferred();
    let abortedAt = 0;
    await client.subscribe({
      async onMessage(_ctx, _m, signal) {
        started.resolve();
        await new Promise((resolve) => signal.addEventListener("abort", resolve));
        abortedAt = Date.now();
      },
    });
    await client.send(topic, "k", {});
    await started.promise;
    const t0 = Date.now();
    await client.unsubscribe();
    assert.ok(abortedAt > 0, "the signal was aborted");
    assert.ok(abortedAt - t0 < 1500, `abort after ${abortedAt - t0} ms`);
  });
});

test("unsubscribe starts no handler that had not started when it was called", async () => {
  // Every permit is held by a handler waiting at the gate when unsubscribe
  // is called: those finish, and no queued message starts after the call.
  const topic = unique("nostart");
  const permits = 4, quick = 20;
  await withClient({ subscribedTopics: topic, maxConcurrency: permits }, async (client) => {
    const gate = deferred();
    let starts = 0, blocked = 0;
    await client.subscribe({
      async onMessage() {
        starts += 1;
        if (starts > quick) {
          blocked += 1;
          await gate.promise;
        }
      },
    });
    for (let i = 0; i < 200; i++) await client.send(topic, `k${i % 50}`, { i });
    await waitFor(() => blocked === permits, "every permit held by a blocked handler");
    const partitions = client.assignedPartitionCount;
    const startedBefore = starts;
    const draining = () => records.filter(([, m, md]) => m === "partition released; draining" && md.topic === topic).length;
    const unsubscribing = client.unsubscribe();
    await waitFor(() => draining() === partitions, "every partition draining");
    gate.resolve();
    await unsubscribing;
    assert.equal(starts - startedBefore, 0, `handlers started after unsubscribe began (${startedBefore} before it)`);
  });
});

test("onCancel also resolves once the handler has finished", async () => {
  const topic = unique("finished");
  await withClient({ subscribedTopics: topic }, async (client) => {
    const ctxP = deferred();
    await client.subscribe({ onMessage: (ctx) => void ctxP.resolve(ctx) });
    await client.send(topic, "k", {});
    const ctx = await ctxP.promise;
    await ctx.onCancel();
    assert.equal(ctx.shouldCancel, true);
    await assert.rejects(ctx.schedule(new Date()), PermanentError);
  });
});

test("send: abort, non-JSON payloads, producer errors", async () => {
  await withClient({}, async (client) => {
    const ac = new AbortController();
    ac.abort("timer cancelled");
    await assert.rejects(client.send("t", "k", {}, ac.signal), { message: "timer cancelled" });
    await assert.rejects(client.send("t", "k", { n: 1n }), TransientError);
    await assert.rejects(client.send("t", "k", undefined), TransientError);
    await assert.rejects(client.send("t", 5, {}), TypeError);
    const later = new AbortController();
    const p = client.send(unique("t"), "k", { ok: true }, later.signal);
    later.abort(new Error("stop waiting"));
    await p.then(
      () => {}, // delivered before the abort was seen: allowed
      (e) => assert.equal(e.message, "stop waiting"),
    );
  });
  const producerOnly = new ProsodyClient({ bootstrapServers: "mock:1", mock: true });
  await assert.rejects(producerOnly.send("t", "k", {}), PermanentError); // no source system: cannot send
  await producerOnly.shutdown();
});

test("core log records reach the logger with their attributes", async () => {
  const topic = unique("logs");
  await withClient({ subscribedTopics: topic }, async (client) => {
    await client.subscribe({});
    await waitFor(() => records.some(([, m, md]) => m === "partition assigned" && md.topic === topic), "a partition log record");
    const [level, , md] = records.find(([, m, md]) => m === "partition assigned" && md.topic === topic);
    assert.equal(level, "info");
    assert.ok(md.time instanceof Date);
    assert.equal(typeof md.partition, "string");
  });
  assert.equal(prosody.loggerIsSet(), true);
  assert.equal(prosody.setLoggerIfUnset(console), false);
  assert.throws(() => prosody.setLogger({ info() {} }), TypeError);
});

test("AdminClient creates topics in the mock cluster", async () => {
  const topic = unique("admin");
  const admin = new AdminClient("mock:1", { mock: true });
  await admin.createTopic(topic, 3, 1);
  await withClient({ subscribedTopics: topic }, async (client) => {
    await client.subscribe({});
    await waitFor(() => client.assignedPartitionCount === 3, "three partitions");
  });
  await admin.deleteTopic(topic);
  admin.close();
});

test("pipeline mode defers a poisoned key: the other keys move on, its later messages run after it, in order", async () => {
  const topic = unique("poison");
  await withClient({ subscribedTopics: topic, deferBaseMs: 1000, deferMaxDelayMs: 2000 }, async (client) => {
    const attempts = [];
    const handled = [];
    await client.subscribe({
      onMessage(_ctx, m) {
        if (m.key === "poison" && m.payload.seq === 0) {
          attempts.push(Date.now());
          if (attempts.length <= 5) throw new Error(`attempt ${attempts.length} fails`);
        }
        handled.push([m.key, m.payload.seq]);
      },
    });
    await client.send(topic, "poison", { seq: 0 });
    for (let i = 0; i < 10; i++) await client.send(topic, `healthy-${i}`, { seq: i });
    await client.send(topic, "poison", { seq: 1 });
    await client.send(topic, "poison", { seq: 2 });
    const poisoned = () => handled.filter(([k]) => k === "poison").map(([, s]) => s);
    await waitFor(() => handled.filter(([k]) => k.startsWith("healthy")).length === 10, "the healthy keys");
    assert.deepEqual(poisoned(), []);
    await waitFor(() => poisoned().length === 3, "the poisoned key", 60000);
    assert.deepEqual(poisoned(), [0, 1, 2]);
    assert.equal(attempts.length, 6);
    for (let i = 2; i < attempts.length; i++) {
      assert.ok(attempts[i] - attempts[i - 1] > 400, `retry ${i} came ${attempts[i] - attempts[i - 1]} ms after the one before`);
    }
  });
});

test("a new owner skips what was handled but not committed (in-memory ids, a cold cache)", async () => {
  // One partition; its first message never finishes, so nothing after it
  // is committed when the first consumer stops. The next consumer reads
  // everything again and skips what the first handled, by event id or,
  // without one, by offset.
  const topic = unique("dedup");
  const admin = new AdminClient("mock:1", { mock: true });
  await admin.createTopic(topic, 1, 1);
  admin.close();
  const group = unique("group");
  const producer = new ProsodyClient(mockConfig({ subscribedTopics: undefined, groupId: undefined }));
  try {
    await producer.send(topic, "blocker", { seq: 0 });
    for (let seq = 1; seq <= 6; seq++) {
      await producer.send(topic, `k${seq % 3}`, seq % 2 === 0 ? { seq, id: `event-${seq}` } : { seq });
    }
    const firstSeen = [];
    await withClient({ subscribedTopics: topic, groupId: group, shutdownTimeoutMs: 200 }, async (first) => {
      await first.subscribe({
        async onMessage(_ctx, m, signal) {
          if (m.key === "blocker") {
            await new Promise((resolve) => signal.addEventListener("abort", resolve));
            throw new Error("stopped before finishing");
          }
          firstSeen.push(m.payload.seq);
        },
      });
      await waitFor(() => firstSeen.length === 6, "all but the blocker handled");
    });
    await producer.send(topic, "k1", { seq: 7, id: "event-7" });
    // A copy of a handled id, from a producer whose id cache has not seen it.
    const other = new ProsodyClient(mockConfig({ subscribedTopics: undefined, groupId: undefined }));
    try {
      await other.send(topic, "k2", { seq: 8, id: "event-2" });
    } finally {
      await other.shutdown();
    }
    const secondSeen = [];
    await withClient({ subscribedTopics: topic, groupId: group }, async (second) => {
      await second.subscribe({ async onMessage(_ctx, m) { secondSeen.push(m.payload.seq); } });
      await waitFor(() => secondSeen.length === 2, "the blocker and the new message");
    });
    // Everything was committed: a third consumer handles only what is new.
    const thirdSeen = [];
    await withClient({ subscribedTopics: topic, groupId: group }, async (third) => {
      await third.subscribe({ async onMessage(_ctx, m) { thirdSeen.push(m.payload.seq); } });
      await producer.send(topic, "k9", { seq: 9 });
      await waitFor(() => thirdSeen.length === 1, "the fresh message");
    });
    assert.deepEqual(secondSeen.sort((a, b) => a - b), [0, 7]);
    assert.deepEqual(thirdSeen, [9]);
  } finally {
    await producer.shutdown();
  }
});
