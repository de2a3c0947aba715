"use strict";
// What handlers see: Message, Timer, Context; and the dispatcher that turns
// the addon's batches of ready items into handler calls and their outcomes
// into completions.

const native = require("./native");
const telemetry = require("./telemetry");
const { PermanentError, isPermanentFailure, fromNative } = require("./errors");
const { Message } = require("./message");
const keyedState = require("./state");

// Item kinds and outcomes of include/prosody.h.
const KIND_MESSAGE = 1;
const KIND_TIMER = 2;
const KIND_CANCELLED = 3;
const KIND_EXPIRED = 4;
const OUTCOME_OK = 0;
const OUTCOME_TRANSIENT = 1;
const OUTCOME_PERMANENT = 2;
// A batch from the addon (src/addon.cc, Client::Drain): numbers per item
// in a shared Float64Array, keys and trace fields in an array of strings,
// payloads sliced from one string (or, when some payload of the batch is
// not ASCII, in the array too), topic names by index.
const NUM_STRIDE = 10;
const N_KIND = 0;
const N_EVENT = 1;
const N_PARTITION = 2;
const N_OFFSET = 3;
const N_TIME = 4; // record timestamp or due time, epoch ms
const N_TOPIC = 5;
const N_KEY = 6; // index of the key in strs
const N_PAYLOAD = 7; // payload start in text, or its index in strs
const N_PAYLOAD_END = 8; // payload end in text, or -1: the payload is in strs
const N_TRACE = 9; // index of traceparent, tracestate, baggage in strs, or -1

const kEvent = Symbol("event");

// Handed to callbacks that cannot observe their third argument (see
// observesSignal): creating an AbortSignal is the most expensive step of
// dispatching an event in Node 20. It never aborts.
const NEVER = new AbortController().signal;

// The head of a function's source up to its parameter list, when it is a
// plain function, arrow or method: `async`, `function`, `*`, and a name.
const HEAD = /^(?:async\s*)?(?:function\b\s*)?(?:\*\s*)?(?:[A-Za-z_$][\w$]*\s*)?\(([^)]*)\)/;
const ARROW_ONE = /^(?:async\s+)?[A-Za-z_$][\w$]*\s*=>/;
const SIMPLE_PARAMS = /^[\w$\s,]*$/;
// `arguments` and `eval` can reach any argument; bound and built-in
// functions print as `function name() { [native code] }`, hiding theirs.
const OPAQUE = /\barguments\b|\beval\b|\[native code\]/;

/**
 * Whether callback fn can see the AbortSignal passed as its third argument.
 * Conservative: true unless its source shows at most two plain parameters
 * (no default, rest or destructuring) and no use of `arguments` or `eval`.
 * Bound, built-in and proxied functions, and any source this cannot read,
 * count as observing. Checked once per subscribe.
 */
function observesSignal(fn) {
  if (fn.length >= 3) return true;
  let src;
  try {
    src = Function.prototype.toString.call(fn);
  } catch {
    return true;
  }
  if (OPAQUE.test(src)) return true;
  if (ARROW_ONE.test(src)) return false;
  const m = HEAD.exec(src);
  if (m === null || !SIMPLE_PARAMS.test(m[1])) return true;
  let count = 0;
  for (const p of m[1].split(",")) if (p.trim() !== "") count++;
  return count >= 3;
}

// Collection kinds of include/prosody.h (prosody_event_state).
const STATE_KINDS = { value: 1, map: 2, deque: 3 };

// What a native state operation rejects with once its attempt has ended
// (the native handle is released then): a transient failure.
function expiredError() {
  return new Error("the keyed-state handle is no longer valid because its event attempt has ended", {
    cause: new Error("transient"),
  });
}
const EXPIRED = new Proxy(
  {},
  {
    get: (_, name) =>
      name === "then"
        ? undefined
        : () => {
            throw expiredError();
          },
  },
);

/**
 * Per-attempt state, shared by the Context and the dispatcher. It is also
 * the native context of keyed state (node-api.md §8): valueState(name) and
 * the other vend methods open the attempt's native state handles.
 */
