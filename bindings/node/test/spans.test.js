"use strict";
// The core's spans, exported to the test Jaeger (PROSODY_TEST_JAEGER_OTLP,
// PROSODY_TEST_JAEGER_QUERY), with Node handlers nested under them:
// produce -> consume -> schedule -> timer fire, in both span relations.
const test = require("node:test");
const assert = require("node:assert/strict");
const { execFile } = require("node:child_process");
const path = require("node:path");
const { unique } = require("./helpers");

const OTLP = process.env.PROSODY_TEST_JAEGER_OTLP ?? "http://localhost:4318";
const QUERY = process.env.PROSODY_TEST_JAEGER_QUERY ?? "http://localhost:16686";

async function jaegerSpans(service) {
  const resp = await fetch(`${QUERY}/api/traces?limit=100&service=${encodeURIComponent(service)}`);
  const body = await resp.json();
  const out = {};
  for (const t of body.data ?? []) for (const s of t.spans) out[s.operationName] = s;
  return out;
}

const refers = (span, other, type) =>
  (span.references ?? []).some((r) => r.refType === type && r.spanID === other.spanID && r.traceID === other.traceID);

for (const relation of ["child", "follows_from"]) {
  test(`the core's spans in Jaeger, Node handlers under them (${relation})`, { timeout: 180000 }, async () => {
    const service = unique("prosody-node");
    const env = { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: OTLP, OTEL_SERVICE_NAME: service,
      PROSODY_MESSAGE_SPANS: relation, PROSODY_TIMER_SPANS: relation };
    const stdout = await new Promise((resolve, reject) => {
      execFile(process.execPath, [path.join(__dirname, "spans-child.js"), unique("node-spans")], { env, timeout: 150000 },
        (err, out, errOut) => (err ? reject(new Error(`${err.message}\n${errOut}`)) : resolve(out)));
    });
    const node = Object.fromEntries(JSON.parse(stdout.trim().split("\n").pop()).map((s) => [s.name, s]));
    assert.ok(node.request && node.onMessage && node.onTimer, JSON.stringify(node));
    let core = {};
    const deadline = Date.now() + 60000;
    while (!(core.send && core.receive && core.trigger)) {
      assert.ok(Date.now() < deadline, `the core's spans are not in Jaeger: ${Object.keys(core)}`);
      await new Promise((r) => setTimeout(r, 200));
      core = await jaegerSpans(service);
    }
    const { send, receive, trigger } = core;
    assert.equal(send.references[0].spanID, node.request.spanId);
    if (relation === "child") {
      assert.ok(refers(receive, send, "CHILD_OF") && refers(trigger, receive, "CHILD_OF"));
    } else {
      assert.ok(receive.traceID !== send.traceID && refers(receive, send, "FOLLOWS_FROM"));
      assert.ok(trigger.traceID !== receive.traceID && refers(trigger, receive, "FOLLOWS_FROM"));
    }
    assert.equal(node.onMessage.parentSpanId, receive.spanID);
    assert.equal(node.onMessage.traceId, receive.traceID);
    assert.equal(node.onTimer.parentSpanId, trigger.spanID);
  });
}
