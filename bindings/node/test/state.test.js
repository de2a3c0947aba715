"use strict";
// The keyed-state glue against fake natives (node-api.md §9, §10): the
// handles' mapping to native calls, at(), directions, the scan iterator's
// pulls, serialization, return() and errors, error conversion, the
// definition registry behind context.state() and client.state().
const test = require("node:test");
const assert = require("node:assert/strict");
const prosody = require("..");
const { Message } = require("../lib/message");
const {
  Context,
  DequeState,
  MapState,
  PermanentStateError,
  ProsodyClient,
  PublishedDeque,
  PublishedMap,
  PublishedValue,
  TransientStateError,
  ValueState,
} = prosody;

const id = { decode: (x) => x };

/** A native whose methods record their calls and answer from `answers`. */
function fake(answers = {}) {
  const calls = [];
  const native = new Proxy(
    {},
    {
      get(_, name) {
        if (name === "then") return undefined;
        if (name === "calls") return calls;
        return (...args) => {
          calls.push([name, ...args]);
          const a = answers[name];
          return typeof a === "function" ? a(...args) : a;
        };
      },
    },
  );
  return native;
}
const names = (native) => native.calls.map((c) => c[0]);

function tagged(message, category) {
  const e = new Error(message, { cause: new Error(category) });
  e.code = "PROSODY_ERR_X";
  return e;
}

/** A cursor over `chunks` (then null) that counts pulls and closes. */
function cursor(chunks, { failAt = -1, delay = 0 } = {}) {
  const c = { pulls: 0, closes: 0, inFlight: 0, maxInFlight: 0, carriers: [] };
  c.nextChunk = async (carrier) => {
    c.carriers.push(carrier);
    const n = c.pulls++;
    c.inFlight++;
    c.maxInFlight = Math.max(c.maxInFlight, c.inFlight);
    try {
      if (delay) await new Promise((r) => setTimeout(r, delay));
      if (n === failAt) throw tagged("the store failed", "transient");
      return n < chunks.length ? chunks[n] : null;
    } finally {
      c.inFlight--;
    }
  };
  c.close = async () => {
    c.closes++;
  };
  return c;
}

async function collect(it) {
  const out = [];
  for await (const v of it) out.push(v);
  return out;
}

// ---------------------------------------------------------------------------
// Handles: native calls

test("ValueState maps to get/set/clear/commit/rollback with JSON text and a trailing carrier", async () => {
  const n = fake({ get: '{"a":1}' });
  const v = new ValueState(n);
  assert.deepEqual(await v.get(), { a: 1 });
  await v.set({ b: [1, "two"] });
  await v.clear();
  await v.commit();
  await v.rollback();
  assert.deepEqual(names(n), ["get", "set", "clear", "commit", "rollback"]);
  assert.equal(n.calls[1][1], '{"b":[1,"two"]}');
  for (const call of n.calls) assert.equal(call.length, call[0] === "set" ? 3 : 2, `${call[0]} takes a trailing carrier`);
  const absent = new ValueState(fake({ get: null }));
  assert.equal(await absent.get(), null);
});

test("MapState maps has to contains, delete to remove; getMany answers positionally; getMany([]) is []", async () => {
  const n = fake({ get: "7", contains: true, getMany: ['"a"', null, '"c"'] });
  const m = new MapState(n, { decode: (x) => JSON.parse(x) });
  assert.equal(await m.get("k"), 7);
  assert.equal(await m.has("k"), true);
  await m.set("k", 8);
  await m.delete("k");
  await m.clear();
  assert.deepEqual(await m.getMany(["a", "b", "c"]), ["a", null, "c"]);
  const before = n.calls.length;
  assert.deepEqual(await m.getMany([]), []);
  assert.equal(n.calls.length, before, "getMany([]) does not reach the native");
  await m.commit();
  await m.rollback();
  assert.deepEqual(names(n), ["get", "contains", "set", "remove", "clear", "getMany", "commit", "rollback"]);
  assert.deepEqual(n.calls[2].slice(0, 3), ["set", "k", 8], "no encode in the codec: the value passes as is");
  assert.deepEqual(n.calls[5].slice(0, 2), ["getMany", ["a", "b", "c"]]);
});

test("new MapState(fakeNative, {decode: x => x}) works", async () => {
  const m = new MapState(fake({ get: "raw" }), id);
  assert.equal(await m.get("k"), "raw");
});

