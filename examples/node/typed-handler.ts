// A strictly typed handler: the payload type given to EventHandler<P> is
// the one Message<P> exposes, and send() checks payloads are JSON.
import {
  Context,
  EventHandler,
  Message,
  Mode,
  PermanentError,
  ProsodyClient,
  Timer,
  permanent,
} from "@prosody-events/prosody";

interface OrderPlaced {
  id: string;
  type: "order.placed";
  sku: string;
  quantity: number;
  note?: string;
}

class OrderHandler implements EventHandler<OrderPlaced> {
  seen = 0;

  @permanent(SyntaxError)
  async onMessage(context: Context, message: Message<OrderPlaced>, signal: AbortSignal): Promise<void> {
    if (message.payload.quantity <= 0) throw new PermanentError(`bad quantity for ${message.payload.sku}`);
    this.seen++;
    if (!signal.aborted) await context.clearAndSchedule(new Date(Date.now() + 60_000));
  }

  async onTimer(context: Context, timer: Timer): Promise<void> {
    const pending = await context.scheduled();
    console.log(`timer for ${timer.key} at ${timer.time.toISOString()}, ${pending.length} left`);
  }
}

export async function run(): Promise<void> {
  const client = new ProsodyClient({
    bootstrapServers: ["localhost:9092"],
    groupId: "orders",
    sourceSystem: "orders-producer",
    subscribedTopics: "orders",
    mode: Mode.BestEffort,
    mock: true,
    probePort: null,
  });
  await client.subscribe(new OrderHandler());
  const order: OrderPlaced = { id: "o-1", type: "order.placed", sku: "book", quantity: 1 };
  await client.send("orders", order.id, order);
  await client.unsubscribe();
}
