"use strict";
// Keyed state: the definitions (frozen plain objects naming a collection,
// for Configuration.stateCollections and context.state()), the handles
// context.state() returns, the published readers client.state() opens, and
// their scans.
//
// Everything here talks to a native object through the protocol of
// node-api.md §10, so that it can be exercised with fake natives:
//   - every operation takes a trailing carrier (the active trace context);
//   - JSON items cross as JSON text, message items as the JSON text of
//     {"topic","partition","offset","key","timestamp","payload"} (the
//     itemCodec turns them into Message objects and back);
//   - a native error says what kind of failure it is in
//     `error.cause.message`: "permanent" or "transient";
//   - a cursor has nextChunk(carrier), which resolves to an array of items
//     (map entries as [key, value], keys-only scans as keys, deque items
//     as values) or null once the scan is over, and close().

const telemetry = require("./telemetry");
const { TransientStateError, PermanentStateError } = require("./errors");
const { Message } = require("./message");

const U32_MAX = 0xffffffff;

// ---------------------------------------------------------------------------
// Errors

/** A native error as a state error, by its category; anything else unchanged. */
function convert(e) {
  let category;
  try {
    category = e?.cause?.message;
  } catch {
    return e;
  }
  if (category === "permanent") return new PermanentStateError(e.message, { cause: e });
  if (category === "transient") return new TransientStateError(e.message, { cause: e });
  return e;
}

function describe(v) {
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "symbol") return v.toString();
  if (typeof v === "bigint") return `${v}n`;
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "object") return "an object";
  if (typeof v === "function") return "a function";
  return String(v);
}

function direction(dir) {
  if (dir === undefined || dir === "forward" || dir === "backward") return dir ?? "forward";
  throw new TransientStateError(`scan direction must be "forward" or "backward", got ${describe(dir)}`);
}

function mapKey(op, key, what = "map key") {
  if (typeof key !== "string") throw new TransientStateError(`${op}: the ${what} must be a string, got ${describe(key)}`);
  return key;
}

function mapKeys(op, keys) {
  if (!Array.isArray(keys)) throw new TransientStateError(`${op}: keys must be an array of strings, got ${describe(keys)}`);
  for (const k of keys) mapKey(op, k);
  return keys;
}

// The active trace context, passed with every operation.
const carrier = () => telemetry.inject();

// ---------------------------------------------------------------------------
// Item codecs

const JSON_CODEC = Object.freeze({
  encode(v) {
    let text;
    try {
      text = JSON.stringify(v);
    } catch (e) {
      throw new TransientStateError(`keyed state: the item cannot be represented as JSON: ${e.message}`, { cause: e });
    }
    if (text === undefined) throw new TransientStateError(`keyed state: the item cannot be represented as JSON: ${describe(v)}`);
    return text;
  },
  decode: (text) => JSON.parse(text),
});

const MESSAGE_CODEC = Object.freeze({
  encode(v) {
    try {
      return Message.toItem(v);
    } catch (e) {
      throw new TransientStateError(`keyed state: ${e.message}`, { cause: e });
    }
  },
  decode: (text) => Message.fromItem(text),
});

// ---------------------------------------------------------------------------
// The shared part of a handle or reader: its native, codec and, for owned
// handles, the attempt that waits for its operations before completing.

class Ops {
  constructor(native, codec, tracker) {
    this.native = native;
    this.codec = codec ?? JSON_CODEC;
    this.tracker = tracker ?? null;
  }

  /** Runs native[method](...args, carrier); rejects with the converted error. */
  async call(method, ...args) {
    const t = this.tracker;
    const counted = t !== null && t.begin();
    try {
      return await this.native[method](...args, carrier());
    } catch (e) {
      throw convert(e);
    } finally {
      if (counted) t.end();
    }
  }

  /** The next chunk of a cursor, counted as an operation of the attempt. */
  async pull(cursor) {
    const t = this.tracker;
    const counted = t !== null && t.begin();
    try {
      return await cursor.nextChunk(carrier());
    } finally {
      if (counted) t.end();
    }
  }

  encode(v, hint) {
    if (v === null || v === undefined) {
      throw new TransientStateError(`keyed state cannot store ${v}: absence is not a value; ${hint}`);
    }
    return typeof this.codec.encode === "function" ? this.codec.encode(v) : v;
  }

  decode(item) {
    if (item === null || item === undefined) return null;
    try {
      return this.codec.decode(item);
    } catch (e) {
      throw new TransientStateError(`keyed state: a stored item does not decode: ${e.message}`, { cause: e });
    }
  }
}

