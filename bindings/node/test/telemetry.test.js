"use strict";
// OpenTelemetry glue: the caller's active context travels with send (W3C
// headers on the record), and handlers run inside the message's trace.
const test = require("node:test");
const assert = require("node:assert/strict");
const api = require("@opentelemetry/api");
const { AsyncLocalStorageContextManager } = require("@opentelemetry/context-async-hooks");
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require("@opentelemetry/sdk-trace-base");
const prosody = require("..");
const { mockConfig, unique, deferred } = require("./helpers");

prosody.setLogger({ error() {}, warn() {}, info() {}, debug() {}, trace() {} });

const exporter = new InMemorySpanExporter();
api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
api.trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));

test("trace context and baggage flow from send into the handler", async () => {
  const topic = unique("otel");
  const client = new prosody.ProsodyClient(mockConfig({ subscribedTopics: topic }));
  try {
    const seen = deferred();
    await client.subscribe({
      async onMessage() {
        const active = api.context.active();
        seen.resolve({
          span: api.trace.getSpan(active),
          baggage: api.propagation.getBaggage(active)?.getEntry("tenant")?.value,
        });
      },
    });
    const tracer = api.trace.getTracer("test");
    let sender;
    await tracer.startActiveSpan("produce", async (span) => {
      sender = span.spanContext();
      const ctx = api.propagation.setBaggage(api.context.active(), api.propagation.createBaggage({ tenant: { value: "acme corp" } }));
      await api.context.with(ctx, () => client.send(topic, "k", { hello: "otel" }));
      span.end();
    });
    const { span, baggage } = await seen.promise;
    assert.ok(span, "the handler runs inside a span");
    assert.equal(span.spanContext().traceId, sender.traceId, "same trace as the producer");
    assert.equal(baggage, "acme corp");
    await new Promise((r) => setTimeout(r, 50));
    const handled = exporter.getFinishedSpans().find((s) => s.name === "onMessage");
    assert.ok(handled, "an onMessage span was recorded");
    assert.equal(handled.parentSpanContext?.spanId ?? handled.parentSpanId, sender.spanId, "child of the producer's span");
  } finally {
    await client.shutdown();
  }
});

test("without an active span, send carries no trace and the handler starts a new trace", async () => {
  const topic = unique("otel-none");
  const client = new prosody.ProsodyClient(mockConfig({ subscribedTopics: topic }));
  try {
    const seen = deferred();
    await client.subscribe({ onMessage: () => seen.resolve(api.trace.getSpan(api.context.active())) });
    await client.send(topic, "k", {});
    const span = await seen.promise;
    assert.ok(span);
    assert.ok(api.isSpanContextValid(span.spanContext()));
  } finally {
    await client.shutdown();
  }
});

test("trace context reaches the handler when the batch text is not all ASCII", async () => {
  const topic = unique("otel-utf8");
  const client = new prosody.ProsodyClient(mockConfig({ subscribedTopics: topic }));
  try {
    assert.equal(require("../lib/telemetry").active(), true, "a context manager and a tracer provider are registered");
    const seen = deferred();
    await client.subscribe({
      onMessage: (_ctx, m) => seen.resolve({ span: api.trace.getSpan(api.context.active()), key: m.key, payload: m.payload }),
    });
    let sender;
    await api.trace.getTracer("test").startActiveSpan("produce", async (span) => {
      sender = span.spanContext();
      await client.send(topic, "ключ", { text: "naïve ☕" });
      span.end();
    });
    const { span, key, payload } = await seen.promise;
    assert.equal(key, "ключ");
    assert.deepEqual(payload, { text: "naïve ☕" });
    assert.equal(span.spanContext().traceId, sender.traceId);
  } finally {
    await client.shutdown();
  }
});

test("keyed-state operations run under the handler's trace context", async () => {
  const topic = unique("otel-state");
  const M = prosody.map("m");
  const client = new prosody.ProsodyClient(mockConfig({ subscribedTopics: topic, stateCollections: [M] }));
  try {
    const seen = deferred();
    await client.subscribe({
      async onMessage(ctx) {
        const before = api.trace.getSpan(api.context.active());
        const m = ctx.state(M);
        await m.set("a", 1);
        const afterSet = api.trace.getSpan(api.context.active());
        for await (const entry of m) void entry;
        const afterScan = api.trace.getSpan(api.context.active());
        seen.resolve({ before, afterSet, afterScan });
      },
    });
    await client.send(topic, "k", {});
    const { before, afterSet, afterScan } = await seen.promise;
    assert.ok(before, "the handler runs inside a span");
    assert.equal(afterSet, before);
    assert.equal(afterScan, before);
  } finally {
    await client.shutdown();
  }
});
