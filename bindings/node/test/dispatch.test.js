"use strict";
// The dispatcher's fast paths: which callbacks get a real AbortSignal, the
// two batch text layouts (one ASCII string, or an array when some text is
// not ASCII), several topics, synchronous and asynchronous outcomes, and
// OpenTelemetry left out when nothing is registered.
const test = require("node:test");
const assert = require("node:assert/strict");
const prosody = require("..");
const { observesSignal } = require("../lib/events");
const telemetry = require("../lib/telemetry");
const { ProsodyClient, Mode, PermanentError } = prosody;
const { mockConfig, unique, waitFor, deferred } = require("./helpers");

prosody.setLogger({ error() {}, warn() {}, info() {}, debug() {}, trace() {} });

async function withClient(extra, fn) {
  const client = new ProsodyClient(mockConfig(extra));
  try {
    return await fn(client);
  } finally {
    await client.shutdown();
  }
}

test("observesSignal: only callbacks that cannot reach their third argument share the never-aborting signal", () => {
  const cannot = {
    noParams: () => {},
    asyncNoParams: async () => {},
    oneBare: (x) => x,
    oneBareNoParens: (x) => x,
    asyncOne: async (ctx) => ctx,
    two: (ctx, m) => [ctx, m],
    method: {
      onMessage(ctx, m) {
        return [ctx, m];
      },
    }.onMessage,
    asyncMethod: {
      async onMessage(ctx) {
        return ctx;
      },
    }.onMessage,
    fnExpr: function (ctx, m) {
      return [ctx, m];
    },
    named: function handler(ctx) {
      return ctx;
    },
    asyncFn: async function (ctx, m) {
      return [ctx, m];
    },
    generated: new Function("ctx", "m", "return m"),
  };
  for (const [name, fn] of Object.entries(cannot)) assert.equal(observesSignal(fn), false, name);
  // (x) => x is printed with parentheses; make sure a bare parameter is covered too.
  assert.equal(observesSignal(eval("x => x")), false, "bare arrow parameter");

  const can = {
    three: (ctx, m, signal) => signal,
    rest: (...args) => args,
    restAfterOne: (ctx, ...rest) => rest,
    defaulted: (ctx, m, signal = null) => signal,
    defaultedEarly: (ctx, m = null, signal) => signal,
    destructured: ({ a }, [b], signal) => [a, b, signal],
    destructuredTwo: ({ shouldCancel }, { key }) => [shouldCancel, key],
    usesArguments: function (ctx) {
      return arguments[2] ?? ctx;
    },
    usesArgumentsInArrowBody: () => typeof arguments,
    usesEval: function (ctx) {
      return eval("ctx");
    },
    bound: function (ctx) {
      return ctx;
    }.bind(null),
    commented: (ctx /* , m, signal */) => ctx,
    computed: {
      ["on" + "Message"](ctx) {
        return ctx;
      },
    }.onMessage,
    native: Math.max,
  };
  for (const [name, fn] of Object.entries(can)) assert.equal(observesSignal(fn), true, name);
});

test("a callback with a defaulted or rest signal parameter gets a signal that aborts", async () => {
  const topic = unique("signal-shapes");
  await withClient({ subscribedTopics: topic, timeoutMs: 300, mode: Mode.BestEffort }, async (client) => {
    const seen = new Map();
    const handlers = {
      defaulted: async (ctx, m, signal = null) => {
        await ctx.onCancel();
        return signal;
      },
      rest: async (...args) => {
        await args[0].onCancel();
        return args[2];
      },
      args: async function (ctx) {
        await ctx.onCancel();
        return arguments[2];
      },
      never: async (ctx) => {
        await ctx.onCancel();
      },
    };
    await client.subscribe({
      onMessage(ctx, m) {
        const fn = handlers[m.key];
        return fn.apply(this, arguments).then((signal) => void seen.set(m.key, signal));
      },
    });
    // The dispatching callback names no signal but uses `arguments`: it
    // counts as observing, and hands the real signal on.
    for (const key of Object.keys(handlers)) await client.send(topic, key, {});
    await waitFor(() => seen.size === 4, "four cancelled handlers", 15000);
    for (const key of ["defaulted", "rest", "args"]) {
      const signal = seen.get(key);
      assert.ok(signal instanceof AbortSignal, key);
      assert.equal(signal.aborted, true, key);
      assert.equal(signal.reason.message, "message cancelled", key);
    }
  });
});

test("a callback that cannot name the signal still sees cancellation through its context", async () => {
  const topic = unique("signal-none");
  await withClient({ subscribedTopics: topic, timeoutMs: 300, mode: Mode.BestEffort }, async (client) => {
    const seen = deferred();
    await client.subscribe({
      onMessage: async (ctx) => {
        await ctx.onCancel();
        seen.resolve(ctx.shouldCancel);
      },
    });
    await client.send(topic, "k", {});
    assert.equal(await seen.promise, true);
  });
});