test("DequeState maps push/unshift/pop/shift/length/isEmpty to the native names", async () => {
  const n = fake({ popBack: '"z"', popFront: null, len: 3, isEmpty: false });
  const d = new DequeState(n);
  await d.push({ a: 1 });
  await d.unshift(2);
  assert.equal(await d.pop(), "z");
  assert.equal(await d.shift(), null);
  assert.equal(await d.length(), 3);
  assert.equal(await d.isEmpty(), false);
  await d.clear();
  await d.commit();
  await d.rollback();
  assert.deepEqual(names(n), ["pushBack", "pushFront", "popBack", "popFront", "len", "isEmpty", "clear", "commit", "rollback"]);
  assert.equal(n.calls[0][1], '{"a":1}');
  assert.equal(n.calls[1][1], "2");
});

test("null and undefined cannot be stored: TransientStateError, the value's message says clear", async () => {
  const n = fake();
  const v = new ValueState(n);
  for (const bad of [null, undefined]) {
    await assert.rejects(v.set(bad), (e) => e instanceof TransientStateError && /clear/.test(e.message));
    await assert.rejects(new MapState(n).set("k", bad), TransientStateError);
    await assert.rejects(new DequeState(n).push(bad), TransientStateError);
    await assert.rejects(new DequeState(n).unshift(bad), TransientStateError);
  }
  assert.equal(n.calls.length, 0, "nothing reached the native");
});

test("values JSON cannot represent reject transient; map keys must be strings", async () => {
  const n = fake();
  await assert.rejects(new ValueState(n).set(10n), TransientStateError);
  await assert.rejects(new ValueState(n).set(() => 1), TransientStateError);
  await assert.rejects(new ValueState(n).set(Symbol("s")), TransientStateError);
  const m = new MapState(n);
  await assert.rejects(m.get(1), TransientStateError);
  await assert.rejects(m.set(1, 1), TransientStateError);
  await assert.rejects(m.has(undefined), TransientStateError);
  await assert.rejects(m.delete({}), TransientStateError);
  await assert.rejects(m.getMany("abc"), TransientStateError);
  await assert.rejects(m.getMany(["a", 2]), TransientStateError);
  assert.equal(n.calls.length, 0);
});

test("a stored item that does not decode rejects transient", async () => {
  await assert.rejects(new ValueState(fake({ get: "{not json" })).get(), TransientStateError);
});

// ---------------------------------------------------------------------------
// Error conversion

test("native errors convert by error.cause.message; untagged errors pass through", async () => {
  const perm = tagged("not registered", "permanent");
  const trans = tagged("no longer valid", "transient");
  const plain = new RangeError("plain");
  const n = fake({
    get: () => Promise.reject(perm),
    clear: () => Promise.reject(trans),
    commit: () => Promise.reject(plain),
    rollback: () => {
      throw trans; // a synchronous throw also rejects
    },
  });
  const v = new ValueState(n);
  await assert.rejects(v.get(), (e) => e instanceof PermanentStateError && e.cause === perm && e.message === "not registered");
  await assert.rejects(v.clear(), (e) => e instanceof TransientStateError && e.cause === trans);
  await assert.rejects(v.commit(), (e) => e === plain);
  await assert.rejects(v.rollback(), TransientStateError);
  assert.ok(prosody.isStateError(await v.get().catch((e) => e)));
});

// ---------------------------------------------------------------------------
// at(index)

test("DequeState.at: 0 peeks the front, -1 the back, other negatives add length, beyond u32 is null", async () => {
  const n = fake({ peekFront: '"front"', peekBack: '"back"', len: 5, get: (i) => JSON.stringify(`#${i}`) });
  const d = new DequeState(n);
  assert.equal(await d.at(0), "front");
  assert.equal(await d.at(-1), "back");
  assert.equal(await d.at(3), "#3");
  assert.equal(await d.at(-2), "#3");
  assert.equal(await d.at(-5), "#0");
  n.calls.length = 0;
  assert.equal(await d.at(-6), null);
  assert.deepEqual(names(n), ["len"], "still negative after adding length: null, no get");
  n.calls.length = 0;
  assert.equal(await d.at(0xffffffff + 1), null);
  assert.equal(await d.at(Number.MAX_SAFE_INTEGER), null);
  assert.equal(n.calls.length, 0, "above 0xFFFFFFFF: no native call");
  assert.equal(await d.at(0xffffffff), "#4294967295");
  assert.deepEqual(n.calls[0].slice(0, 2), ["get", 0xffffffff]);
});

