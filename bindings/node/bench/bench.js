#!/usr/bin/env node
// No-op async handler throughput on the real Kafka: Prosody against kafkajs
// (eachMessage) and @confluentinc/kafka-javascript (its KafkaJS-compatible
// eachMessage), on one pre-filled topic, in one run. Each consumer reads
// the whole topic from the earliest offset with a fresh group; the rate is
// measured from its first message to its last.
//
//   (cd bindings/node/bench && npm install)   # bench-only dependencies
//   node bindings/node/bench/bench.js --messages 200000
//
// Options: --brokers (PROSODY_TEST_KAFKA or localhost:9094), --cassandra
// (PROSODY_TEST_CASSANDRA or localhost:9042), --messages 200000,
// --partitions 8, --keys 10000, --topic NAME (reuse a filled topic),
// --only prosody,kafkajs,confluent, --rounds 1, --handler noop|read,
// --json FILE (also write the results there, in the shape of the Go
// programs' -json files: internal/benchkit.Report).
//
// --handler sleep5 is the key-ordered workload: every Prosody handler
// awaits a 5 ms timer, so with maxConcurrency 32 (the default) the rate
// cannot pass 32 / 5 ms = 6,400 messages/s, the nominal bound; the reader
// sleeps-alone (in --only) is 32 loops that only await those timers for
// two seconds, without Kafka or Prosody: what the event loop's timers
// allow at best.
//
// What each consumer does per message. Every client runs with its
// defaults:
//   Prosody     subscribe({ onMessage }) with the default configuration
//               (mode pipeline, maxConcurrency 32 events in flight across
//               all partitions, one event per key at a time, offsets
//               committed by the core). Before the handler runs, the key
//               is decoded into a string and the payload's JSON text
//               copied into a string (parsed only when read); the handler
//               gets a Message, a Context and an AbortSignal.
//   kafkajs     consumer.run({ eachMessage }) with its defaults (one
//               partition's batch at a time, each message awaited in turn,
//               auto-commit). key and value are Buffers, not decoded.
//   confluent   its KafkaJS-compatible consumer.run({ eachMessage }), same
//               defaults; key and value are Buffers copied from librdkafka.
// Outside mock mode the default configuration deduplicates through
// Cassandra's deduplication table (a lookup and a write per message), which
// Node cannot turn off in pipeline mode (idempotenceCacheSize is at least
// 1); prosody-besteffort (in --only) is Prosody in best-effort mode, which
// has no deduplication, so it measures what the package itself costs.
// prosody-state (in --only) is Prosody with a handler that reads and
// increments one keyed-state value per message (value("count"), kept in
// Cassandra), reporting the handler's p50 and p99 latency too; run it
// beside prosody to see what keyed state costs.
// --handler noop (the default) counts the message and returns, the
// benchmark of the issue. --handler read makes every handler read what an
// application reads: the key as a string and the parsed payload (for
// kafkajs and confluent, key.toString() and JSON.parse(value)).
"use strict";

const crypto = require("node:crypto");
const { parseArgs } = require("node:util");
const prosody = require("../index.js");

const { values: opt } = parseArgs({
  options: {
    brokers: { type: "string", default: process.env.PROSODY_TEST_KAFKA || "localhost:9094" },
    cassandra: { type: "string", default: process.env.PROSODY_TEST_CASSANDRA || "localhost:9042" },
    messages: { type: "string", default: "200000" },
    partitions: { type: "string", default: "8" },
    keys: { type: "string", default: "10000" },
    topic: { type: "string" },
    only: { type: "string", default: "kafkajs,prosody,confluent" },
    rounds: { type: "string", default: "1" },
    handler: { type: "string", default: "noop" },
    json: { type: "string" },
  },
});
if (!["noop", "read", "sleep5"].includes(opt.handler)) {
  throw new Error(`--handler must be noop, read or sleep5, got ${opt.handler}`);
}
if (opt.only.split(",").includes("sleeps-alone") && opt.handler !== "sleep5") {
  throw new Error("--only sleeps-alone needs --handler sleep5");
}
const READ = opt.handler === "read";
const SLEEP_MS = opt.handler === "sleep5" ? 5 : 0;
const CONCURRENCY = 32; // the default maxConcurrency
const { setTimeout: sleep } = require("node:timers/promises");
let sink = 0; // keeps the reads observable
const N = Number(opt.messages);
const brokers = opt.brokers.split(",");
const run = (s) => `${s}-${Date.now().toString(36)}-${crypto.randomBytes(3).toString("hex")}`;

prosody.setLogger({ error: console.error, warn: console.warn, info() {}, debug() {}, trace() {} });

function payload(i) {
  // About 200 bytes of JSON with the id/type fields Prosody reads.
  return JSON.stringify({ id: `evt-${i}`, type: "bench.event", seq: i, data: "x".repeat(130) });
}

