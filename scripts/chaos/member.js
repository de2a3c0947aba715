// The fault harness's Node member (see internal/chaos/member for the Go
// one). Configured by the PROSODY_* variables the harness sets; appends
// one JSON line per handled event, failed attempt and fired timer to
// CHAOS_LOG, each with a single write(2) on an O_APPEND descriptor, so a
// SIGKILL loses nothing already recorded. SIGTERM unsubscribes cleanly.
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const { ProsodyClient, value } = require(path.join(__dirname, "..", "..", "bindings", "node"));

const COUNT = value("count");
const NAME = process.env.CHAOS_MEMBER;
const PID = process.pid;
const fd = fs.openSync(process.env.CHAOS_LOG, "a");
// A payload's fault hits its first attempt in this process only.
const tried = new Set();

// Wall-clock nanoseconds for the checker, which compares them with timer
// times and other processes' clocks. Node's wall clock has whole
// milliseconds, so the true time lies in [ms, ms + 1): the end of that
// interval is used, or a timer's fire could look up to 1 ms early. (A
// monotonic clock anchored once drifts from the wall clock by hundreds of
// microseconds over a few minutes here.)
// A Number cannot hold nanoseconds since 1970 exactly, so the digits are
// spliced into the JSON from a BigInt.
function append(rec) {
  const t = BigInt(Date.now()) * 1000000n + 999999n;
  const line = JSON.stringify({ ...rec, t: "@T@" }).replace('"@T@"', t.toString());
  fs.writeSync(fd, line + "\n");
}

const handler = {
  async onMessage(context, message, signal) {
    const p = message.payload;
    const base = { m: NAME, pid: PID, tp: message.topic, p: message.partition, o: Number(message.offset),
      key: message.key, seq: p.seq, id: p.id };
    if (p.fault && !tried.has(p.id)) {
      tried.add(p.id);
      append({ k: "failed", why: p.fault, ...base });
      if (p.fault === "hang") {
        // Outlive the handler timeout; its abort signal ends the wait.
        await new Promise((resolve) => {
          const t = setTimeout(resolve, 60000);
          signal.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
        });
      }
      throw new Error(`chaos: injected ${p.fault}`);
    }
    let n;
    try {
      if (p.timer) await context.schedule(new Date(p.timer * 1000));
      const count = context.state(COUNT);
      n = ((await count.get()) ?? 0) + 1;
      await count.set(n);
      if (context.shouldCancel) throw new Error("chaos: cancelled");
    } catch (err) {
      // Every failed attempt is on record: the checker excuses a commit
      // past an unhandled event only while its key has one.
      append({ k: "failed", why: String(err && err.name), ...base });
      throw err;
    }
    append({ k: "handled", c: n, ...base });
  },
  async onTimer(context, timer) {
    append({ k: "fired", m: NAME, pid: PID, p: 0, o: 0, key: timer.key,
      at: Math.floor(timer.time.getTime() / 1000) });
  },
};

async function main() {
  const client = new ProsodyClient({ stateCollections: [COUNT], probePort: null });
  await client.subscribe(handler);
  await new Promise((resolve) => {
    process.once("SIGTERM", resolve);
    process.once("SIGINT", resolve);
  });
  await client.unsubscribe();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