test("at: an index that is not a safe integer rejects (never throws) with TransientStateError naming index", async () => {
  const n = fake();
  const d = new DequeState(n);
  const p = new PublishedDeque(n);
  for (const bad of [1.5, NaN, Infinity, -Infinity, Symbol("i"), "1", 2 ** 53, null, undefined]) {
    let promise;
    assert.doesNotThrow(() => (promise = d.at(bad)));
    await assert.rejects(promise, (e) => e instanceof TransientStateError && /index/.test(e.message));
    let pp;
    assert.doesNotThrow(() => (pp = p.at("user", bad)));
    await assert.rejects(pp, (e) => e instanceof TransientStateError && /index/.test(e.message));
  }
  assert.equal(n.calls.length, 0);
});

test("PublishedDeque.at takes the user key first and follows the same rules", async () => {
  const n = fake({ peekFront: "1", peekBack: "9", length: 4, get: (key, i) => String(i * 10) });
  const d = new PublishedDeque(n);
  assert.equal(await d.at("u", 0), 1);
  assert.equal(await d.at("u", -1), 9);
  assert.equal(await d.at("u", -3), 10);
  assert.equal(await d.at("u", -9), null);
  assert.equal(await d.at("u", 2), 20);
  assert.equal(await d.at("u", 2 ** 32), null);
  assert.deepEqual(
    n.calls.map((c) => c.slice(0, c[0] === "get" ? 3 : 2)),
    [["peekFront", "u"], ["peekBack", "u"], ["length", "u"], ["get", "u", 1], ["length", "u"], ["get", "u", 2]],
  );
  assert.equal(await d.length("u"), 4);
  assert.equal(await new PublishedDeque(fake({ isEmpty: true })).isEmpty("u"), true);
});

// ---------------------------------------------------------------------------
// Directions

test("an invalid direction throws TransientStateError synchronously from every scan method", () => {
  const n = fake({ scan: () => cursor([]), keys: () => cursor([]) });
  const m = new MapState(n);
  const d = new DequeState(n);
  const pm = new PublishedMap(n);
  const pd = new PublishedDeque(n);
  const calls = [
    (x) => m.entries(x),
    (x) => m.keys(x),
    (x) => m.values(x),
    (x) => d.values(x),
    (x) => pm.entries("u", x),
    (x) => pm.keys("u", x),
    (x) => pm.values("u", x),
    (x) => pd.values("u", x),
  ];
  for (const call of calls) {
    for (const bad of ["sideways", "Forward", 0, null, Symbol("d")]) {
      assert.throws(() => call(bad), (e) => e instanceof TransientStateError && /forward.*backward/.test(e.message));
    }
  }
  assert.equal(n.calls.length, 0);
  m.entries("backward");
  d.values();
  assert.deepEqual(
    n.calls.map((c) => c.slice(0, 2)),
    [["scan", "backward"], ["scan", "forward"]],
  );
});

// ---------------------------------------------------------------------------
// Iterators

test("next() pulls only when the chunk is used up: four items in chunks of three take three pulls", async () => {
  const c = cursor([[["a", "1"], ["b", "2"], ["c", "3"]], [["d", "4"]]]);
  const m = new MapState(fake({ scan: () => c }));
  const it = m.entries();
  assert.equal(c.pulls, 0, "no pull before next()");
  await it.next();
  assert.equal(c.pulls, 1);
  await it.next();
  await it.next();
  assert.equal(c.pulls, 1, "the retained chunk serves three items");
  assert.deepEqual(await it.next(), { value: ["d", 4], done: false });
  assert.equal(c.pulls, 2);
  assert.deepEqual(await it.next(), { value: undefined, done: true });
  assert.equal(c.pulls, 3);
  assert.equal(c.closes, 1, "a null chunk ends the scan and closes the cursor");
  assert.deepEqual(await it.next(), { value: undefined, done: true });
  assert.equal(c.pulls, 3);
  assert.equal(c.closes, 1, "closed exactly once");
  assert.equal(c.carriers.length, 3, "every pull takes a carrier");
});