// ---------------------------------------------------------------------------
// Scans

const noop = () => {};
const DONE = Object.freeze({ value: undefined, done: true });

/**
 * An async iterator over a cursor. next() pulls a chunk only when the one
 * it holds is used up; calls are serialized (one pull in flight at most);
 * return() waits for an active next(), then closes the cursor. The cursor
 * is closed exactly once: at the end of the scan, on a pull error, or by
 * return().
 */
class ScanIterator {
  #ops;
  #open; // () => cursor | Promise<cursor>
  #item; // a chunk's item -> the value yielded
  #cursor = null;
  #opened = false;
  #openError = null;
  #chunk = null;
  #pos = 0;
  #done = false;
  #closed = false;
  #tail = Promise.resolve();

  constructor(ops, open, item, lazy) {
    this.#ops = ops;
    this.#open = open;
    this.#item = item;
    if (!lazy) {
      // Owned scans open at once (the native returns the cursor); a
      // failure to open is reported by the first next().
      this.#opened = true;
      try {
        this.#cursor = open();
      } catch (e) {
        this.#openError = convert(e);
      }
    }
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  next() {
    return this.#queue(() => this.#step());
  }

  return(value) {
    return this.#queue(async () => {
      this.#finish();
      await this.#close();
      return { value, done: true };
    });
  }

  #queue(fn) {
    const p = this.#tail.then(fn);
    this.#tail = p.then(noop, noop);
    return p;
  }

  #finish() {
    this.#done = true;
    this.#chunk = null;
  }

  async #close() {
    if (this.#closed) return;
    this.#closed = true;
    const cursor = this.#cursor;
    this.#cursor = null;
    if (cursor === null || cursor === undefined) return;
    try {
      await cursor.close();
    } catch {
      // Nothing to do about a cursor that will not close: it is released
      // with its client.
    }
  }

  async #fail(e) {
    this.#finish();
    await this.#close();
    throw convert(e);
  }

  async #step() {
    if (this.#done) return DONE;
    if (this.#chunk === null || this.#pos >= this.#chunk.length) {
      let chunk;
      try {
        if (!this.#opened) {
          this.#opened = true;
          this.#cursor = await this.#open();
        }
        if (this.#openError !== null) throw this.#openError;
        chunk = await this.#ops.pull(this.#cursor);
      } catch (e) {
        return this.#fail(e);
      }
      if (chunk === null || chunk === undefined || chunk.length === 0) {
        this.#finish();
        await this.#close();
        return DONE;
      }
      this.#chunk = chunk;
      this.#pos = 0;
    }
    let value;
    try {
      value = this.#item(this.#chunk[this.#pos++]);
    } catch (e) {
      return this.#fail(e);
    }
    return { value, done: false };
  }
}

// The shapes of a chunk's items.
const entryOf = (ops) => (e) => [e[0], ops.decode(e[1])];
const valueOfEntry = (ops) => (e) => ops.decode(e[1]);
const keyOf = (k) => k;
const itemOf = (ops) => (v) => ops.decode(v);

// ---------------------------------------------------------------------------
// at(index): the rules shared by DequeState and PublishedDeque. `call` runs
// a native operation with the reader's user key (if any) in front.

async function at(ops, index, call) {
  if (!Number.isSafeInteger(index)) {
    throw new TransientStateError(`at: index must be a safe integer, got ${describe(index)}`);
  }
  if (index === 0) return ops.decode(await call("peekFront"));
  if (index === -1) return ops.decode(await call("peekBack"));
  if (index < 0) {
    const i = index + Number(await call(ops.lengthOp));
    if (i < 0) return null;
    index = i;
  }
  if (index > U32_MAX) return null;
  return ops.decode(await call("get", index));
}

// ---------------------------------------------------------------------------
// Owned handles (context.state)

class ValueState {
  #ops;
  /** Made by context.state(); at runtime `(native, itemCodec)`. */
  constructor(native, itemCodec, tracker) {
    this.#ops = new Ops(native, itemCodec, tracker);
  }
  async get() {
    return this.#ops.decode(await this.#ops.call("get"));
  }
  async set(value) {
    await this.#ops.call("set", this.#ops.encode(value, "use clear() to remove the value"));
  }
  async clear() {
    await this.#ops.call("clear");
  }
  async commit() {
    await this.#ops.call("commit");
  }
  async rollback() {
    await this.#ops.call("rollback");
  }
}

