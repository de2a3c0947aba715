#!/usr/bin/env node
// The Node reader of the mixed timer benchmark (`prosody-timer-bench -mixed`).
//
// The Go driver fills a topic with JSON messages {"seq": <int>, ...} under
// string keys, then starts each reader as a process with the same flags and
// parses the last line of its stdout as JSON:
//
//   node bindings/node/bench/timer-bench.js --bootstrap localhost:9094 \
//     --topic T --group G --cassandra localhost:9042 --keyspace KS \
//     --messages 2000 --lead 1 --spread 10 --timeout 120
//
// Needs the package built (`npm ci` at the repository root builds
// libprosody.so and the addon). The consumer has the default configuration
// except bootstrapServers, groupId, subscribedTopics, cassandraNodes and
// cassandraKeyspace (created when absent), with the probe server off
// (probePort: null).
//
// Each message handler takes the wall clock at entry, schedules a timer for
// floor(now) + lead + 1 + seq % spread (whole seconds) and records how long
// `await context.schedule(...)` took (performance.now()); a failing call is
// counted, not thrown. Each timer handler records how late it fired against
// the time the library reports, and whether that (key, time) fired before.
// A redelivered message (same partition and offset) is counted once but
// scheduled again.
//
// The run stops once N distinct messages were handled and every distinct
// (key, time) scheduled successfully has fired, or --timeout seconds after
// the start. Messages of one key handled within the same second schedule the
// same (key, time), which the library keeps as one timer, so `fired` and
// `scheduled` count distinct timers; the successful calls go into
// `schedules_per_s`. Then the reader unsubscribes, shuts the
// client down and prints one JSON line, last on stdout; everything else
// (the library's log records too) goes to stderr. Exit status 0 when the
// line was printed (a timeout too: stderr says so), 2 when the consumer
// could not start.
"use strict";

const { parseArgs } = require("node:util");
const prosody = require("../index.js");

const started = performance.now();

const { values: opt } = parseArgs({
  options: {
    bootstrap: { type: "string" },
    topic: { type: "string" },
    group: { type: "string" },
    cassandra: { type: "string" },
    keyspace: { type: "string" },
    messages: { type: "string" },
    lead: { type: "string", default: "1" },
    spread: { type: "string", default: "10" },
    work: { type: "string", default: "0" }, // ms each message handler then sleeps (I/O it waits for)
    timeout: { type: "string", default: "300" },
  },
});
for (const name of ["bootstrap", "topic", "group", "cassandra", "keyspace", "messages"]) {
  if (opt[name] === undefined) {
    console.error(`timer-bench: --${name} is required`);
    process.exit(2);
  }
}
const N = Number(opt.messages);
const LEAD = Number(opt.lead);
const SPREAD = Number(opt.spread);
const WORK_MS = Number(opt.work);
const TIMEOUT_S = Number(opt.timeout);
if (!(SPREAD >= 1) || !Number.isInteger(LEAD) || !Number.isInteger(N)) {
  console.error("timer-bench: --messages and --lead must be integers, --spread at least 1");
  process.exit(2);
}

// The default logger writes info and debug records to stdout; this one
// sends every record to stderr, in the same format.
const toStderr = (level) => (message, metadata) => {
  let text = `[prosody] ${level} ${message}`;
  for (const [k, v] of Object.entries(metadata || {})) {
    if (k !== "target" && k !== "time") text += ` ${k}=${String(v)}`;
  }
  process.stderr.write(text + "\n");
};
prosody.setLogger({
  error: toStderr("ERROR"),
  warn: toStderr("WARN"),
  info: toStderr("INFO"),
  debug: toStderr("DEBUG"),
  trace: toStderr("TRACE"),
});

function nearestRank(values) {
  if (values.length === 0) return { p50: 0, p99: 0, max: 0 };
  const s = Float64Array.from(values).sort();
  const rank = (p) => s[Math.max(0, Math.ceil(p * s.length) - 1)];
  const r3 = (x) => Math.round(x * 1000) / 1000;
  return { p50: r3(rank(0.5)), p99: r3(rank(0.99)), max: r3(s[s.length - 1]) };
}

const t = {
  seen: new Set(), // "partition:offset"
  scheduledOk: 0,
  scheduleErrors: 0,
  firstError: null,
  scheduleMs: [],
  timers: new Set(), // distinct "key\0second" scheduled successfully
  fired: new Set(),
  pending: 0,
  duplicates: 0,
  early: 0,
  lateMs: [],
  firstStart: 0,
  lastEnd: 0,
  firstSchedule: 0,
  lastSchedule: 0,
};
let finish;
const finished = new Promise((resolve) => (finish = resolve));
const check = () => {
  if (t.seen.size >= N && t.pending === 0) finish(false);
};

