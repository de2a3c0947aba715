"use strict";
// Against the real test services: Kafka on PROSODY_TEST_KAFKA (default
// localhost:9094), Cassandra on PROSODY_TEST_CASSANDRA (localhost:9042).
// They are started by `make services-up`; these tests fail, not skip,
// when they are missing.
const test = require("node:test");
const assert = require("node:assert/strict");
const prosody = require("..");
const { ProsodyClient, AdminClient, ConsumerState } = prosody;
const { KAFKA, realConfig, unique, waitFor, deferred } = require("./helpers");

prosody.setLogger({ error() {}, warn() {}, info() {}, debug() {}, trace() {} });

const KEYSPACE = "prosody_node_tests";

async function withTopic(partitions, fn) {
  const admin = new AdminClient(KAFKA);
  const topic = unique("node-real");
  await admin.createTopic(topic, partitions, 1);
  try {
    return await fn(topic);
  } finally {
    await admin.deleteTopic(topic).catch(() => {});
    admin.close();
  }
}

test("real Kafka: admin, send and consume in per-key order", { timeout: 120000 }, async () => {
  await withTopic(4, async (topic) => {
    const client = new ProsodyClient(realConfig({ subscribedTopics: topic, cassandraKeyspace: KEYSPACE }));
    try {
      const seen = new Map();
      let total = 0;
      await client.subscribe({
        async onMessage(_ctx, m) {
          assert.equal(m.topic, topic);
          (seen.get(m.key) ?? seen.set(m.key, []).get(m.key)).push(m.payload.seq);
          total++;
        },
      });
      assert.equal(client.consumerState, ConsumerState.Running);
      await waitFor(() => client.assignedPartitionCount === 4, "four partitions assigned", 60000);
      const keys = ["k1", "k2", "k3", "k4", "k5", "k6"];
      await Promise.all(keys.map(async (k) => {
        for (let seq = 0; seq < 25; seq++) await client.send(topic, k, { seq });
      }));
      await waitFor(() => total === 150, "150 messages", 60000);
      for (const k of keys) assert.deepEqual(seen.get(k), [...Array(25).keys()]);
      await client.unsubscribe();
      assert.equal(client.assignedPartitionCount, 0);
    } finally {
      await client.shutdown();
    }
  });
});

test("real Kafka: subscribing to a missing topic fails naming it", { timeout: 60000 }, async () => {
  const missing = unique("no-such-topic");
  const client = new ProsodyClient(realConfig({ subscribedTopics: missing, cassandraKeyspace: KEYSPACE }));
  try {
    await assert.rejects(client.subscribe({}), (e) => e.message.includes(missing));
  } finally {
    await client.shutdown();
  }
});

test("real Kafka and Cassandra: a durable timer fires", { timeout: 120000 }, async () => {
  await withTopic(1, async (topic) => {
    const client = new ProsodyClient(realConfig({ subscribedTopics: topic, cassandraKeyspace: KEYSPACE }));
    try {
      const fired = deferred();
      let due;
      let listed;
      await client.subscribe({
        async onMessage(ctx) {
          due = new Date(Math.round(Date.now() / 1000) * 1000 + 3000);
          await ctx.schedule(due);
          listed = await ctx.scheduled();
        },
        onTimer: (_ctx, timer) => fired.resolve(timer),
      });
      await waitFor(() => client.assignedPartitionCount === 1, "partition assigned", 60000);
      await client.send(topic, "timer-key", { schedule: true });
      const timer = await fired.promise;
      assert.equal(timer.key, "timer-key");
      assert.equal(timer.time.getTime(), due.getTime());
      assert.deepEqual(listed.map((d) => d.getTime()), [due.getTime()]);
      assert.ok(Date.now() >= due.getTime() - 500, "not early");
    } finally {
      await client.shutdown();
    }
  });
});

test("real Kafka: a producer's send fails for a broker that is not there", { timeout: 30000 }, async () => {
  const client = new ProsodyClient({ bootstrapServers: "127.0.0.1:1", sourceSystem: "nobody", sendTimeoutMs: 1500 });
  try {
    const t0 = Date.now();
    await assert.rejects(client.send(unique("t"), "k", {}), (e) => e instanceof prosody.EventHandlerError);
    assert.ok(Date.now() - t0 < 10000, "sendTimeoutMs bounds the send");
  } finally {
    await client.shutdown();
  }
});

