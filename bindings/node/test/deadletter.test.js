"use strict";
// Low-latency mode's failure topic, end to end on the real Kafka
// (PROSODY_TEST_KAFKA, default localhost:9094): the core writes the dead
// letters; kafkajs reads them back raw, headers included.
const test = require("node:test");
const assert = require("node:assert/strict");
const { Kafka, logLevel, ConfigResourceTypes, CompressionTypes, CompressionCodecs } = require("kafkajs");
const lz4 = require("lz4js");
const prosody = require("..");
const { ProsodyClient, AdminClient, Mode } = prosody;
const { KAFKA, realConfig, unique, waitFor } = require("./helpers");

let refusedWrites = 0;
prosody.setLogger({
  error(message) {
    if (message.startsWith("writing the dead letter failed")) refusedWrites++;
  },
  warn() {},
  info() {},
  debug() {},
  trace() {},
});

// The core's producer compresses with LZ4, which kafkajs reads only with a
// codec given to it (lz4js: the LZ4 frame format, in JavaScript).
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  async compress(encoder) {
    return Buffer.from(lz4.compress(encoder.buffer));
  },
  async decompress(buffer) {
    return Buffer.from(lz4.decompress(buffer));
  },
});

const kafka = new Kafka({ brokers: [KAFKA], clientId: "prosody-node-tests", logLevel: logLevel.NOTHING });

/** Every record of topic up to its high-water marks, read raw. */
async function readAll(topic) {
  const admin = kafka.admin();
  await admin.connect();
  const ends = await admin.fetchTopicOffsets(topic);
  await admin.disconnect();
  const want = ends.reduce((n, p) => n + Number(p.high) - Number(p.low), 0);
  if (want === 0) return [];
  const consumer = kafka.consumer({ groupId: unique("reader") });
  const out = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({ eachMessage: async ({ partition, message }) => void out.push({ partition, ...message }) });
    await waitFor(() => out.length >= want, `${want} records of ${topic}`, 60000);
  } finally {
    await consumer.disconnect();
  }
  return out;
}

/** group's committed offsets of topic, by partition (-1: none). */
async function committed(groupId, topic) {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const [t] = await admin.fetchOffsets({ groupId, topics: [topic] });
    return Object.fromEntries(t.partitions.map((p) => [p.partition, Number(p.offset)]));
  } finally {
    await admin.disconnect();
  }
}

async function highWaterMarks(topic) {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const ends = await admin.fetchTopicOffsets(topic);
    return Object.fromEntries(ends.map((p) => [p.partition, Number(p.high)]));
  } finally {
    await admin.disconnect();
  }
}

/** A low-latency consumer's options for source, failing to failures, with quick retries. */
function lowLatency(source, failures, maxRetries) {
  return realConfig({
    subscribedTopics: source, mode: Mode.LowLatency, failureTopic: failures,
    maxRetries, retryBaseMs: 5, maxRetryDelayMs: 50,
  });
}

