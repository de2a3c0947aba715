"use strict";
// Shared helpers of the Node test suite.
const crypto = require("node:crypto");

const KAFKA = process.env.PROSODY_TEST_KAFKA || "localhost:9094";
const CASSANDRA = process.env.PROSODY_TEST_CASSANDRA || "localhost:9042";

/** A name no other test (or earlier run) uses. */
function unique(prefix) {
  return `${prefix}-${Date.now().toString(36)}-${crypto.randomBytes(4).toString("hex")}`;
}

/** Resolves when predicate() is true; rejects after `ms` with `what`. */
async function waitFor(predicate, what, ms = 20000) {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function deferred() {
  let resolve, reject;
  const promise = new Promise((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

/** Options of a mock-mode client with its own topic and group. */
function mockConfig(extra = {}) {
  const topic = extra.subscribedTopics ?? unique("topic");
  return {
    bootstrapServers: "mock:9092",
    mock: true,
    groupId: unique("group"),
    sourceSystem: unique("source"),
    subscribedTopics: topic,
    probePort: null,
    ...extra,
  };
}

/** Options of a client on the real Kafka (and Cassandra for timers). */
function realConfig(extra = {}) {
  return {
    bootstrapServers: KAFKA,
    cassandraNodes: CASSANDRA,
    groupId: unique("group"),
    sourceSystem: unique("source"),
    probePort: null,
    telemetryEnabled: false,
    ...extra,
  };
}

module.exports = { KAFKA, CASSANDRA, unique, waitFor, deferred, mockConfig, realConfig };
