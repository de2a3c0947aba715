"use strict";
// Error classes users throw from handlers (and that the package throws),
// the permanent/transient decorators, and the mapping from native status
// codes to these classes.

const util = require("node:util");

class EventHandlerError extends Error {
  constructor(message, options) {
    super(message, options);
    // The subclass name, so that logs and stack traces say what it is.
    Object.defineProperty(this, "name", { value: new.target.name, configurable: true, writable: true });
  }

  /** @abstract */
  get isPermanent() {
    throw new TypeError("EventHandlerError.isPermanent is abstract");
  }
}

class TransientError extends EventHandlerError {
  get isPermanent() {
    return false;
  }
}

class PermanentError extends EventHandlerError {
  get isPermanent() {
    return true;
  }
}

class TransientStateError extends TransientError {}
class PermanentStateError extends PermanentError {}

// Checks the name rather than the class, so it works across realms.
function isStateError(e) {
  return util.types.isNativeError(e) && (e.name === "PermanentStateError" || e.name === "TransientStateError");
}

// What a handler failure means for the event: permanent only when the error
// says so; everything else (a plain Error, a string, ...) is transient.
function isPermanentFailure(err) {
  return err instanceof EventHandlerError && err.isPermanent === true;
}

// A TC39 (2023-11) method decorator, also usable on a plain function:
// errors that are instances of one of `classes` (any error when none are
// given) are rethrown as `Wrap`, with the original as `cause`.
function classifier(Wrap, decoratorName) {
  return (...classes) =>
    function decorate(fn, context) {
      if (context !== undefined && context.kind !== "method") {
        throw new TypeError(`@${decoratorName} can only decorate methods or functions, not a ${context.kind}`);
      }
      if (typeof fn !== "function") throw new TypeError(`@${decoratorName} needs a function`);
      const matches = (e) => classes.length === 0 || classes.some((C) => e instanceof C);
      const convert = (e) => {
        if (!matches(e) || e instanceof Wrap) return e;
        return new Wrap(e instanceof Error ? e.message : String(e), { cause: e });
      };
      if (fn.constructor && fn.constructor.name === "AsyncFunction") {
        return async function (...args) {
          try {
            return await fn.apply(this, args);
          } catch (e) {
            throw convert(e);
          }
        };
      }
      return function (...args) {
        try {
          return fn.apply(this, args);
        } catch (e) {
          throw convert(e);
        }
      };
    };
}

const permanent = classifier(PermanentError, "permanent");
const transient = classifier(TransientError, "transient");

// Native errors carry `status` and `code` (PROSODY_ERR_*). Failures that a
// retry cannot fix become PermanentError; the rest TransientError.
const PERMANENT_CODES = new Set([
  "PROSODY_ERR_INVALID_ARGUMENT",
  "PROSODY_ERR_INVALID_HANDLE",
  "PROSODY_ERR_CONFIG",
  "PROSODY_ERR_PERMANENT",
  "PROSODY_ERR_CLOSED",
  "PROSODY_ERR_AFTER_FORK",
  "PROSODY_ERR_INTERNAL",
]);

function fromNative(err) {
  if (!err || typeof err.code !== "string" || err instanceof EventHandlerError) return err;
  // Misuse, not a failure to retry: subscribing twice or unsubscribing
  // when not subscribed is an Error (the lifecycle error of index.d.ts),
  // and a value the library refuses (a topic name Kafka rejects) a
  // RangeError naming it.
  if (err.code === "PROSODY_ERR_STATE" || err.code === "PROSODY_ERR_INVALID_ARGUMENT") {
    const out = err.code === "PROSODY_ERR_STATE" ? new Error(err.message, { cause: err }) : new RangeError(err.message, { cause: err });
    out.code = err.code;
    return out;
  }
  const Wrap = PERMANENT_CODES.has(err.code) ? PermanentError : TransientError;
  const out = new Wrap(err.message, { cause: err });
  out.code = err.code;
  return out;
}

module.exports = {
  EventHandlerError,
  TransientError,
  PermanentError,
  TransientStateError,
  PermanentStateError,
  isStateError,
  isPermanentFailure,
  permanent,
  transient,
  fromNative,
};
