"use strict";
// What handlers see: Message, Timer, Context; and the dispatcher that turns
// the addon's batches of ready items into handler calls and their outcomes
// into completions.

const util = require("node:util");
const native = require("./native");
const telemetry = require("./telemetry");
const { PermanentError, TransientError, isPermanentFailure, fromNative } = require("./errors");

// Item kinds and outcomes of include/prosody.h.
const KIND_MESSAGE = 1;
const KIND_TIMER = 2;
const KIND_CANCELLED = 3;
const OUTCOME_OK = 0;
const OUTCOME_TRANSIENT = 1;
const OUTCOME_PERMANENT = 2;
const STRIDE = 11; // fields per item in a batch (src/addon.cc)

const UNPARSED = Symbol("unparsed");

class Message {
  #topic;
  #partition;
  #offset; // a Number: Kafka offsets stay far below 2^53
  #timestampMs;
  #key;
  #raw;
  #payload = UNPARSED;

  constructor(topic, partition, offset, timestampMs, key, raw) {
    this.#topic = topic;
    this.#partition = partition;
    this.#offset = offset;
    this.#timestampMs = timestampMs;
    this.#key = key;
    this.#raw = raw;
  }

  get topic() {
    return this.#topic;
  }
  get partition() {
    return this.#partition;
  }
  get offset() {
    return BigInt(this.#offset);
  }
  get timestamp() {
    return new Date(this.#timestampMs);
  }
  get key() {
    return this.#key;
  }
  /** Parsed on first read, then cached. */
  get payload() {
    if (this.#payload === UNPARSED) {
      try {
        this.#payload = JSON.parse(this.#raw);
      } catch (e) {
        throw new PermanentError(`message payload is not JSON: ${e.message}`, { cause: e });
      }
    }
    return this.#payload;
  }

  // JSON.stringify(message) and console.log(message) show the fields
  // (getters on the prototype are otherwise invisible to both).
  toJSON() {
    return {
      topic: this.#topic,
      partition: this.#partition,
      offset: this.#offset,
      timestamp: this.timestamp.toISOString(),
      key: this.#key,
      payload: this.payload,
    };
  }
  [util.inspect.custom](depth, options, inspect) {
    const fields = { ...this.toJSON(), offset: this.offset, timestamp: this.timestamp };
    return `Message ${inspect(fields, options)}`;
  }
}

const kEvent = Symbol("event");

/** Per-attempt state, shared by the Context and the dispatcher. */
// Handed to callbacks that declare fewer than three parameters (and so
// cannot name the signal): creating an AbortSignal is the most expensive
// step of dispatching an event in Node 20. It never aborts.
const NEVER = new AbortController().signal;

class EventState {
  constructor(id, kind, wantsSignal) {
    this.id = id;
    this.kind = kind;
    this.controller = wantsSignal ? new AbortController() : null;
    this.cancelled = false;
    this.done = false;
    this.cancelWaiters = null; // resolvers of onCancel(), made on demand
    this.ops = 0; // timer operations still running
    this.opsIdle = null; // resolves when ops drops to 0 while finishing
  }

  cancel() {
    if (this.cancelled || this.done) return;
    this.cancelled = true;
    this.controller?.abort(new Error(this.kind === KIND_TIMER ? "timer cancelled" : "message cancelled"));
    this.wake();
  }

  wake() {
    const waiters = this.cancelWaiters;
    this.cancelWaiters = null;
    if (waiters) for (const resolve of waiters) resolve();
  }
}

function toTime(name, time) {
  const ms = time instanceof Date ? time.getTime() : typeof time === "number" ? time : NaN;
  if (!Number.isFinite(ms)) throw new TypeError(`${name}: time must be a valid Date`);
  return ms;
}

class Context {
  constructor(state) {
    this[kEvent] = state;
  }

  /** True once the attempt was asked to stop (timeout, rebalance, shutdown) or has finished. */
  get shouldCancel() {
    const s = this[kEvent];
    if (s.cancelled || s.done) return true;
    // The notice may still be queued: ask the library.
    return native.shouldCancel(s.id);
  }

  /** Resolves when the attempt is cancelled, or once its handler has finished. */
  onCancel() {
    const s = this[kEvent];
    if (s.cancelled || s.done) return Promise.resolve();
    return new Promise((resolve) => (s.cancelWaiters ??= []).push(resolve));
  }

  schedule(time) {
    return this.#op((id) => native.schedule(id, toTime("schedule", time)));
  }
  clearAndSchedule(time) {
    return this.#op((id) => native.clearAndSchedule(id, toTime("clearAndSchedule", time)));
  }
  unschedule(time) {
    return this.#op((id) => native.unschedule(id, toTime("unschedule", time)));
  }
  clearScheduled() {
    return this.#op((id) => native.clearScheduled(id));
  }
  scheduled() {
    return this.#op((id) => native.scheduled(id)).then((times) => times.map((ms) => new Date(ms)));
  }

  /** Keyed state arrives with a later release. */
  state() {
    throw new TransientError("context.state: keyed state is not available in this release");
  }

  // The event is completed only after its timer operations finished (the
  // library fails operations still running at completion), so a handler
  // that forgets to await one still gets it done.
  async #op(start) {
    const s = this[kEvent];
    if (s.done) throw new PermanentError("the context is no longer valid: its handler has finished");
    s.ops++;
    try {
      return await start(s.id);
    } catch (e) {
      throw fromNative(e);
    } finally {
      if (--s.ops === 0 && s.opsIdle) s.opsIdle();
    }
  }
}

/**
 * Runs a handler for the batches of one subscription. Every ready item
 * becomes a handler call on this thread; many keys run at once (the core
 * keeps one event per key in flight).
 */
class Dispatcher {
  constructor(handler) {
    this.handler = handler;
    this.onMessage = typeof handler.onMessage === "function" ? handler.onMessage : null;
    this.onTimer = typeof handler.onTimer === "function" ? handler.onTimer : null;
    this.inflight = new Map(); // event id -> EventState
    this.onBatch = this.onBatch.bind(this);
  }