const handler = {
  async onMessage(context, message) {
    const start = performance.now();
    const now = Date.now();
    const payload = message.payload;
    const seq = payload !== null && typeof payload === "object" ? Number(payload.seq) || 0 : 0;
    const dueS = Math.floor(now / 1000) + LEAD + 1 + (seq % SPREAD);
    const due = new Date(dueS * 1000);
    let error = null;
    const t0 = performance.now();
    try {
      await context.schedule(due);
    } catch (err) {
      error = err; // counted, never thrown: the message succeeds
    }
    const t1 = performance.now();
    if (WORK_MS > 0) await new Promise((resolve) => setTimeout(resolve, WORK_MS));
    if (t.firstStart === 0) {
      t.firstStart = start;
      t.firstSchedule = t0;
    }
    t.firstStart = Math.min(t.firstStart, start);
    t.firstSchedule = Math.min(t.firstSchedule, t0);
    t.lastEnd = Math.max(t.lastEnd, t1);
    t.lastSchedule = Math.max(t.lastSchedule, t1);
    if (error === null) {
      t.scheduledOk++;
      t.scheduleMs.push(t1 - t0);
      const pair = `${message.key}\0${dueS}`;
      if (!t.timers.has(pair)) {
        t.timers.add(pair);
        if (!t.fired.has(pair)) t.pending++;
      }
    } else {
      t.scheduleErrors++;
      if (t.firstError === null) t.firstError = `${error && error.name}: ${error && error.message}`;
    }
    t.seen.add(`${message.partition}:${message.offset}`);
    check();
  },

  async onTimer(context, timer) {
    const fire = Date.now();
    const at = timer.time.getTime();
    const late = fire - at;
    const pair = `${timer.key}\0${Math.round(at / 1000)}`;
    if (t.fired.has(pair)) {
      t.duplicates++;
      return;
    }
    t.fired.add(pair);
    t.lateMs.push(late);
    if (late < 0) t.early++;
    if (t.timers.has(pair)) t.pending--;
    check();
  },
};

function snapshot() {
  const span = (t.lastSchedule - t.firstSchedule) / 1000;
  const r3 = (x) => Math.round(x * 1000) / 1000;
  return {
    reader: "node",
    messages: t.seen.size,
    scheduled: t.timers.size,
    schedule_errors: t.scheduleErrors,
    fired: t.fired.size,
    duplicates: t.duplicates,
    early: t.early,
    schedule_ms: nearestRank(t.scheduleMs),
    late_ms: nearestRank(t.lateMs),
    schedules_per_s: span > 0 ? r3(t.scheduledOk / span) : 0,
    handling_s: t.firstStart ? r3((t.lastEnd - t.firstStart) / 1000) : 0,
  };
}

const elapsed = () => ((performance.now() - started) / 1000).toFixed(2);

async function main() {
  console.error(`[timer-bench] reader node (Node ${process.version})`);
  let client;
  try {
    client = new prosody.ProsodyClient({
      bootstrapServers: opt.bootstrap,
      groupId: opt.group,
      subscribedTopics: opt.topic,
      cassandraNodes: opt.cassandra,
      cassandraKeyspace: opt.keyspace,
      probePort: null,
    });
    await client.subscribe(handler);
  } catch (err) {
    console.error(`[timer-bench] could not start the consumer: ${err && err.stack ? err.stack : err}`);
    if (client) await client.shutdown().catch(() => {});
    return 2;
  }
  console.error(`[timer-bench] subscribed after ${elapsed()}s`);
  const ticker = setInterval(() => {
    console.error(
      `[timer-bench] ${elapsed().padStart(6)}s messages ${t.seen.size} scheduled ${t.scheduledOk} ` +
        `errors ${t.scheduleErrors} timers ${t.timers.size} fired ${t.fired.size} pending ${t.pending}`,
    );
  }, 5000);
  const remaining = Math.max(0, TIMEOUT_S * 1000 - (performance.now() - started));
  let timer;
  const timedOut = await Promise.race([
    finished,
    new Promise((resolve) => (timer = setTimeout(() => resolve(true), remaining))),
  ]);
  clearTimeout(timer);
  clearInterval(ticker);
  const result = snapshot();
  const pending = t.pending;
  const stop = performance.now();
  try {
    await client.unsubscribe();
  } catch (err) {
    console.error(`[timer-bench] unsubscribe failed: ${err && err.message}`);
  }
  try {
    await client.shutdown();
  } catch (err) {
    console.error(`[timer-bench] shutdown failed: ${err && err.message}`);
  }
  console.error(
    `[timer-bench] ${timedOut ? "TIMED OUT" : "complete"} after ${((stop - started) / 1000).toFixed(2)}s; ` +
      `unsubscribed and shut down in ${((performance.now() - stop) / 1000).toFixed(2)}s; ` +
      `distinct timers ${t.timers.size}, unfired ${pending}` +
      (t.firstError ? `; first schedule error: ${t.firstError}` : ""),
  );
  process.stdout.write(JSON.stringify(result) + "\n");
  return 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    console.error(err);
    process.exitCode = 2;
  },
);
