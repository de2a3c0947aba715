"use strict";
// Message: a consumed Kafka record as handlers see it, and the item form
// of a message in a message collection of keyed state.

const util = require("node:util");
const { PermanentError } = require("./errors");

const UNPARSED = Symbol("unparsed");

class Message {
  #topic;
  #partition;
  #offset; // a Number: Kafka offsets stay far below 2^53
  #timestampMs;
  #key;
  // The payload's JSON text until it is parsed. It can be a slice of the
  // batch's text (src/addon.cc), which keeps that text alive while this
  // holds it; parsing lets go of it.
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
        this.#raw = null;
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

  /**
   * The item a message collection stores (include/prosody.h, "Keyed
   * state"): the JSON object {"topic","partition","offset","key",
   * "timestamp" (epoch ms),"payload"}. An unparsed payload is copied as
   * the text it arrived as. Throws when `m` is not a Message.
   */
  static toItem(m) {
    if (!(m !== null && typeof m === "object" && #raw in m)) {
      throw new TypeError(`a message collection stores Message objects, got ${m === null ? "null" : typeof m}`);
    }
    const payload = m.#payload === UNPARSED ? m.#raw : JSON.stringify(m.#payload);
    if (typeof payload !== "string" || payload.trim() === "") throw new TypeError("the message's payload is not JSON");
    const head = JSON.stringify({ topic: m.#topic, partition: m.#partition, offset: m.#offset, key: m.#key, timestamp: m.#timestampMs });
    return `${head.slice(0, -1)},"payload":${payload}}`;
  }

  /** The Message an item of a message collection describes. */
  static fromItem(text) {
    const o = JSON.parse(text);
    if (o === null || typeof o !== "object" || typeof o.topic !== "string" || typeof o.key !== "string") {
      throw new TypeError("a stored message does not decode");
    }
    const m = new Message(o.topic, Number(o.partition), Number(o.offset), Number(o.timestamp), o.key, null);
    m.#payload = o.payload === undefined ? null : o.payload;
    return m;
  }
}

module.exports = { Message };