test("entries, keys, values and the default iterator yield their shapes", async () => {
  const chunks = () => cursor([[["a", '{"n":1}'], ["b", '{"n":2}']]]);
  const n = fake({ scan: chunks, keys: () => cursor([["a", "b"]]) });
  const m = new MapState(n);
  assert.deepEqual(await collect(m.entries()), [["a", { n: 1 }], ["b", { n: 2 }]]);
  assert.deepEqual(await collect(m), [["a", { n: 1 }], ["b", { n: 2 }]], "[Symbol.asyncIterator] is entries");
  assert.deepEqual(await collect(m.keys("backward")), ["a", "b"]);
  assert.deepEqual(await collect(m.values()), [{ n: 1 }, { n: 2 }]);
  assert.deepEqual(names(n), ["scan", "scan", "keys", "scan"]);
  const d = new DequeState(fake({ scan: () => cursor([["1", "2"], ["3"]]) }));
  assert.deepEqual(await collect(d), [1, 2, 3], "[Symbol.asyncIterator] is values");
  const it = m.entries();
  assert.equal(it[Symbol.asyncIterator](), it);
});

test("concurrent next() calls are serialized: one pull in flight, items in order", async () => {
  const c = cursor([["1", "2"], ["3", "4"], ["5"]], { delay: 5 });
  const d = new DequeState(fake({ scan: () => c }));
  const it = d.values();
  const results = await Promise.all(Array.from({ length: 7 }, () => it.next()));
  assert.deepEqual(
    results.map((r) => (r.done ? "done" : r.value)),
    [1, 2, 3, 4, 5, "done", "done"],
  );
  assert.equal(c.maxInFlight, 1);
  assert.equal(c.pulls, 4);
  assert.equal(c.closes, 1);
});

test("return() queues behind an active next(), awaits close(), closes once; return(v) resolves {value: v, done: true}", async () => {
  const order = [];
  const c = cursor([["1", "2", "3"]], { delay: 10 });
  const close = c.close;
  c.close = async () => {
    order.push("close start");
    await new Promise((r) => setTimeout(r, 5));
    await close();
    order.push("close end");
  };
  const it = new DequeState(fake({ scan: () => c })).values();
  const first = it.next().then((r) => (order.push("next"), r));
  const ret = it.return("stop").then((r) => (order.push("return"), r));
  assert.deepEqual(await first, { value: 1, done: false });
  assert.deepEqual(await ret, { value: "stop", done: true });
  assert.deepEqual(order, ["next", "close start", "close end", "return"]);
  assert.deepEqual(await it.return("again"), { value: "again", done: true });
  assert.deepEqual(await it.next(), { value: undefined, done: true });
  assert.equal(c.closes, 1);
  assert.equal(c.pulls, 1);
});

test("return() before any next() closes an owned cursor once; a lazy published scan is never opened", async () => {
  const c = cursor([["1"]]);
  const it = new DequeState(fake({ scan: () => c })).values();
  assert.deepEqual(await it.return(), { value: undefined, done: true });
  assert.equal(c.closes, 1);
  assert.equal(c.pulls, 0);
  const n = fake({ scan: async () => cursor([["1"]]) });
  const pit = new PublishedDeque(n).values("u");
  assert.deepEqual(await pit.return(), { value: undefined, done: true });
  assert.equal(n.calls.length, 0, "never opened");
});

test("a pull error closes the cursor, rejects with the converted error, then the iterator is done", async () => {
  const c = cursor([["1", "2"], ["3"]], { failAt: 1 });
  const it = new DequeState(fake({ scan: () => c })).values();
  assert.deepEqual(await it.next(), { value: 1, done: false });
  assert.deepEqual(await it.next(), { value: 2, done: false });
  await assert.rejects(it.next(), (e) => e instanceof TransientStateError && e.message === "the store failed");
  assert.equal(c.closes, 1);
  assert.deepEqual(await it.next(), { value: undefined, done: true });
  assert.deepEqual(await it.return("x"), { value: "x", done: true });
  assert.equal(c.closes, 1);
  assert.equal(c.pulls, 2);
});

test("an owned scan that cannot open rejects its first next(), converted", async () => {
  const n = fake({
    scan: () => {
      throw tagged("no longer valid", "transient");
    },
  });
  const it = new MapState(n).entries();
  assert.equal(n.calls.length, 1, "owned scans open synchronously");
  await assert.rejects(it.next(), TransientStateError);
  assert.deepEqual(await it.next(), { value: undefined, done: true });
});

