// Compile-time checks of index.d.ts: correct use compiles, and the line
// after each ts-expect-error directive must fail to compile (tsc reports an
// unused directive otherwise), so misuse is proven to be refused.
import {
  AdminClient,
  ConsumerState,
  Context,
  DequeState,
  EventHandler,
  JsonCompatible,
  JsonValue,
  MapState,
  Message,
  Mode,
  PermanentError,
  PermanentStateError,
  ProsodyClient,
  PublishedDeque,
  PublishedMap,
  PublishedValue,
  ScanDirection,
  TransientError,
  TransientStateError,
  ValueDefinition,
  ValueState,
  deque,
  isStateError,
  map,
  messageDeque,
  messageMap,
  messageValue,
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

interface Activity {
  user: string;
  action: string;
}

const COUNT = value<number>("count", { ttlSeconds: 30 * 24 * 60 * 60 });
const ORDER = value("current-order", { published: true, readCache: { ttlMs: 1000 } });
const TOTALS = map<{ total: number }>("totals", { keysetLimit: 64, readCache: false });
const RECENT = deque<string>("recent", { capacity: 10 });
const LAST = messageValue<Activity>("last");
const BY_ID = messageMap<Activity>("by-id");
const PENDING = messageDeque<Activity>("pending", { capacity: 100, ttlSeconds: 86400 });

async function state(ctx: Context): Promise<void> {
  void new ProsodyClient({
    subsystem: "checkout",
    stateCollections: [COUNT, ORDER, TOTALS, RECENT, LAST, BY_ID, PENDING],
    stateOwnedCacheSize: "64 MiB",
    stateReadCacheSize: "1 MiB",
    stateReadCache: { ttlMs: 5000 },
  });

  // The definition's item type becomes the handle's.
  const count: ValueState<number> = ctx.state(COUNT);
  await count.set(((await count.get()) ?? 0) + 1);
  await count.commit();
  await count.rollback();
  const order: ValueState<JsonValue> = ctx.state(ORDER);
  await order.set({ sku: "book" });

  const totals: MapState<{ total: number }> = ctx.state(TOTALS);
  const t: { total: number } | null = await totals.get("a");
  const many: ({ total: number } | null)[] = await totals.getMany(["a", "b"]);
  const has: boolean = await totals.has("a");
  await totals.set("a", { total: 1 });
  await totals.delete("a");
  const dir: ScanDirection = "backward";
  for await (const [k, v] of totals.entries(dir)) void k.length, v.total;
  for await (const [k, v] of totals) void k.length, v.total;
  for await (const k of totals.keys()) void k.toUpperCase();
  for await (const v of totals.values("forward")) void v.total;
  void t, many, has;

  const recent: DequeState<string> = ctx.state(RECENT);
  await recent.push("x");
  await recent.unshift("y");
  const popped: string | null = await recent.pop();
  const shifted: string | null = await recent.shift();
  const at: string | null = await recent.at(-1);
  const len: number = await recent.length();
  const empty: boolean = await recent.isEmpty();
  for await (const s of recent) void s.toUpperCase();
  void popped, shifted, at, len, empty;

  // Message definitions vend handles over Message<P>.
  const last: ValueState<Message<Activity>> = ctx.state(LAST);
  const m = await last.get();
  if (m !== null) void m.payload.action.length, m.offset;
  const byId: MapState<Message<Activity>> = ctx.state(BY_ID);
  for await (const [, msg] of byId) void msg.payload.user;
  const pending: DequeState<Message<Activity>> = ctx.state(PENDING);
  const batch: Message<Activity>[] = [];
  for await (const message of pending.values()) batch.push(message);
  await pending.push(batch[0]);
  await pending.clear();

  // Unparameterized definitions hold JsonValue.
  const plain: MapState<JsonValue> = ctx.state(map("plain"));
  void plain;
  const def: ValueDefinition = value("json");
  void def;

  // Published readers: the user key first.
  const orderReader: PublishedValue<JsonValue> = await client.state("checkout", ORDER);
  void (await orderReader.get("customer-123"));
  const totalsReader: PublishedMap<{ total: number }> = await client.state("checkout", TOTALS);
  const rt: { total: number } | null = await totalsReader.get("customer-123", "a");
  void rt, (await totalsReader.getMany("c", ["a"])), (await totalsReader.has("c", "a"));
  for await (const [k, v] of totalsReader.entries("c", "backward")) void k, v.total;
  for await (const k of totalsReader.keys("c")) void k.length;
  for await (const v of totalsReader.values("c")) void v.total;
  const recentReader: PublishedDeque<string> = await client.state("checkout", RECENT);
  const first: string | null = await recentReader.at("c", 0);
  void first, (await recentReader.length("c")), (await recentReader.isEmpty("c"));
  for await (const s of recentReader.values("c")) void s.length;

  const e: unknown = null;
  if (e instanceof TransientStateError || e instanceof PermanentStateError) void e.isPermanent;
}

async function stateMisuse(ctx: Context): Promise<void> {
  // @ts-expect-error the item type flows from the definition: a number, not a string
  await ctx.state(COUNT).set("one");
  // @ts-expect-error get() resolves to number | null
  const n: number = await ctx.state(COUNT).get();
  void n;
  // @ts-expect-error a value definition vends a ValueState, not a MapState
  const wrong: MapState<number> = ctx.state(COUNT);
  void wrong;
  // @ts-expect-error a map's values have the definition's type
  await ctx.state(TOTALS).set("a", { total: "many" });
  // @ts-expect-error map keys are strings
  await ctx.state(TOTALS).get(1);
  // @ts-expect-error a deque of strings takes strings
  await ctx.state(RECENT).push(3);
  // @ts-expect-error message collections store Message objects
  await ctx.state(PENDING).push({ user: "u", action: "a" });
  // @ts-expect-error a message handle yields Message<P>, not P
  const p: Activity | null = await ctx.state(LAST).get();
  void p;
  // @ts-expect-error only definitions from the factories are accepted
  ctx.state({ name: "count", kind: "value", payload: "json" });
  // @ts-expect-error a direction is "forward" or "backward"
  ctx.state(TOTALS).entries("sideways");
  // @ts-expect-error published readers take the user key first
  await (await client.state("checkout", ORDER)).get();
  // @ts-expect-error message definitions cannot be read as published state
  await client.state("checkout", PENDING);
  // @ts-expect-error the subsystem comes first
  await client.state(ORDER);
  // @ts-expect-error message definitions carry no publication options
  messageValue("m", { published: true });
  // @ts-expect-error handles are made by context.state()
  void new ValueState();
  // @ts-expect-error stateReadCache is an object
  void new ProsodyClient({ stateReadCache: 5000 });
  // @ts-expect-error cache sizes are size strings
  void new ProsodyClient({ stateOwnedCacheSize: 64 });
}

void ok, misuse, state, stateMisuse;
