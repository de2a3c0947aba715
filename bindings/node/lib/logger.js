"use strict";
// Forwards the core's log records to a replaceable logger (console by
// default). Which records exist is decided by PROSODY_LOG in the core.

const native = require("./native");

const LEVELS = { 1: "debug", 2: "info", 3: "warn", 4: "error" };

// One line per record: "[prosody] WARN message key=value ...".
function line(level, message, metadata) {
  let text = `[prosody] ${level} ${message}`;
  if (metadata) {
    for (const [k, v] of Object.entries(metadata)) {
      if (k === "target" || k === "time") continue;
      const s = String(v);
      text += ` ${k}=${/[\s="]/.test(s) || s === "" ? JSON.stringify(s) : s}`;
    }
  }
  return text;
}

const consoleLogger = Object.freeze({
  error: (message, metadata) => console.error(line("ERROR", message, metadata)),
  warn: (message, metadata) => console.warn(line("WARN", message, metadata)),
  info: (message, metadata) => console.info(line("INFO", message, metadata)),
  debug: (message, metadata) => console.debug(line("DEBUG", message, metadata)),
  trace: (message, metadata) => console.debug(line("TRACE", message, metadata)),
});

let current = null;
let initialized = false;

// Reads the logfmt attributes the core sends (key=value, values quoted
// with Go's strconv.Quote when they contain spaces).
function parseAttributes(text) {
  const out = {};
  const re = /([^\s=]+)=("(?:[^"\\]|\\.)*"|\S*)/g;
  let m;
  while ((m = re.exec(text)) !== null) {
    let v = m[2];
    if (v.startsWith('"')) {
      try {
        v = JSON.parse(v);
      } catch {
        v = v.slice(1, -1);
      }
    }
    out[m[1]] = v;
  }
  return out;
}

function sink(level, timeMs, target, message, attributes) {
  const logger = current;
  if (logger === null) return;
  const method = LEVELS[level] ?? "info";
  const metadata = { target, time: new Date(timeMs), ...parseAttributes(attributes) };
  try {
    (logger[method] ?? logger.info).call(logger, message, metadata);
  } catch {
    // A failing logger must not take the process down from a log record.
  }
}

/** Routes the core's log records through this package (idempotent). */
function initialize() {
  if (initialized) return;
  native.setLogSink(sink);
  initialized = true;
}

function checkLogger(logger) {
  if (logger === null || typeof logger !== "object" && typeof logger !== "function") {
    throw new TypeError("setLogger: logger must be an object with error, warn, info, debug and trace methods");
  }
  for (const m of ["error", "warn", "info", "debug", "trace"]) {
    if (typeof logger[m] !== "function") throw new TypeError(`setLogger: logger.${m} must be a function`);
  }
}

function setLogger(logger) {
  checkLogger(logger);
  initialize();
  current = logger;
}

function setLoggerIfUnset(logger) {
  if (current !== null) return false;
  setLogger(logger);
  return true;
}

const loggerIsSet = () => current !== null;
const getCurrentLogger = () => current;

module.exports = { initialize, setLogger, setLoggerIfUnset, loggerIsSet, getCurrentLogger, consoleLogger, parseAttributes };