async function fill(topic) {
  const { Kafka, logLevel, CompressionTypes } = require("kafkajs");
  const admin = new prosody.AdminClient(brokers);
  await admin.createTopic(topic, Number(opt.partitions), 1);
  admin.close();
  const kafka = new Kafka({ clientId: "bench-fill", brokers, logLevel: logLevel.NOTHING });
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const t0 = Date.now();
  const batch = 2000;
  for (let i = 0; i < N; i += batch) {
    const messages = [];
    for (let j = i; j < Math.min(N, i + batch); j++) {
      messages.push({ key: `key-${j % Number(opt.keys)}`, value: payload(j) });
    }
    await producer.send({ topic, messages, compression: CompressionTypes.None });
  }
  await producer.disconnect();
  console.error(`filled ${topic} with ${N} messages in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

// Counts messages; resolves with the first->last rate once N arrived, and
// how busy the JS thread (event-loop utilisation) and the whole process
// (CPU time in cores) were meanwhile.
function counter() {
  let n = 0;
  let first = 0;
  let elu;
  let cpu;
  let done;
  const finished = new Promise((r) => (done = r));
  return {
    finished,
    hit() {
      if (n === 0) {
        first = performance.now();
        elu = performance.eventLoopUtilization();
        cpu = process.cpuUsage();
      }
      if (++n === N) {
        const seconds = (performance.now() - first) / 1000;
        const used = process.cpuUsage(cpu);
        done({
          rate: (N - 1) / seconds,
          busy: performance.eventLoopUtilization(elu).utilization,
          cores: (used.user + used.system) / 1e6 / seconds,
        });
      }
    },
  };
}

function readBuffers(c) {
  return async ({ message }) => {
    sink += message.key.toString().length + (JSON.parse(message.value).seq & 1);
    c.hit();
  };
}

async function benchProsody(topic, options = {}) {
  const c = counter();
  const client = new prosody.ProsodyClient({
    bootstrapServers: brokers,
    cassandraNodes: opt.cassandra,
    cassandraKeyspace: "prosody_bench",
    groupId: run("bench-prosody"),
    subscribedTopics: topic,
    probePort: null,
    telemetryEnabled: false,
    ...options,
  });
  let slept = 0;
  const onMessage = READ
    ? async (_ctx, m) => {
        sink += m.key.length + (m.payload.seq & 1);
        c.hit();
      }
    : SLEEP_MS
      ? async () => {
          const t0 = performance.now();
          await sleep(SLEEP_MS);
          slept += performance.now() - t0;
          c.hit();
        }
      : async () => c.hit();
  await client.subscribe({ onMessage });
  const r = await c.finished;
  await client.shutdown();
  if (SLEEP_MS) r.meanSleepMs = slept / N;
  return r;
}

// sleepsAlone is the rate of CONCURRENCY loops awaiting SLEEP_MS timers
// one after another for two seconds, started a little apart.
async function sleepsAlone() {
  let n = 0;
  const start = performance.now();
  const end = start + 2000;
  const loops = [];
  for (let i = 0; i < CONCURRENCY; i++) {
    loops.push(
      (async () => {
        while (performance.now() < end) {
          await sleep(SLEEP_MS);
          n++;
        }
      })(),
    );
    await sleep(SLEEP_MS / CONCURRENCY);
  }
  await Promise.all(loops);
  const rate = n / ((performance.now() - start) / 1000);
  return { rate, busy: 0, cores: 0, meanSleepMs: (CONCURRENCY / rate) * 1000 };
}

async function benchProsodyState(topic) {
  const c = counter();
  const COUNT = prosody.value("count", { ttlSeconds: 86400 });
  const client = new prosody.ProsodyClient({
    bootstrapServers: brokers,
    cassandraNodes: opt.cassandra,
    cassandraKeyspace: "prosody_bench",
    groupId: run("bench-prosody-state"),
    subscribedTopics: topic,
    probePort: null,
    telemetryEnabled: false,
    stateCollections: [COUNT],
  });
  const latencies = new Float64Array(N);
  let i = 0;
  await client.subscribe({
    async onMessage(ctx) {
      const start = performance.now();
      const count = ctx.state(COUNT);
      await count.set(((await count.get()) ?? 0) + 1);
      if (i < N) latencies[i++] = performance.now() - start;
      c.hit();
    },
  });
  const r = await c.finished;
  await client.shutdown();
  const sorted = latencies.slice(0, i).sort();
  r.p50 = sorted[Math.floor(sorted.length / 2)];
  r.p99 = sorted[Math.floor(sorted.length * 0.99)];
  return r;
}

async function benchKafkajs(topic) {
  const { Kafka, logLevel } = require("kafkajs");
  const c = counter();
  const kafka = new Kafka({ clientId: "bench-kafkajs", brokers, logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: run("bench-kafkajs") });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({ eachMessage: READ ? readBuffers(c) : async () => c.hit() });
  const r = await c.finished;
  await consumer.disconnect();
  return r;
}

async function benchConfluent(topic) {
  const { Kafka, logLevel } = require("@confluentinc/kafka-javascript").KafkaJS;
  const c = counter();
  const kafka = new Kafka({ kafkaJS: { clientId: "bench-confluent", brokers, logLevel: logLevel.NOTHING } });
  const consumer = kafka.consumer({ kafkaJS: { groupId: run("bench-confluent"), fromBeginning: true } });
  await consumer.connect();
  await consumer.subscribe({ topic });
  await consumer.run({ eachMessage: READ ? readBuffers(c) : async () => c.hit() });
  const r = await c.finished;
  await consumer.disconnect();
  return r;
}

const BENCHES = {
  kafkajs: benchKafkajs,
  prosody: (topic) => benchProsody(topic),
  "prosody-besteffort": (topic) => benchProsody(topic, { mode: "BestEffort" }),
  confluent: benchConfluent,
  "prosody-state": benchProsodyState,
  "sleeps-alone": sleepsAlone,
};

// The median as the Go programs' benchkit.Median takes it (the upper one
// for an even count), so every figure of the results file means the same.
function upperMedian(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function writeReport(file, metrics, baseline) {
  const fs = require("node:fs");
  const path = require("node:path");
  const readers = Object.entries(metrics).map(([name, ms]) => ({
    name,
    metrics: Object.fromEntries(Object.entries(ms).map(([m, rounds]) => [m, { rounds, median: upperMedian(rounds) }])),
  }));
  const base = readers.find((r) => r.name === baseline);
  for (const r of readers) {
    if (!base) break;
    const ratios = {};
    for (const [m, v] of Object.entries(r.metrics)) {
      if (base.metrics[m]?.median) ratios[m] = v.median / base.metrics[m].median;
    }
    if (Object.keys(ratios).length) r.ratios = ratios;
  }
  const report = {
    benchmark: "bindings/node/bench/bench.js",
    unit: "msg/s",
    baseline,
    params: {
      messages: N,
      partitions: Number(opt.partitions),
      keys: Number(opt.keys),
      rounds: Number(opt.rounds),
      handler: opt.handler,
      node: process.version,
    },
    readers,
  };
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(report, null, 2) + "\n");
}

async function main() {
  const topic = opt.topic ?? run("bench-node");
  if (!opt.topic) await fill(topic);
  const names = opt.only.split(",");
  const results = {};
  const latency = {};
  const metrics = {};
  const add = (name, metric, v) => ((metrics[name] ??= {})[metric] ??= []).push(v);
  for (let round = 0; round < Number(opt.rounds); round++) {
    // Alternate the order between rounds so no client always goes first.
    const order = round % 2 === 0 ? names : [...names].reverse();
    for (const name of order) {
      const { rate, busy, cores, p50, p99, meanSleepMs } = await BENCHES[name](topic);
      (results[name] ??= []).push(rate);
      add(name, "rate", rate);
      add(name, "js_busy", busy);
      add(name, "cpu_us_per_msg", (cores / rate) * 1e6);
      if (p99 !== undefined) {
        add(name, "handler_p50_ms", p50);
        add(name, "handler_p99_ms", p99);
      }
      if (p99 !== undefined) (latency[name] ??= []).push([p50, p99]);
      if (meanSleepMs !== undefined) {
        const bound = CONCURRENCY / (SLEEP_MS / 1000);
        add(name, "of_bound", rate / bound);
        add(name, "mean_sleep_ms", meanSleepMs);
        add(name, "of_sleeps_bound", rate / (CONCURRENCY / (meanSleepMs / 1000)));
        console.error(`  ${(rate / bound).toFixed(2)} of the bound ${bound}; the sleeps took ${meanSleepMs.toFixed(3)} ms on average`);
      }
      const lat = p99 !== undefined ? `, handler p50 ${p50.toFixed(2)} ms p99 ${p99.toFixed(2)} ms` : "";
      console.error(
        `round ${round + 1} ${name}: ${Math.round(rate).toLocaleString("en-US")} msg/s ` +
          `(JS thread busy ${Math.round(busy * 100)}%, process ${cores.toFixed(2)} cores${lat})`,
      );
    }
  }
  const median = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    const h = Math.floor(s.length / 2);
    return s.length % 2 === 1 ? s[h] : (s[h - 1] + s[h]) / 2;
  };
  const base = results.kafkajs ? median(results.kafkajs) : null;
  console.log(`topic ${topic}: ${N} messages, ${opt.partitions} partitions, ${opt.keys} keys, handler ${opt.handler}, median of ${opt.rounds}`);
  for (const [name, rates] of Object.entries(results)) {
    const m = median(rates);
    const ratio = base ? ` (${(m / base).toFixed(2)}x kafkajs)` : "";
    const lat = latency[name]
      ? `, handler p50 ${median(latency[name].map((l) => l[0])).toFixed(2)} ms p99 ${median(latency[name].map((l) => l[1])).toFixed(2)} ms`
      : "";
    console.log(`${name.padEnd(14)} ${Math.round(m).toLocaleString("en-US").padStart(10)} msg/s${ratio}${lat}`);
  }
  if (sink < 0) console.log(sink);
  if (opt.json) writeReport(opt.json, metrics, base ? "kafkajs" : names[0]);
  process.exit(0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