  onBatch(flat) {
    for (let i = 0; i < flat.length; i += STRIDE) {
      const kind = flat[i];
      const id = flat[i + 1];
      if (kind === KIND_CANCELLED) {
        const s = this.inflight.get(id);
        if (s !== undefined) s.cancel();
        continue;
      }
      this.start(kind, id, flat, i);
    }
  }

  start(kind, id, flat, i) {
    const fn = kind === KIND_MESSAGE ? this.onMessage : this.onTimer;
    if (fn === null) {
      // No callback for this kind: acknowledged as handled.
      native.complete(id, OUTCOME_OK);
      return;
    }
    const state = new EventState(id, kind, fn.length >= 3 || fn.length === 0);
    this.inflight.set(id, state);
    const ctx = new Context(state);
    const arg =
      kind === KIND_MESSAGE
        ? new Message(flat[i + 2], flat[i + 3], flat[i + 4], flat[i + 5], flat[i + 6], flat[i + 7])
        : { key: flat[i + 6], time: new Date(flat[i + 5]) };
    const signal = state.controller === null ? NEVER : state.controller.signal;
    const handler = this.handler;
    let result;
    if (telemetry.available()) {
      const attributes =
        kind === KIND_MESSAGE
          ? { "messaging.destination.name": flat[i + 2], "messaging.kafka.partition": flat[i + 3], "messaging.kafka.message.key": flat[i + 6] }
          : { "prosody.timer.key": flat[i + 6] };
      result = telemetry.runInSpan(kind === KIND_MESSAGE ? "onMessage" : "onTimer", flat[i + 8], flat[i + 9], flat[i + 10], attributes, async () =>
        fn.call(handler, ctx, arg, signal),
      );
    } else {
      try {
        result = fn.call(handler, ctx, arg, signal);
      } catch (err) {
        this.finish(state, err, true);
        return;
      }
    }
    if (result !== null && typeof result === "object" && typeof result.then === "function") {
      result.then(
        (v) => this.finish(state, v, false),
        (err) => this.finish(state, err, true),
      );
    } else {
      this.finish(state, result, false);
    }
  }

  finish(state, value, failed) {
    if (state.ops > 0) {
      // Wait for the attempt's timer operations before completing it.
      new Promise((resolve) => (state.opsIdle = resolve)).then(() => this.finish(state, value, failed));
      return;
    }
    let outcome = OUTCOME_OK;
    let message;
    if (failed) {
      outcome = isPermanentFailure(value) ? OUTCOME_PERMANENT : OUTCOME_TRANSIENT;
      message = value instanceof Error ? `${value.name}: ${value.message}` : String(value);
    } else if (value !== undefined) {
      // The resolved value is serialised as JSON (response values are a
      // later feature); one that cannot be is a permanent failure.
      try {
        JSON.stringify(value);
      } catch (e) {
        outcome = OUTCOME_PERMANENT;
        message = `PermanentError: the handler's result is not JSON: ${e.message}`;
      }
    }
    state.done = true;
    this.inflight.delete(state.id);
    state.wake();
    native.complete(state.id, outcome, message);
  }
}

module.exports = { Message, Context, Dispatcher, KIND_MESSAGE, KIND_TIMER };