class MapState {
  #ops;
  /** Made by context.state(); at runtime `(native, itemCodec)`. */
  constructor(native, itemCodec, tracker) {
    this.#ops = new Ops(native, itemCodec, tracker);
  }
  async get(key) {
    return this.#ops.decode(await this.#ops.call("get", mapKey("get", key)));
  }
  async getMany(keys) {
    mapKeys("getMany", keys);
    if (keys.length === 0) return [];
    const items = await this.#ops.call("getMany", keys);
    return Array.from(items, (v) => this.#ops.decode(v));
  }
  async has(key) {
    return Boolean(await this.#ops.call("contains", mapKey("has", key)));
  }
  async set(key, value) {
    mapKey("set", key);
    await this.#ops.call("set", key, this.#ops.encode(value, "use delete() to remove the entry"));
  }
  async delete(key) {
    await this.#ops.call("remove", mapKey("delete", key));
  }
  async clear() {
    await this.#ops.call("clear");
  }
  entries(dir) {
    const d = direction(dir);
    const ops = this.#ops;
    return new ScanIterator(ops, () => ops.native.scan(d, carrier()), entryOf(ops), false);
  }
  keys(dir) {
    const d = direction(dir);
    const ops = this.#ops;
    return new ScanIterator(ops, () => ops.native.keys(d, carrier()), keyOf, false);
  }
  values(dir) {
    const d = direction(dir);
    const ops = this.#ops;
    return new ScanIterator(ops, () => ops.native.scan(d, carrier()), valueOfEntry(ops), false);
  }
  [Symbol.asyncIterator]() {
    return this.entries();
  }
  async commit() {
    await this.#ops.call("commit");
  }
  async rollback() {
    await this.#ops.call("rollback");
  }
}

class DequeState {
  #ops;
  /** Made by context.state(); at runtime `(native, itemCodec)`. */
  constructor(native, itemCodec, tracker) {
    this.#ops = new Ops(native, itemCodec, tracker);
    this.#ops.lengthOp = "len";
  }
  async push(item) {
    await this.#ops.call("pushBack", this.#ops.encode(item, "use pop(), shift() or clear() to remove items"));
  }
  async unshift(item) {
    await this.#ops.call("pushFront", this.#ops.encode(item, "use pop(), shift() or clear() to remove items"));
  }
  async pop() {
    return this.#ops.decode(await this.#ops.call("popBack"));
  }
  async shift() {
    return this.#ops.decode(await this.#ops.call("popFront"));
  }
  async length() {
    return Number(await this.#ops.call("len"));
  }
  async isEmpty() {
    return Boolean(await this.#ops.call("isEmpty"));
  }
  async clear() {
    await this.#ops.call("clear");
  }
  async at(index) {
    return at(this.#ops, index, (op, ...args) => this.#ops.call(op, ...args));
  }
  values(dir) {
    const d = direction(dir);
    const ops = this.#ops;
    return new ScanIterator(ops, () => ops.native.scan(d, carrier()), itemOf(ops), false);
  }
  [Symbol.asyncIterator]() {
    return this.values();
  }
  async commit() {
    await this.#ops.call("commit");
  }
  async rollback() {
    await this.#ops.call("rollback");
  }
}

// ---------------------------------------------------------------------------
// Published readers (client.state). The user key comes first; scans open
// on their first next() (the native scan resolves to a cursor).

function userKey(op, key) {
  return mapKey(op, key, "user key");
}

class PublishedValue {
  #ops;
  /** Opened by client.state(); at runtime `(native, itemCodec)`. */
  constructor(native, itemCodec) {
    this.#ops = new Ops(native, itemCodec, null);
  }
  async get(key) {
    return this.#ops.decode(await this.#ops.call("get", userKey("get", key)));
  }
}

class PublishedMap {
  #ops;
  /** Opened by client.state(); at runtime `(native, itemCodec)`. */
  constructor(native, itemCodec) {
    this.#ops = new Ops(native, itemCodec, null);
  }
  async get(key, mk) {
    userKey("get", key);
    return this.#ops.decode(await this.#ops.call("get", key, mapKey("get", mk)));
  }
  async getMany(key, mks) {
    userKey("getMany", key);
    mapKeys("getMany", mks);
    if (mks.length === 0) return [];
    const items = await this.#ops.call("getMany", key, mks);
    return Array.from(items, (v) => this.#ops.decode(v));
  }
  async has(key, mk) {
    userKey("has", key);
    return Boolean(await this.#ops.call("contains", key, mapKey("has", mk)));
  }
  #scan(method, op, key, dir, item) {
    userKey(op, key);
    const d = direction(dir);
    return new ScanIterator(this.#ops, () => this.#ops.call(method, key, d), item, true);
  }
  entries(key, dir) {
    return this.#scan("scan", "entries", key, dir, entryOf(this.#ops));
  }
  keys(key, dir) {
    return this.#scan("keys", "keys", key, dir, keyOf);
  }
  values(key, dir) {
    return this.#scan("scan", "values", key, dir, valueOfEntry(this.#ops));
  }
}

class PublishedDeque {
  #ops;
  /** Opened by client.state(); at runtime `(native, itemCodec)`. */
  constructor(native, itemCodec) {
    this.#ops = new Ops(native, itemCodec, null);
    this.#ops.lengthOp = "length";
  }
  async length(key) {
    return Number(await this.#ops.call("length", userKey("length", key)));
  }
  async isEmpty(key) {
    return Boolean(await this.#ops.call("isEmpty", userKey("isEmpty", key)));
  }
  async at(key, index) {
    userKey("at", key);
    return at(this.#ops, index, (op, ...args) => this.#ops.call(op, key, ...args));
  }
  values(key, dir) {
    userKey("values", key);
    const d = direction(dir);
    return new ScanIterator(this.#ops, () => this.#ops.call("scan", key, d), itemOf(this.#ops), true);
  }
}

// ---------------------------------------------------------------------------
// Definitions

// Each definition object -> how to reach its collection: the vend method
// of the native context, the handle class and item codec, and for JSON
// kinds the published opener of the native client and the reader class.
const registry = new WeakMap();

const HANDLES = { value: ValueState, map: MapState, deque: DequeState };
const READERS = { value: PublishedValue, map: PublishedMap, deque: PublishedDeque };
const OPENERS = { value: "publishedValue", map: "publishedMap", deque: "publishedDeque" };

function define(kind, payload) {
  const json = payload === "json";
  const access = Object.freeze({
    vend: json ? `${kind}State` : `message${kind[0].toUpperCase()}${kind.slice(1)}State`,
    Handle: HANDLES[kind],
    codec: json ? JSON_CODEC : MESSAGE_CODEC,
    opener: json ? OPENERS[kind] : null,
    Reader: json ? READERS[kind] : null,
  });
  const factory = json ? kind : `message${kind[0].toUpperCase()}${kind.slice(1)}`;
  return (name, options = {}) => {
    if (typeof name !== "string" || name === "") throw new TypeError(`${factory}: name must be a non-empty string`);
    const def = { name, kind, payload };
    // Every option is copied whatever the kind, so that a misplaced one
    // reaches the configuration check that names it.
    for (const k of ["ttlSeconds", "readUncommitted", "published", "readCache", "keysetLimit", "capacity"]) {
      if (options[k] !== undefined) def[k] = options[k];
    }
    Object.freeze(def);
    registry.set(def, access);
    return def;
  };
}

/**
 * The handle of `definition` for an attempt: nativeContext[vend](name),
 * wrapped, and cached in `cache` per definition object. `tracker` (begin()
 * / end()) counts the handle's running operations for the attempt.
 */
function bind(nativeContext, cache, definition, tracker) {
  const access = registry.get(definition);
  if (access === undefined) {
    throw new TransientStateError("state: definition must come from a Prosody state definition constructor");
  }
  let handle = cache.get(definition);
  if (handle !== undefined) return handle;
  let nat;
  try {
    nat = nativeContext[access.vend](definition.name);
  } catch (e) {
    throw convert(e);
  }
  handle = new access.Handle(nat, access.codec, tracker);
  cache.set(definition, handle);
  return handle;
}

/** client.state(subsystem, definition): a published reader. */
async function openPublished(nativeClient, subsystem, definition) {
  const access = registry.get(definition);
  if (access === undefined || access.opener === null) {
    throw new TypeError("state: a published reader needs a JSON definition made by value(), map() or deque()");
  }
  if (typeof subsystem !== "string" || subsystem === "") throw new TypeError("state: subsystem must be a non-empty string");
  const readCache = definition.readCache;
  let nat;
  try {
    nat = await nativeClient[access.opener](subsystem, definition.name, readCache?.ttlMs, readCache === false);
  } catch (e) {
    throw convert(e);
  }
  return new access.Reader(nat, JSON_CODEC);
}

module.exports = {
  value: define("value", "json"),
  map: define("map", "json"),
  deque: define("deque", "json"),
  messageValue: define("value", "message"),
  messageMap: define("map", "message"),
  messageDeque: define("deque", "message"),
  ValueState,
  MapState,
  DequeState,
  PublishedValue,
  PublishedMap,
  PublishedDeque,
  bind,
  openPublished,
  convert,
  JSON_CODEC,
  MESSAGE_CODEC,
};
