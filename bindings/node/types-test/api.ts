// Compile-time checks of index.d.ts: correct use compiles, and the line
// after each ts-expect-error directive must fail to compile (tsc reports an
// unused directive otherwise), so misuse is proven to be refused.
import {
  AdminClient,
  ConsumerState,
  Context,
  EventHandler,
  JsonCompatible,
  JsonValue,
  Message,
  Mode,
  PermanentError,
  ProsodyClient,
  TransientError,
  isStateError,
  setLogger,
  value,
} from "@prosody-events/prosody";

interface Payment {
  id: string;
  amount: number;
  tags: string[];
  meta?: { source: string };
}

declare const client: ProsodyClient;
declare const payment: Payment;

async function ok(): Promise<void> {
  await client.send("t", "k", payment);
  await client.send("t", "k", { a: 1, b: [true, null, "x"] });
  await client.send("t", "k", "plain string", new AbortController().signal);

  const typed: EventHandler<Payment> = {
    async onMessage(_ctx, message) {
      const amount: number = message.payload.amount;
      const offset: bigint = message.offset;
      const when: Date = message.timestamp;
      void amount, offset, when;
    },
  };
  await client.subscribe(typed);
  await client.subscribe<Payment>({ onMessage: (_c, m) => void m.payload.tags.length });

  // Unparameterized handlers see JsonValue.
  await client.subscribe({
    onMessage: async (ctx: Context, m: Message, signal: AbortSignal) => {
      const p: JsonValue = m.payload;
      void p, signal.aborted, ctx.shouldCancel;
      await ctx.schedule(new Date());
      const times: Date[] = await ctx.scheduled();
      void times;
    },
    onTimer: async (_ctx, timer) => void timer.time.getTime(),
  });

  const state: ConsumerState = client.consumerState;
  if (state === ConsumerState.Running && !client.isStalled) void client.assignedPartitionCount;
  const mode: Mode = Mode.LowLatency;
  void new ProsodyClient({ mode, probePort: null, bootstrapServers: ["a:1", "b:2"], timeoutMs: 1000 });
  void new AdminClient("localhost:9094").createTopic("t", 3, 1);
  void value<number>("count", { ttlSeconds: 60 });
  setLogger({ error() {}, warn() {}, info() {}, debug() {}, trace() {} });
  const e: unknown = new PermanentError("x");
  if (isStateError(e)) void e.isPermanent;
  const perm: true = new PermanentError("x").isPermanent;
  const trans: false = new TransientError("x").isPermanent;
  void perm, trans;
  const j: JsonCompatible<Payment> = payment;
  void j;
}

async function misuse(): Promise<void> {
  // @ts-expect-error a function is not JSON
  await client.send("t", "k", { run: () => 1 });
  // @ts-expect-error a Date is not JSON (it would become a string)
  await client.send("t", "k", { at: new Date() });
  // @ts-expect-error bigint cannot be serialised
  await client.send("t", "k", { n: 1n });
  // @ts-expect-error undefined is not a payload
  await client.send("t", "k", undefined);
  // @ts-expect-error nested symbols are refused too
  await client.send("t", "k", { deep: { s: Symbol("x") } });
  // @ts-expect-error the key must be a string
  await client.send("t", 42, { a: 1 });

  await client.subscribe<Payment>({
    onMessage: async (_ctx, m) => {
      // @ts-expect-error amount is a number
      const s: string = m.payload.amount;
      void s;
    },
  });
  // @ts-expect-error a handler for another payload type does not fit
  const wrong: EventHandler<Payment> = { onMessage: async (_c: Context, _m: Message<{ other: boolean }>) => {} };
  void wrong;
  // @ts-expect-error offsets are bigint
  const n: number = ({} as Message).offset;
  void n;

  // @ts-expect-error durations are numbers of milliseconds
  void new ProsodyClient({ sendTimeoutMs: "1s" });
  // @ts-expect-error mode takes a Mode value
  void new ProsodyClient({ mode: "fast" });
  // @ts-expect-error consumerState is a property, not a method
  void client.consumerState();
  // @ts-expect-error schedule takes a Date
  await ({} as Context).schedule("tomorrow");
  // @ts-expect-error partition counts are numbers
  await new AdminClient("localhost:9094").createTopic("t", "3", 1);
  // @ts-expect-error a logger needs every level
  setLogger({ info() {} });
}

void ok, misuse;
