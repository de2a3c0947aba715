// The Quick Start of the Node docs, in mock mode: an in-memory Kafka cluster
// inside this process, so it needs no broker. It subscribes, sends one
// message whose handler schedules a follow-up timer, waits until the timer
// fired, and unsubscribes; the process then exits by itself.
//
//   node examples/node/quickstart.js
"use strict";

const { ProsodyClient } = require("@prosody-events/prosody");

async function main() {
  const client = new ProsodyClient({
    // Normally set through PROSODY_BOOTSTRAP_SERVERS; mock mode ignores it.
    bootstrapServers: "localhost:9092",
    // Must differ from groupId so that this client sees its own messages.
    sourceSystem: "my-application-source",
    groupId: "my-consumer-group",
    subscribedTopics: "my-topic",
    mock: true, // in-memory Kafka and timers: no broker, no Cassandra
    probePort: null, // no health-probe server for a short script
  });

  /** @type {() => void} */
  let fired = () => {};
  /** @type {Promise<void>} */
  const timerFired = new Promise((resolve) => {
    fired = () => resolve();
  });

  /** @type {import("@prosody-events/prosody").EventHandler<{ content: string, scheduleFollowup?: boolean }>} */
  const messageHandler = {
    onMessage: async (context, message, signal) => {
      console.log(`Received message: ${JSON.stringify(message)}`);

      // Schedule a timer for delayed processing
      if (message.payload.scheduleFollowup) {
        const followupTime = new Date(Date.now() + 1000); // a second from now
        await context.schedule(followupTime);
      }
    },

    onTimer: async (context, timer, signal) => {
      console.log(`Timer fired for key: ${timer.key} at ${timer.time}`);
      fired();
    },
  };

  await client.subscribe(messageHandler);

  await client.send("my-topic", "message-key", { content: "Hello, Kafka!", scheduleFollowup: true });

  await timerFired;
  await client.unsubscribe();
  console.log("quickstart: done");
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