class EventState {
  constructor(id, kind, wantsSignal, collections) {
    this.id = id;
    this.kind = kind;
    this.controller = wantsSignal ? new AbortController() : null;
    this.cancelled = false;
    this.done = false;
    this.cancelWaiters = null; // resolvers of onCancel(), made on demand
    this.ops = 0; // timer and state operations still running
    this.opsIdle = null; // resolves when ops drops to 0 while finishing
    this.collections = collections; // registered name -> {kind, payload}, or null
    this.natives = null; // the native state handles opened, released after completion
  }

  // The operation counter of keyed-state handles: an operation that starts
  // before the attempt finished delays its completion.
  begin() {
    if (this.done) return false;
    this.ops++;
    return true;
  }
  end() {
    if (--this.ops === 0 && this.opsIdle) this.opsIdle();
  }

  openState(name, kind, payload) {
    if (this.done) return EXPIRED;
    const registered = this.collections?.get(name);
    if (registered !== undefined && registered.kind === kind && registered.payload !== payload) {
      // The C ABI opens by name and kind; the payload is checked here.
      throw new Error(`keyed state: collection "${name}" is registered with ${registered.payload} items, not ${payload} items`, {
        cause: new Error("permanent"),
      });
    }
    const handle = native.openState(this.id, name, STATE_KINDS[kind]);
    (this.natives ??= []).push(handle);
    return handle;
  }

  valueState(name) {
    return this.openState(name, "value", "json");
  }
  mapState(name) {
    return this.openState(name, "map", "json");
  }
  dequeState(name) {
    return this.openState(name, "deque", "json");
  }
  messageValueState(name) {
    return this.openState(name, "value", "message");
  }
  messageMapState(name) {
    return this.openState(name, "map", "message");
  }
  messageDequeState(name) {
    return this.openState(name, "deque", "message");
  }

