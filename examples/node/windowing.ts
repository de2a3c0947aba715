// The documentation's keyed-state examples, runnable in mock mode:
//
// - a counter for each key: every message increments its key's count;
// - windowing: the first activity of a user is notified at once; later
//   activity is collected in a message deque until the user's timer fires,
//   and then notified as one batch.
//
// The window lasts five minutes in the documentation; WINDOW_MS (default
// 2000) shortens it here so the program finishes quickly. It sends a burst
// of activity for a few users, checks the counts and the notifications,
// and exits. Run with `node --experimental-strip-types` (Node 22.6+) or
// through bindings/node/run-demo.sh.
import {
  Context,
  EventHandler,
  Message,
  ProsodyClient,
  Timer,
  messageDeque,
  value,
} from "@prosody-events/prosody";

interface Activity {
  action: string;
  n: number;
}

const WINDOW_MS = Number(process.env.WINDOW_MS ?? 2000);
const USERS = ["ada", "grace", "linus"];
const BURST = 4; // activities per user

const COUNT = value<number>("count", { ttlSeconds: 30 * 24 * 60 * 60 });
const WINDOW = value<boolean>("window", { ttlSeconds: 24 * 60 * 60 });
const PENDING = messageDeque<Activity>("pending", { capacity: 100, ttlSeconds: 24 * 60 * 60 });

const notifications = new Map<string, number[][]>(USERS.map((u) => [u, []]));
const counts = new Map<string, number>();
let finished: () => void = () => {};
const allNotified = new Promise<void>((resolve) => (finished = resolve));

// Outside the state transaction: a retried event may notify again, so a
// real notifier would use a stable idempotency key.
async function notify(user: string, batch: Message<Activity>[]): Promise<void> {
  notifications.get(user)!.push(batch.map((m) => m.payload.n));
  const total = (u: string) => notifications.get(u)!.reduce((n, b) => n + b.length, 0);
  if (USERS.every((u) => total(u) === BURST)) finished();
}

const handler = {
  async onMessage(context: Context, message: Message<Activity>) {
    const count = context.state(COUNT);
    const current = ((await count.get()) ?? 0) + 1;
    await count.set(current);
    counts.set(message.key, current);

    const window = context.state(WINDOW);
    const pending = context.state(PENDING);
    if (await window.get()) {
      await pending.push(message);
      return;
    }
    await notify(message.key, [message]);
    await window.set(true);
    await context.clearAndSchedule(new Date(Date.now() + WINDOW_MS));
  },

  async onTimer(context: Context, timer: Timer) {
    const pending = context.state(PENDING);
    const batch: Message<Activity>[] = [];
    for await (const message of pending.values()) batch.push(message);
    if (batch.length > 0) await notify(timer.key, batch);
    await pending.clear();
    await context.state(WINDOW).clear();
  },
} satisfies EventHandler<Activity>;

async function main(): Promise<void> {
  const client = new ProsodyClient({
    bootstrapServers: "localhost:9092",
    sourceSystem: "windowing-example-source",
    groupId: "windowing-example",
    subscribedTopics: "activity",
    mock: true,
    stateCollections: [COUNT, WINDOW, PENDING],
  });
  await client.subscribe(handler);
  for (let n = 0; n < BURST; n++) {
    for (const user of USERS) await client.send("activity", user, { action: "click", n });
  }
  const timeout = new Promise<never>((_, reject) =>
    setTimeout(() => reject(new Error("not every activity was notified in time")), WINDOW_MS + 30_000).unref(),
  );
  try {
    await Promise.race([allNotified, timeout]);
  } finally {
    await client.unsubscribe();
  }
  for (const user of USERS) {
    const [first, ...rest] = notifications.get(user)!;
    console.log(`${user}: counted ${counts.get(user)} messages; notified ${JSON.stringify(first)} at once, then ${JSON.stringify(rest)}`);
    const later = rest.flat().sort((a, b) => a - b);
    if (counts.get(user) !== BURST || JSON.stringify(first) !== "[0]" || JSON.stringify(later) !== "[1,2,3]") {
      throw new Error(`unexpected result for ${user}`);
    }
  }
  console.log("every user's burst became one immediate notification and one summary");
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
