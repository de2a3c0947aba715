"use strict";
// What users pass in arrives exactly, is rejected clearly, or is cancelled
// as promised (mock mode; the Kafka property test is in services.test.js).
const test = require("node:test");
const assert = require("node:assert/strict");
const util = require("node:util");
const prosody = require("..");
const { ProsodyClient, ConsumerState, AdminClient, PermanentError, TransientError } = prosody;
const { mockConfig, waitFor, deferred, unique } = require("./helpers");

prosody.setLogger({ error() {}, warn() {}, info() {}, debug() {}, trace() {} });

async function topicWith(partitions = 2) {
  const name = unique("node-boundary");
  const admin = new AdminClient("mock:9092", { mock: true });
  await admin.createTopic(name, partitions, 1);
  admin.close();
  return name;
}

test("a NUL byte in a key arrives byte-exact", async () => {
  const topic = await topicWith();
  const consumer = new ProsodyClient(mockConfig({ subscribedTopics: topic }));
  const producer = new ProsodyClient(mockConfig({ groupId: undefined, subscribedTopics: undefined }));
  const keys = [];
  await consumer.subscribe({ onMessage: (ctx, m) => void keys.push(m.key) });
  await producer.send(topic, "user-1\u0000admin", { n: 1 });
  await producer.send(topic, "user-1", { n: 2 });
  await waitFor(() => keys.length === 2, "both messages");
  assert.deepEqual(keys.sort(), ["user-1", "user-1\u0000admin"]);
  await Promise.all([consumer.shutdown(), producer.shutdown()]);
});

test("topic names Kafka refuses are refused, naming the topic", async () => {
  const producer = new ProsodyClient(mockConfig());
  for (const [topic, words] of [
    ["t\u0000other", '"\\x00" at byte 1'],
    ["a b", '" " at byte 1'],
    ["", "must not be empty"],
    ["x".repeat(250), "250 bytes long"],
  ]) {
    await assert.rejects(producer.send(topic, "k", { n: 1 }), (e) => {
      assert.ok(e instanceof RangeError, `${e.name}: ${e.message}`);
      assert.ok(e.message.startsWith("topic ") && e.message.includes(words), e.message);
      return true;
    });
  }
  for (const [what, args] of [
    ["key", ["t", null, {}]],
    ["key", ["t", 5, {}]],
    ["topic", [undefined, "k", {}]],
  ]) {
    await assert.rejects(producer.send(...args), (e) => e instanceof TypeError && e.message === `send: ${what} must be a string`);
  }
  await producer.shutdown();
});

test("a second subscribe is refused and leaves the first subscription running", async () => {
  const topic = await topicWith();
  const consumer = new ProsodyClient(mockConfig({ subscribedTopics: topic, shutdownTimeoutMs: 20000 }));
  const producer = new ProsodyClient(mockConfig({ groupId: undefined, subscribedTopics: undefined }));
  const seen = [];
  await consumer.subscribe({ onMessage: (ctx, m) => void seen.push(m.payload.n) });
  await producer.send(topic, "k", { n: 1 });
  await waitFor(() => seen.length === 1, "the first message");
  await assert.rejects(consumer.subscribe({ onMessage() {} }), (e) => {
    assert.ok(!(e instanceof TransientError) && !(e instanceof PermanentError), e.name);
    assert.equal(e.message, "the client is already subscribed: unsubscribe first");
    assert.equal(e.code, "PROSODY_ERR_STATE");
    return true;
  });
  await producer.send(topic, "k", { n: 2 });
  await waitFor(() => seen.length === 2, "a message after the refused subscribe");
  const started = Date.now();
  await consumer.unsubscribe();
  assert.ok(Date.now() - started < 10000, `unsubscribe took ${Date.now() - started} ms`);
  await assert.rejects(consumer.unsubscribe(), (e) => e.message === "the client is not subscribed" && e.code === "PROSODY_ERR_STATE");
  await Promise.all([consumer.shutdown(), producer.shutdown()]);
});

test("schedule refuses times the timer store cannot hold", async () => {
  const topic = await topicWith();
  const consumer = new ProsodyClient(mockConfig({ subscribedTopics: topic }));
  const producer = new ProsodyClient(mockConfig({ groupId: undefined, subscribedTopics: undefined }));
  const results = deferred();
  await consumer.subscribe({
    async onMessage(ctx) {
      const out = {};
      for (const [label, t] of [
        ["year 9999", new Date(Date.UTC(9999, 0, 1))],
        ["year 1960", new Date(Date.UTC(1960, 0, 1))],
        ["in an hour", new Date(Date.now() + 3600 * 1000)],
      ]) {
        try {
          await ctx.schedule(t);
          out[label] = "ok";
        } catch (e) {
          out[label] = `${e.name}: ${e.message}`;
        }
      }
      results.resolve(out);
    },
  });
  await producer.send(topic, "k", { n: 1 });
  const out = await results.promise;
  assert.match(out["year 9999"], /^PermanentError: timer time 9999-01-01T00:00:00Z is out of range: .*2106-02-07T06:28:15Z/);
  assert.match(out["year 1960"], /^PermanentError: timer time 1960-01-01T00:00:00Z is out of range/);
  assert.equal(out["in an hour"], "ok");
  await Promise.all([consumer.shutdown(), producer.shutdown()]);
});

test("a hung handler's signal aborts at its timeout and its key moves on", async () => {
  const topic = await topicWith();
  const consumer = new ProsodyClient(mockConfig({ subscribedTopics: topic, timeoutMs: 1000, mode: "BestEffort", shutdownTimeoutMs: 30000 }));
  const producer = new ProsodyClient(mockConfig({ groupId: undefined, subscribedTopics: undefined }));
  const seen = [];
  const aborted = deferred();
  await consumer.subscribe({
    onMessage(ctx, m, signal) {
      seen.push(m.payload.n);
      if (m.payload.n !== 1) return undefined;
      signal.addEventListener("abort", () => aborted.resolve(signal.reason.message));
      return new Promise(() => {}); // never settles, ignores the signal
    },
  });
  await producer.send(topic, "same-key", { n: 1 });
  await producer.send(topic, "same-key", { n: 2 });
  assert.equal(await aborted.promise, "message cancelled");
  await waitFor(() => seen.length === 2, "the key's next message", 15000);
  assert.deepEqual(seen, [1, 2]);
  const started = Date.now();
  await consumer.unsubscribe();
  assert.ok(Date.now() - started < 10000, `unsubscribe took ${Date.now() - started} ms`);
  await Promise.all([consumer.shutdown(), producer.shutdown()]);
});

test("util.inspect shows mode, group, topics, servers and state, never secrets", async () => {
  const client = new ProsodyClient(mockConfig({ groupId: "orders", subscribedTopics: ["a", "b"], cassandraPassword: "hunter2", cassandraUser: "svc" }));
  const text = util.inspect(client);
  for (const part of ["groupId: 'orders'", "subscribedTopics: [ 'a', 'b' ]", "bootstrapServers: 'mock:9092'", "consumerState: 'Configured'"]) {
    assert.ok(text.includes(part), text);
  }
  assert.ok(!text.includes("hunter2") && !text.includes("svc"), text);
  await client.shutdown();
  assert.ok(util.inspect(client).includes(`consumerState: '${ConsumerState.Shutdown}'`));
});

test("a bad mock value names mock alone", () => {
  assert.throws(
    () => new ProsodyClient({ bootstrapServers: "localhost:9094", groupId: "g", subscribedTopics: "t", mock: "yes" }),
    (e) => e.message.startsWith("mock: ") && !/cassandra/i.test(e.message),
  );
});
