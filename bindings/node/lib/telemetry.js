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

module.exports = { inject, extract, runInSpan, available: () => api !== null };