test("breaking out of for await closes the cursor and leaves the collection usable", async () => {
  const cursors = [];
  const n = fake({
    scan: () => {
      const c = cursor([["1", "2", "3"], ["4"]]);
      cursors.push(c);
      return c;
    },
    len: 4,
  });
  const d = new DequeState(n);
  for await (const v of d) {
    if (v === 2) break;
  }
  assert.equal(cursors[0].closes, 1);
  assert.equal(await d.length(), 4);
  assert.deepEqual(await collect(d.values()), [1, 2, 3, 4]);
});

test("published scans open lazily on the first next(): the native scan resolves to a cursor", async () => {
  const c = cursor([[["k1", "1"], ["k2", "2"]]]);
  const n = fake({ scan: async () => c, keys: async () => cursor([["k1"]]) });
  const pm = new PublishedMap(n);
  const it = pm.entries("user", "backward");
  assert.equal(n.calls.length, 0, "not opened yet");
  assert.deepEqual(await it.next(), { value: ["k1", 1], done: false });
  assert.deepEqual(n.calls[0].slice(0, 3), ["scan", "user", "backward"]);
  assert.equal(n.calls[0].length, 4, "scan(key, dir, carrier)");
  assert.deepEqual(await collect(it), [["k2", 2]]);
  assert.equal(c.closes, 1);
  assert.deepEqual(await collect(pm.keys("user")), ["k1"]);
  assert.deepEqual(await collect(new PublishedMap(fake({ scan: async () => cursor([[["a", "5"]]]) })).values("u")), [5]);
  const failing = new PublishedMap(fake({ scan: () => Promise.reject(tagged("not published", "permanent")) }));
  const fit = failing.entries("u");
  await assert.rejects(fit.next(), PermanentStateError);
  assert.deepEqual(await fit.next(), { value: undefined, done: true });
});

// ---------------------------------------------------------------------------
// Published readers

test("published readers take the user key first", async () => {
  const n = fake({ get: (...a) => JSON.stringify(a.slice(0, -1)), getMany: ["1", null], contains: false });
  assert.deepEqual(await new PublishedValue(n).get("u"), ["u"]);
  const pm = new PublishedMap(n);
  assert.deepEqual(await pm.get("u", "mk"), ["u", "mk"]);
  assert.deepEqual(await pm.getMany("u", ["a", "b"]), [1, null]);
  assert.deepEqual(await pm.getMany("u", []), []);
  assert.equal(await pm.has("u", "mk"), false);
  assert.deepEqual(
    n.calls.map((c) => c.slice(0, -1)),
    [["get", "u"], ["get", "u", "mk"], ["getMany", "u", ["a", "b"]], ["contains", "u", "mk"]],
  );
  await assert.rejects(new PublishedValue(n).get(42), TransientStateError);
  await assert.rejects(pm.get("u", 42), TransientStateError);
});

// ---------------------------------------------------------------------------
// Message items

test("message items round-trip as the JSON object of include/prosody.h", () => {
  const m = new Message("orders", 3, 41, 1700000000123, "user-1", '{"sku":"book","n":2}');
  const text = Message.toItem(m);
  assert.deepEqual(JSON.parse(text), {
    topic: "orders",
    partition: 3,
    offset: 41,
    key: "user-1",
    timestamp: 1700000000123,
    payload: { sku: "book", n: 2 },
  });
  const back = Message.fromItem(text);
  assert.ok(back instanceof Message);
  assert.equal(back.topic, "orders");
  assert.equal(back.partition, 3);
  assert.equal(back.offset, 41n);
  assert.equal(back.key, "user-1");
  assert.equal(back.timestamp.getTime(), 1700000000123);
  assert.deepEqual(back.payload, { sku: "book", n: 2 });
  assert.equal(Message.toItem(back), text, "a parsed payload encodes the same");
});

test("a message collection refuses what is not a Message", async () => {
  const n = fake();
  const { MESSAGE_CODEC } = require("../lib/state");
  const d = new DequeState(n, MESSAGE_CODEC);
  await assert.rejects(d.push({ topic: "t", key: "k", payload: 1 }), TransientStateError);
  assert.equal(n.calls.length, 0);
});

// ---------------------------------------------------------------------------
// context.state() and client.state()

