"use strict";
// Error classes, the permanent/transient decorators, isStateError.
const test = require("node:test");
const assert = require("node:assert/strict");
const p = require("..");

test("the error hierarchy and isPermanent", () => {
  const t = new p.TransientError("t");
  const e = new p.PermanentError("p", { cause: "why" });
  assert.ok(t instanceof p.EventHandlerError && t instanceof Error);
  assert.equal(t.isPermanent, false);
  assert.equal(e.isPermanent, true);
  assert.equal(e.name, "PermanentError");
  assert.equal(e.cause, "why");
  assert.ok(new p.PermanentStateError("x") instanceof p.PermanentError);
  assert.equal(p.isStateError(new p.TransientStateError("x")), true);
  assert.equal(p.isStateError(new p.TransientError("x")), false);
  const foreign = new Error("x");
  foreign.name = "PermanentStateError";
  assert.equal(p.isStateError(foreign), true, "checked by name, across realms");
});

test("decorators rethrow matching errors with the original as cause", async () => {
  class Handler {
    async onMessage(kind) {
      if (kind === "type") throw new TypeError("bad type");
      throw new Error("other");
    }
  }
  // Applied as TC39 (2023-11) method decorators are: (value, context).
  const decorated = p.permanent(TypeError)(Handler.prototype.onMessage, { kind: "method", name: "onMessage" });
  const err = await decorated.call(new Handler(), "type").catch((e) => e);
  assert.ok(err instanceof p.PermanentError);
  assert.equal(err.message, "bad type");
  assert.ok(err.cause instanceof TypeError);
  const other = await decorated.call(new Handler(), "x").catch((e) => e);
  assert.equal(other.constructor, Error, "other errors pass unchanged");

  const sync = p.transient(RangeError)(() => {
    throw new RangeError("r");
  });
  assert.throws(sync, p.TransientError);
  assert.throws(() => p.permanent(TypeError)(() => {}, { kind: "field" }), TypeError);
});

test("Mode and ConsumerState values equal their names", () => {
  for (const [k, v] of Object.entries(p.Mode)) assert.equal(k, v);
  for (const [k, v] of Object.entries(p.ConsumerState)) assert.equal(k, v);
  assert.deepEqual(Object.keys(p.ConsumerState).sort(), ["ConfigurationFailed", "Configured", "Running", "Shutdown", "Unconfigured"]);
});

test("state definitions are frozen and carry only given options", () => {
  const d = p.map("m", { keysetLimit: 5 });
  assert.deepEqual(d, { name: "m", kind: "map", payload: "json", keysetLimit: 5 });
  assert.ok(Object.isFrozen(d));
  assert.equal(p.messageDeque("q").payload, "message");
});