async function waitForAsync(predicate, what, ms = 60000) {
  const deadline = Date.now() + ms;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test("real Kafka: failures go to the failure topic once, with their key, payload and source headers", { timeout: 180000 }, async () => {
  const admin = new AdminClient(KAFKA);
  const source = unique("node-dlq-src");
  const failures = unique("node-dlq");
  await admin.createTopic(source, 3, 1);
  await admin.createTopic(failures, 1, 1);
  const cfg = lowLatency(source, failures, 1);
  const client = new ProsodyClient(cfg);
  const handled = [];
  try {
    await client.subscribe({
      async onMessage(_ctx, m) {
        if (m.key.startsWith("bad")) throw new Error(`bad key ${m.key}`);
        handled.push(m.key);
      },
    });
    for (let i = 0; i < 40; i++) await client.send(source, i % 4 === 0 ? `bad-${i}` : `good-${i}`, { i });
    await waitFor(() => handled.length === 30, "the good keys", 60000);
    await waitForAsync(async () => {
      const [c, h] = [await committed(cfg.groupId, source), await highWaterMarks(source)];
      return Object.keys(h).every((p) => c[p] === h[p]);
    }, "every offset committed");
    const originals = new Map((await readAll(source)).map((m) => [`${m.partition}/${m.offset}`, m]));
    const letters = await readAll(failures);
    assert.equal(letters.length, 10);
    const seen = new Set();
    for (const dl of letters) {
      const h = dl.headers;
      const where = `${h["source-partition"]}/${h["source-offset"]}`;
      assert.ok(!seen.has(where), `${where} dead-lettered twice`);
      seen.add(where);
      const orig = originals.get(where);
      assert.ok(orig, `no source record ${where}`);
      assert.deepEqual(dl.key, orig.key);
      assert.deepEqual(dl.value, orig.value);
      assert.deepEqual(Object.keys(h).slice(-7), ["source-kind", "source-topic", "source-partition",
        "source-offset", "source-timestamp", "source-group-id", "source-error"]);
      assert.equal(h["source-kind"].toString(), "message");
      assert.equal(h["source-topic"].toString(), source);
      assert.equal(h["source-timestamp"].toString(), new Date(Number(orig.timestamp)).toISOString());
      assert.equal(h["source-group-id"].toString(), cfg.groupId);
      assert.equal(h["source-system"].toString(), cfg.sourceSystem);
      assert.ok(h["source-error"].toString().includes(`bad key ${orig.key}`));
    }
  } finally {
    await client.shutdown();
    await admin.deleteTopic(source).catch(() => {});
    await admin.deleteTopic(failures).catch(() => {});
    admin.close();
  }
});

test("real Kafka: a failed message is not committed before its dead letter is written", { timeout: 180000 }, async () => {
  const raw = kafka.admin();
  await raw.connect();
  const admin = new AdminClient(KAFKA);
  const source = unique("node-dlq-one");
  const failures = unique("node-dlq-refusing");
  await admin.createTopic(source, 1, 1);
  // The broker refuses every write of the dead letter: it is larger than
  // the topic's max.message.bytes.
  await raw.createTopics({ topics: [{ topic: failures, numPartitions: 1, replicationFactor: 1,
    configEntries: [{ name: "max.message.bytes", value: "100" }] }] });
  const cfg = lowLatency(source, failures, 0);
  const client = new ProsodyClient(cfg);
  const handled = [];
  try {
    await client.subscribe({
      async onMessage(_ctx, m) {
        if (m.key === "bad") throw new Error("always fails");
        handled.push(m.key);
      },
    });
    // Offsets 0-4 good, 5 bad, 6-19 good.
    for (let i = 0; i < 20; i++) await client.send(source, i === 5 ? "bad" : `good-${i}`, { i });
    await waitFor(() => handled.length === 19, "the later keys", 60000);
    await waitForAsync(async () => (await committed(cfg.groupId, source))[0] === 5, "the offset committed up to the failed message");
    const before = refusedWrites;
    await waitFor(() => refusedWrites >= before + 3, "three more refused writes", 60000);
    assert.equal((await committed(cfg.groupId, source))[0], 5);
    assert.equal((await readAll(failures)).length, 0);
    await raw.alterConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: failures,
      configEntries: [{ name: "max.message.bytes", value: "1048588" }] }] });
    await waitForAsync(async () => (await committed(cfg.groupId, source))[0] === 20, "the offsets moving on");
    const letters = await readAll(failures);
    assert.deepEqual(letters.map((dl) => [dl.key.toString(), dl.headers["source-offset"].toString()]), [["bad", "5"]]);
  } finally {
    await client.shutdown();
    await raw.disconnect();
    await admin.deleteTopic(source).catch(() => {});
    await admin.deleteTopic(failures).catch(() => {});
    admin.close();
  }
});
