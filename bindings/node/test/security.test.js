"use strict";
// Against the test broker's secure listeners (SASL_SSL with SCRAM, mutual
// TLS), which scripts/services describes in listeners.json
// (PROSODY_TEST_KAFKA_TLS, or the default run directory). A broker started
// without them skips these tests, saying how to get them.
const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const util = require("node:util");
const prosody = require("..");
const { ProsodyClient, AdminClient } = prosody;
const { realConfig, unique, waitFor } = require("./helpers");

const logged = [];
prosody.setLogger(Object.fromEntries(["error", "warn", "info", "debug", "trace"].map((l) => [l, (...a) => logged.push(util.format(...a))])));

const file = process.env.PROSODY_TEST_KAFKA_TLS ||
  path.join(process.env.PROSODY_SERVICES_RUN || path.join(os.tmpdir(), "prosody-services"), "kafka", "tls", "listeners.json");
const listeners = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, "utf8")) : null;
const skip = listeners ? false : `the Kafka SASL_SSL/SSL listeners are not configured (no ${file}): restart Kafka with \`scripts/services stop kafka && scripts/services start kafka\``;

// Timers over TLS with a login (the cassandra-auth node), else over TLS,
// when the services describe them.
const runDir = process.env.PROSODY_SERVICES_RUN || path.join(os.tmpdir(), "prosody-services");
const cassandraTLS = () => {
  for (const name of ["cassandra-auth", "cassandra"]) {
    const f = path.join(runDir, name, "tls", "tls.json");
    if (!fs.existsSync(f)) continue;
    const c = JSON.parse(fs.readFileSync(f, "utf8"));
    const opts = { cassandraNodes: c.cql, cassandraSslEnabled: true, cassandraSslCaLocation: c.ca };
    if (c.user) Object.assign(opts, { cassandraUser: c.user, cassandraPassword: c.password });
    return opts;
  }
  return {};
};

const scram = (password) => ({
  bootstrapServers: listeners.sasl_ssl, securityProtocol: "sasl_ssl", saslMechanism: "SCRAM-SHA-512",
  saslUsername: listeners.sasl_username, saslPassword: password, sslCaLocation: listeners.ca,
});
const mtls = () => ({
  bootstrapServers: listeners.ssl, securityProtocol: "ssl", sslCaLocation: listeners.ca,
  sslCertificateLocation: listeners.client_certificate, sslKeyLocation: listeners.client_key,
});

for (const [how, security] of [["SCRAM-SHA-512", () => scram(listeners.sasl_password)], ["mutual TLS", mtls]]) {
  test(`secure Kafka (${how}): admin, send and consume in a group`, { skip, timeout: 120000 }, async () => {
    const { bootstrapServers, ...options } = security();
    const admin = new AdminClient(bootstrapServers, options);
    const topic = unique("node-secure");
    await admin.createTopic(topic, 2, 1);
    const consumer = new ProsodyClient(realConfig({ ...security(), ...cassandraTLS(), subscribedTopics: topic }));
    const producer = new ProsodyClient(realConfig({ ...security(), groupId: undefined, sendTimeoutMs: 30000 }));
    try {
      const seen = new Set();
      const fired = new Set();
      await consumer.subscribe({
        async onMessage(ctx, m) {
          seen.add(m.key);
          await ctx.schedule(new Date(Date.now() + 1000));
        },
        async onTimer(_ctx, timer) { fired.add(timer.key); },
      });
      for (let i = 0; i < 10; i++) await producer.send(topic, `k${i}`, { i });
      await waitFor(() => seen.size === 10, `10 messages over ${how}`, 60000);
      await waitFor(() => fired.size === 10, "10 timers", 60000);
      const shown = util.inspect(consumer) + util.inspect(producer) + logged.join("\n");
      assert.ok(!shown.includes(listeners.sasl_password), "the password is shown");
    } finally {
      await consumer.shutdown();
      await producer.shutdown();
      await admin.deleteTopic(topic).catch(() => {});
      admin.close();
    }
  });
}

test("secure Kafka: a wrong password fails fast, naming the options, not showing it", { skip, timeout: 60000 }, async () => {
  const wrong = unique("node-Wrong-Pa55word");
  const producer = new ProsodyClient(realConfig({ ...scram(wrong), groupId: undefined, sendTimeoutMs: 60000 }));
  try {
    const t0 = Date.now();
    await assert.rejects(producer.send(unique("t"), "k", {}), (e) => {
      assert.match(e.message, /sasl_username \/ sasl_password: the broker refused the SCRAM-SHA-512 credentials/);
      assert.ok(!e.message.includes(wrong));
      return true;
    });
    assert.ok(Date.now() - t0 < 20000, "failed within 20 s");
  } finally {
    await producer.shutdown();
  }
  assert.throws(() => new ProsodyClient(realConfig({ saslPassword: wrong })), (e) =>
    e.name === "ConfigurationError" && /sasl_password\)?: needs security_protocol/.test(e.message) && !e.message.includes(wrong));
  assert.throws(() => new ProsodyClient(realConfig({ saslPassword: 12345 })), (e) =>
    e.message === "saslPassword: must be a string (the value is not shown)");
});