  /** Releases the native state handles (after the completion went out). */
  releaseStates() {
    const handles = this.natives;
    if (handles === null) return;
    this.natives = null;
    for (const h of handles) h.release();
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
  #handles = null; // definition -> keyed-state handle of this attempt

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

  /**
   * The handle of a registered collection for this attempt's key
   * (synchronous; one handle per definition object and attempt).
   */
  state(definition) {
    const s = this[kEvent];
    return keyedState.bind(s, (this.#handles ??= new Map()), definition, typeof s.begin === "function" ? s : null);
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
      // A time the timer store cannot hold: no retry can help.
      if (e?.code === "PROSODY_ERR_INVALID_ARGUMENT") throw new PermanentError(e.message, { cause: e });
      throw fromNative(e);
    } finally {
      if (--s.ops === 0 && s.opsIdle) s.opsIdle();
    }
  }
}

// Successful outcomes go into a buffer shared with the addon, which sends
// them with its next prosody_events_complete (after the current batch, or
// within the loop turn): no native call per event.
const okIds = native.completionIds;
const okCount = native.completionCount;
const OK_CAPACITY = okIds.length;

function completeOk(id) {
  const n = okCount[0];
  if (n >= OK_CAPACITY) {
    native.complete(id, OUTCOME_OK);
    return;
  }
  okIds[n] = id;
  okCount[0] = n + 1;
  if (n === 0) native.armCompletions();
}

/**
 * Runs a handler for the batches of one subscription. Every ready item
 * becomes a handler call on this thread; many keys run at once (the core
 * keeps one event per key in flight).
 */
class Dispatcher {
  constructor(handler, collections = null) {
    this.handler = handler;
    this.collections = collections;
    this.onMessage = typeof handler.onMessage === "function" ? handler.onMessage : null;
    this.onTimer = typeof handler.onTimer === "function" ? handler.onTimer : null;
    this.messageSignal = this.onMessage !== null && observesSignal(this.onMessage);
    this.timerSignal = this.onTimer !== null && observesSignal(this.onTimer);
    this.inflight = new Map(); // event id -> EventState
    this.onBatch = this.onBatch.bind(this);
  }

  onBatch(n, nums, strs, text, topics) {
    // Decided once per batch: whether handlers must run inside spans.
    const traced = telemetry.active();
    for (let i = 0, b = 0; i < n; i++, b += NUM_STRIDE) {
      const kind = nums[b + N_KIND];
      const id = nums[b + N_EVENT];
      if (kind === KIND_CANCELLED) {
        const s = this.inflight.get(id);
        if (s !== undefined) s.cancel();
        continue;
      }
      if (kind === KIND_EXPIRED) {
        // Past its timeout: the library has stopped waiting for this
        // handler (the attempt failed transiently, the key moves on). Its
        // signal aborts; its outcome, when it comes, is ignored.
        const s = this.inflight.get(id);
        if (s !== undefined) {
          this.inflight.delete(id);
          s.cancel();
        }
        continue;
      }
      const fn = kind === KIND_MESSAGE ? this.onMessage : this.onTimer;
      if (fn === null) {
        // No callback for this kind: acknowledged as handled.
        completeOk(id);
        continue;
      }
      const key = strs[nums[b + N_KEY]];
      const state = new EventState(id, kind, kind === KIND_MESSAGE ? this.messageSignal : this.timerSignal, this.collections);
      this.inflight.set(id, state);
      let arg;
      if (kind === KIND_MESSAGE) {
        const p = nums[b + N_PAYLOAD];
        const end = nums[b + N_PAYLOAD_END];
        const raw = end < 0 ? strs[p] : text.slice(p, end);
        arg = new Message(topics[nums[b + N_TOPIC]], nums[b + N_PARTITION], nums[b + N_OFFSET], nums[b + N_TIME], key, raw);
      } else {
        arg = { key, time: new Date(nums[b + N_TIME]) };
      }
      if (traced) {
        const t = nums[b + N_TRACE];
        if (t < 0) this.startTraced(fn, state, arg, "", "", "");
        else this.startTraced(fn, state, arg, strs[t], strs[t + 1], strs[t + 2]);
      } else {
        this.start(fn, state, arg);
      }
    }
  }

  start(fn, state, arg) {
    let result;
    try {
      result = fn.call(this.handler, new Context(state), arg, state.controller === null ? NEVER : state.controller.signal);
    } catch (err) {
      this.finish(state, err, true);
      return;
    }
    this.settle(state, result);
  }

  startTraced(fn, state, arg, traceparent, tracestate, baggage) {
    const message = state.kind === KIND_MESSAGE;
    const attributes = message
      ? { "messaging.destination.name": arg.topic, "messaging.kafka.partition": arg.partition, "messaging.kafka.message.key": arg.key }
      : { "prosody.timer.key": arg.key };
    const ctx = new Context(state);
    const signal = state.controller === null ? NEVER : state.controller.signal;
    const handler = this.handler;
    let result;
    try {
      result = telemetry.runInSpan(message ? "onMessage" : "onTimer", traceparent, tracestate, baggage, attributes, async () =>
        fn.call(handler, ctx, arg, signal),
      );
    } catch (err) {
      this.finish(state, err, true);
      return;
    }
    this.settle(state, result);
  }

  // A value completes the event at once; a thenable when it settles (one
  // microtask for an async callback that did not wait).
  settle(state, result) {
    if (result !== null && typeof result === "object") {
      let then;
      try {
        then = result.then;
        if (typeof then === "function") {
          then.call(
            result,
            (v) => this.finish(state, v, false),
            (err) => this.finish(state, err, true),
          );
          return;
        }
      } catch (err) {
        // A thenable whose then throws fails its own event, not the batch.
        this.finish(state, err, true);
        return;
      }
    }
    this.finish(state, result, false);
  }

  finish(state, value, failed) {
    if (state.done) return; // a thenable that settled twice
    if (state.ops > 0) {
      // Wait for the attempt's timer and state operations before completing it.
      new Promise((resolve) => (state.opsIdle = resolve)).then(() => this.finish(state, value, failed));
      return;
    }
    let outcome = OUTCOME_OK;
    let message;
    if (failed) {
      outcome = isPermanentFailure(value) ? OUTCOME_PERMANENT : OUTCOME_TRANSIENT;
      try {
        message = value instanceof Error ? `${value.name}: ${value.message}` : String(value);
      } catch {
        message = "the handler failed with a value that cannot be shown";
      }
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
    if (outcome === OUTCOME_OK) completeOk(state.id);
    else native.complete(state.id, outcome, message);
    // The addon releases them after the completion has gone out.
    state.releaseStates();
  }
}

module.exports = { Message, Context, Dispatcher, observesSignal, KIND_MESSAGE, KIND_TIMER };
