"use strict";
// Run by spans.test.js in a process of its own (the core sets up its span
// exporter once per process, from the environment of the first client):
// produce -> consume -> schedule -> timer fire with Node handlers, the
// core's spans exported to Jaeger over OTLP, the Node spans kept in memory
// and printed as JSON for the test to compare with Jaeger's.
const api = require("@opentelemetry/api");
const { AsyncLocalStorageContextManager } = require("@opentelemetry/context-async-hooks");
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require("@opentelemetry/sdk-trace-base");

const exporter = new InMemorySpanExporter();
api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
api.trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));

const prosody = require("..");
const { KAFKA, realConfig, deferred } = require("./helpers");

prosody.setLogger({ error() {}, warn() {}, info() {}, debug() {}, trace() {} });

async function main(topic) {
  const admin = new prosody.AdminClient(KAFKA);
  await admin.createTopic(topic, 1, 1);
  const consumer = new prosody.ProsodyClient(realConfig({ subscribedTopics: topic, cassandraKeyspace: "prosody_node_spans" }));
  const sender = new prosody.ProsodyClient(realConfig({}));
  const fired = deferred();
  await consumer.subscribe({
    async onMessage(ctx) {
      await ctx.schedule(new Date(Date.now() + 1000));
    },
    async onTimer() {
      fired.resolve();
    },
  });
  await api.trace.getTracer("app").startActiveSpan("request", async (span) => {
    await sender.send(topic, "k1", { id: "e1" });
    span.end();
  });
  await fired.promise;
  await consumer.shutdown();
  await sender.shutdown();
  await prosody.flushTelemetry();
  await admin.deleteTopic(topic).catch(() => {});
  admin.close();
  const out = exporter.getFinishedSpans().map((s) => ({
    name: s.name,
    traceId: s.spanContext().traceId,
    spanId: s.spanContext().spanId,
    parentSpanId: s.parentSpanContext?.spanId ?? s.parentSpanId ?? "",
  }));
  process.stdout.write(JSON.stringify(out) + "\n");
}

main(process.argv[2]).catch((e) => {
  console.error(e);
  process.exit(1);
});