function fakeContext(overrides = {}) {
  const opened = [];
  const ctx = {};
  for (const vend of ["valueState", "mapState", "dequeState", "messageValueState", "messageMapState", "messageDequeState"]) {
    ctx[vend] = (name) => {
      opened.push([vend, name]);
      if (overrides[vend]) return overrides[vend](name);
      return fake({ get: null });
    };
  }
  return { ctx, opened };
}

test("context.state vends the handle class of the definition, once per definition object", () => {
  const { ctx, opened } = fakeContext();
  const context = new Context(ctx);
  const v = prosody.value("v");
  assert.ok(context.state(v) instanceof ValueState);
  assert.equal(context.state(v), context.state(v), "cached per definition object");
  assert.ok(context.state(prosody.map("m")) instanceof MapState);
  assert.ok(context.state(prosody.deque("d")) instanceof DequeState);
  assert.ok(context.state(prosody.messageValue("mv")) instanceof ValueState);
  assert.ok(context.state(prosody.messageMap("mm")) instanceof MapState);
  assert.ok(context.state(prosody.messageDeque("md")) instanceof DequeState);
  const again = prosody.value("v");
  assert.notEqual(context.state(again), context.state(v), "another definition object, another handle");
  assert.deepEqual(opened, [
    ["valueState", "v"],
    ["mapState", "m"],
    ["dequeState", "d"],
    ["messageValueState", "mv"],
    ["messageMapState", "mm"],
    ["messageDequeState", "md"],
    ["valueState", "v"],
  ]);
});

test("context.state refuses anything but a definition from the factories", () => {
  const context = new Context(fakeContext().ctx);
  for (const bad of [{ name: "v", kind: "value", payload: "json" }, Object.freeze({ ...prosody.value("v") }), null, undefined, "v", 3]) {
    assert.throws(
      () => context.state(bad),
      (e) => e instanceof TransientStateError && e.message === "state: definition must come from a Prosody state definition constructor",
    );
  }
});

test("context.state converts native errors: an unregistered name is PermanentStateError", () => {
  const { ctx } = fakeContext({
    mapState: () => {
      throw tagged('keyed state: collection "nope" is not registered', "permanent");
    },
  });
  assert.throws(() => new Context(ctx).state(prosody.map("nope")), (e) => e instanceof PermanentStateError && /nope/.test(e.message));
});

test("client.state opens published readers with the definition's read cache; other definitions reject TypeError", async () => {
  const opened = [];
  const nativeClient = {};
  for (const [opener, answer] of [
    ["publishedValue", '"v"'],
    ["publishedMap", '"m"'],
    ["publishedDeque", '"d"'],
  ]) {
    nativeClient[opener] = (...args) => {
      opened.push([opener, ...args]);
      return Promise.resolve(fake({ get: answer }));
    };
  }
  const client = Object.create(ProsodyClient.prototype);
  client.nativeClient = nativeClient;
  const pv = await client.state("checkout", prosody.value("current", { published: true }));
  assert.ok(pv instanceof PublishedValue);
  assert.equal(await pv.get("customer-1"), "v");
  assert.ok((await client.state("checkout", prosody.map("m", { readCache: { ttlMs: 250 } }))) instanceof PublishedMap);
  assert.ok((await client.state("checkout", prosody.deque("d", { readCache: false }))) instanceof PublishedDeque);
  assert.deepEqual(opened, [
    ["publishedValue", "checkout", "current", undefined, false],
    ["publishedMap", "checkout", "m", 250, false],
    ["publishedDeque", "checkout", "d", undefined, true],
  ]);
  for (const bad of [prosody.messageValue("mv"), prosody.messageMap("mm"), prosody.messageDeque("md"), { name: "v", kind: "value", payload: "json" }, null]) {
    await assert.rejects(client.state("checkout", bad), TypeError);
  }
  await assert.rejects(client.state(42, prosody.value("v")), TypeError);
  assert.equal(opened.length, 3);
  nativeClient.publishedValue = () => {
    throw tagged("the client was shut down", "permanent");
  };
  await assert.rejects(client.state("checkout", prosody.value("v")), PermanentStateError);
});

test("definitions still are frozen plain objects carrying the given options", () => {
  const d = prosody.deque("d", { capacity: 3, published: true, readCache: false, keysetLimit: 2 });
  assert.deepEqual(d, { name: "d", kind: "deque", payload: "json", published: true, readCache: false, keysetLimit: 2, capacity: 3 });
  assert.ok(Object.isFrozen(d));
  assert.equal(Object.getPrototypeOf(d), Object.prototype);
});