test("batches with non-ASCII text and several topics keep every field", async () => {
  const a = unique("text-a");
  const b = unique("text-b");
  await withClient({ subscribedTopics: [a, b] }, async (client) => {
    const got = [];
    await client.subscribe({
      onMessage: (_ctx, m) => void got.push({ topic: m.topic, key: m.key, payload: m.payload, offset: m.offset, partition: m.partition }),
    });
    const sent = [
      [a, "plain", { text: "ascii only" }],
      [b, "clé-ü", { text: "grüße, 你好, 🎉" }],
      [a, "🔑", { text: "" }],
      [b, "", { n: 1 }],
      [a, "k".repeat(40), { text: "é".repeat(300) }],
    ];
    // Sent without waiting, so that several land in one batch, mixing
    // ASCII and non-ASCII items.
    await Promise.all(sent.map(([t, k, p]) => client.send(t, k, p)));
    await waitFor(() => got.length === sent.length, "every message");
    for (const [t, k, p] of sent) {
      const m = got.find((g) => g.key === k);
      assert.ok(m, `message with key ${JSON.stringify(k)}`);
      assert.equal(m.topic, t);
      assert.deepEqual(m.payload, p);
      assert.equal(typeof m.offset, "bigint");
      assert.equal(typeof m.partition, "number");
    }
  });
});

test("many ASCII messages in large batches arrive intact, in per-key order", async () => {
  const topic = unique("bulk");
  await withClient({ subscribedTopics: topic }, async (client) => {
    const seen = new Map();
    let total = 0;
    await client.subscribe({
      onMessage(_ctx, m) {
        const p = m.payload;
        assert.equal(p.key, m.key);
        assert.equal(p.pad.length, p.seq % 50);
        (seen.get(m.key) ?? seen.set(m.key, []).get(m.key)).push(p.seq);
        total++;
      },
    });
    const sends = [];
    for (let seq = 0; seq < 2000; seq++) {
      const key = `key-${seq % 7}`;
      sends.push(client.send(topic, key, { key, seq, pad: "x".repeat(seq % 50) }));
      if (sends.length === 200) await Promise.all(sends.splice(0));
    }
    await Promise.all(sends);
    await waitFor(() => total === 2000, "2000 messages");
    for (const [, seqs] of seen) assert.deepEqual(seqs, [...seqs].sort((x, y) => x - y));
  });
});

// countCall counts one more call for key in calls and returns the count.
function countCall(calls, key) {
  const n = (calls.get(key) ?? 0) + 1;
  calls.set(key, n);
  return n;
}

test("synchronous results, synchronous throws and rejected promises are all completed", async () => {
  const topic = unique("outcomes");
  await withClient({ subscribedTopics: topic, retryBaseMs: 10 }, async (client) => {
    const calls = new Map();
    await client.subscribe({
      onMessage(_ctx, m) {
        const n = countCall(calls, m.key);
        if (m.key === "sync-throw" && n === 1) throw new Error("once");
        if (m.key === "reject" && n === 1) return Promise.reject(new Error("once"));
        if (m.key === "permanent") throw new PermanentError("never");
        if (m.key === "value") return { ok: true };
        return undefined;
      },
    });
    for (const k of ["sync-throw", "reject", "permanent", "value", "plain"]) await client.send(topic, k, {});
    await waitFor(() => calls.get("sync-throw") === 2 && calls.get("reject") === 2 && calls.size === 5, "retries");
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(calls.get("permanent"), 1);
    assert.equal(calls.get("value"), 1);
    assert.equal(calls.get("plain"), 1);
  });
});

test("telemetry: without a registered context manager or tracer provider, handlers run without spans", async () => {
  assert.equal(telemetry.available(), true, "@opentelemetry/api is installed for the tests");
  assert.equal(telemetry.active(), false);
  const api = require("@opentelemetry/api");
  const topic = unique("otel-inert");
  await withClient({ subscribedTopics: topic }, async (client) => {
    const seen = deferred();
    await client.subscribe({ onMessage: () => seen.resolve(api.trace.getSpan(api.context.active())) });
    await client.send(topic, "k", {});
    assert.equal(await seen.promise, undefined);
  });
});

test("odd results: a thenable that throws, one that settles twice, an unprintable error", async () => {
  const topic = unique("thenables");
  await withClient({ subscribedTopics: topic, retryBaseMs: 10 }, async (client) => {
    const calls = new Map();
    await client.subscribe({
      onMessage(_ctx, m) {
        const n = countCall(calls, m.key);
        if (m.key === "then-throws" && n === 1) {
          return {
            get then() {
              throw new Error("no then");
            },
          };
        }
        if (m.key === "twice") return { then: (ok, fail) => (ok(), fail(new Error("late")), ok()) };
        if (m.key === "symbol" && n === 1) return Promise.reject(Symbol("odd"));
        return undefined;
      },
    });
    for (const k of ["then-throws", "twice", "symbol", "after"]) await client.send(topic, k, {});
    await waitFor(() => calls.get("then-throws") === 2 && calls.get("symbol") === 2 && calls.has("after"), "retries");
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(calls.get("twice"), 1, "the first settlement counts");
  });
});

test("more successful outcomes at once than the shared completion buffer holds", async () => {
  const topic = unique("overflow");
  const N = 5000; // above the buffer's 4096 entries
  await withClient({ subscribedTopics: topic, maxConcurrency: N, maxUncommitted: 2 * N }, async (client) => {
    const gate = deferred();
    const calls = new Map();
    let waiting = 0;
    await client.subscribe({
      async onMessage(_ctx, m) {
        calls.set(m.key, (calls.get(m.key) ?? 0) + 1);
        waiting++;
        await gate.promise;
      },
    });
    const sends = [];
    for (let i = 0; i < N; i++) sends.push(client.send(topic, `k${i}`, { i }));
    await Promise.all(sends);
    await waitFor(() => waiting === N, `${N} handlers waiting`, 60000);
    gate.resolve(); // every handler finishes in the same microtask run
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(calls.size, N);
    assert.ok([...calls.values()].every((n) => n === 1), "no event was delivered twice");
    await client.unsubscribe(); // waits for every completion to arrive
  });
});