test("real Kafka: random keys (NUL included) and payloads arrive byte-exact", { timeout: 120000 }, async () => {
  // A fixed-seed generator, so a failure is repeatable.
  let seed = 18;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  const alphabet = ["\u0000", "\u0001", "\u007f", "a", "Z", " ", "é", "\u2028", "\ufffd", "😀", "\u{10fffd}", "\\", '"'];
  const text = (n) => {
    let s = "";
    for (let i = 0; i < n; i++) s += rand() < 0.7 ? alphabet[Math.floor(rand() * alphabet.length)] : String.fromCharCode(0x20 + Math.floor(rand() * (0xd7ff - 0x20)));
    return s;
  };
  const cases = [];
  for (let i = 0; i < 150; i++) {
    cases.push([`${i}:${text(Math.floor(rand() * 40))}`, { i, s: text(Math.floor(rand() * 200)), n: rand() * 2e9 - 1e9, l: [text(3), null, true] }]);
  }
  await withTopic(4, async (topic) => {
    const client = new ProsodyClient(realConfig({ subscribedTopics: topic, cassandraKeyspace: KEYSPACE }));
    try {
      const got = new Map();
      await client.subscribe({ onMessage: (_ctx, m) => void got.set(m.key, m.payload) });
      await Promise.all(cases.map(([key, payload]) => client.send(topic, key, payload)));
      await waitFor(() => got.size >= cases.length, "every message", 60000);
      assert.deepEqual(got, new Map(cases));
    } finally {
      await client.shutdown();
    }
  });
});

test("real Kafka: the telemetry topic gets the sends and the handler's events, flushed by flushTelemetry", { timeout: 120000 }, async () => {
  await withTopic(1, async (topic) => {
    const telemetryTopic = unique("node-telemetry");
    const admin = new AdminClient(KAFKA);
    await admin.createTopic(telemetryTopic, 1, 1);
    const client = new ProsodyClient(realConfig({
      subscribedTopics: topic, cassandraKeyspace: KEYSPACE, telemetryEnabled: true, telemetryTopic,
    }));
    const sender = new ProsodyClient(realConfig({ telemetryEnabled: true, telemetryTopic }));
    // A second consumer reads the telemetry topic back: its records are
    // JSON documents keyed by the event's key.
    const reader = new ProsodyClient(realConfig({ subscribedTopics: telemetryTopic, cassandraKeyspace: KEYSPACE }));
    const events = [];
    try {
      let handled = 0;
      await client.subscribe({ async onMessage() { handled++; } });
      await reader.subscribe({ async onMessage(_ctx, m) { assert.equal(m.key, m.payload.key); events.push(m.payload); } });
      for (const k of ["t1", "t2", "t3"]) await sender.send(topic, k, { id: k });
      await waitFor(() => handled === 3, "three messages handled", 60000);
      await prosody.flushTelemetry();
      const of = (type) => events.filter((e) => e.type === type).map((e) => e.key).sort();
      await waitFor(() => of("prosody.message.sent").length === 3 && of("prosody.message.succeeded").length === 3,
        "the sends and the successes on the telemetry topic", 60000);
      assert.deepEqual(of("prosody.message.sent"), ["t1", "t2", "t3"]);
      assert.deepEqual(of("prosody.message.dispatched"), ["t1", "t2", "t3"]);
      const succeeded = events.find((e) => e.type === "prosody.message.succeeded");
      assert.deepEqual(Object.keys(succeeded),
        ["type", "eventTime", "offset", "topic", "partition", "key", "source", "hostname", "demandType"]);
      assert.equal(succeeded.topic, topic);
      assert.equal(succeeded.demandType, "normal");
    } finally {
      await reader.shutdown();
      await client.shutdown();
      await sender.shutdown();
      await admin.deleteTopic(telemetryTopic).catch(() => {});
      admin.close();
    }
  });
});
