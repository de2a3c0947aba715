"use strict";
// OpenTelemetry glue. @opentelemetry/api is an optional peer dependency:
// without it, sends carry no trace headers and handlers run without spans.
//
// The W3C traceparent / tracestate / baggage formats are read and written
// here rather than through the globally registered propagator, so that
// context flows even when the application registered none (the API's
// default propagator is a no-op).

let api = null;
try {
  api = require("@opentelemetry/api");
} catch {
  api = null;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** The active context as W3C headers, or null when there is nothing to send. */
function inject() {
  if (api === null) return null;
  const ctx = api.context.active();
  const out = { traceparent: "", tracestate: "", baggage: "" };
  const sc = api.trace.getSpanContext(ctx);
  if (sc && api.isSpanContextValid(sc)) {
    out.traceparent = `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, "0")}`;
    if (sc.traceState) out.tracestate = sc.traceState.serialize();
  }
  const bag = api.propagation.getBaggage(ctx);
  if (bag) {
    out.baggage = bag
      .getAllEntries()
      .map(([k, e]) => `${encodeURIComponent(k)}=${encodeURIComponent(e.value)}`)
      .join(",");
  }
  return out.traceparent || out.baggage ? out : null;
}

function parseBaggage(header) {
  const entries = {};
  for (const item of header.split(",")) {
    const [pair] = item.split(";"); // properties are dropped
    const eq = pair.indexOf("=");
    if (eq <= 0) continue;
    try {
      entries[decodeURIComponent(pair.slice(0, eq).trim())] = { value: decodeURIComponent(pair.slice(eq + 1).trim()) };
    } catch {
      // A malformed entry is skipped, as the W3C propagator does.
    }
  }
  return entries;
}

/** The context a record's headers describe (ROOT when they describe none). */
function extract(traceparent, tracestate, baggage) {
  let ctx = api.ROOT_CONTEXT;
  const m = traceparent ? TRACEPARENT.exec(traceparent) : null;
  if (m && m[1] !== "ff") {
    const sc = { traceId: m[2], spanId: m[3], traceFlags: parseInt(m[4], 16), isRemote: true };
    if (tracestate && api.createTraceState) sc.traceState = api.createTraceState(tracestate);
    if (api.isSpanContextValid(sc)) ctx = api.trace.setSpanContext(ctx, sc);
  }
  if (baggage) ctx = api.propagation.setBaggage(ctx, api.propagation.createBaggage(parseBaggage(baggage)));
  return ctx;
}

let tracer = null;

/**
 * Runs fn() inside a span named `name` whose parent comes from the record's
 * headers, and ends the span when the Promise fn returns settles. Without
 * the API it just calls fn().
 */
function runInSpan(name, traceparent, tracestate, baggage, attributes, fn) {
  if (api === null) return fn();
  tracer ??= api.trace.getTracer("@prosody-events/prosody");
  const parent = extract(traceparent, tracestate, baggage);
  const span = tracer.startSpan(name, { kind: api.SpanKind.CONSUMER, attributes }, parent);
  const ctx = api.trace.setSpan(parent, span);
  return api.context.with(ctx, fn).then(
    (v) => {
      span.end();
      return v;
    },
    (err) => {
      span.recordException(err instanceof Error ? err : String(err));
      span.setStatus({ code: api.SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
      span.end();
      throw err;
    },
  );
}

// A context holding one value of our own: with a context manager
// registered, api.context.with(PROBE, ...) makes it the active context;
// without one (the API's no-op manager) the active context stays ROOT.
const PROBE = api === null ? null : api.ROOT_CONTEXT.setValue(Symbol("prosody.probe"), true);
const probeActive = () => api.context.active() === PROBE;

/**
 * Whether a span around a handler can make any difference: true when an
 * application registered a context manager (the handler could see the
 * span, its parent and the baggage through the active context) or a
 * tracer provider (spans are recorded), false when the API is missing or
 * both are the API's no-ops. Checked once per batch, so registering either
 * takes effect with the next batch.
 */
function active() {
  if (api === null) return false;
  if (api.context.with(PROBE, probeActive)) return true;
  const provider = api.trace.getTracerProvider();
  const delegate = typeof provider.getDelegate === "function" ? provider.getDelegate() : provider;
  // The constructor's name is the only public mark of the no-op provider;
  // anything else (including a renamed class) counts as a real one.
  return delegate?.constructor?.name !== "NoopTracerProvider";
}

// How long flushTelemetry waits for Kafka before it rejects.
const FLUSH_TIMEOUT_MS = 30000;

/**
 * Writes the telemetry events every client of the process has queued for
 * its telemetry topic; rejects when Kafka did not take them in time.
 */
async function flushTelemetry() {
  await require("./native").flushTelemetry(FLUSH_TIMEOUT_MS);
}

/** Flushes the telemetry events; the emitters stop with their clients. */
async function shutdownTelemetry() {
  await flushTelemetry();
}

module.exports = { inject, extract, runInSpan, active, available: () => api !== null, flushTelemetry, shutdownTelemetry };
