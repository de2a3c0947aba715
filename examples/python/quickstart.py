"""The documentation's Quick Start, runnable: mock mode, no Kafka or Cassandra needed.

One client subscribes a handler to ``my-topic`` and sends a few messages to
it; the handler prints each message and schedules a follow-up timer when the
payload asks for one. The program exits once every message and timer was
handled.

    python examples/python/quickstart.py
"""

from __future__ import annotations

import asyncio
import datetime

from prosody import Context, EventHandler, Message, ProsodyClient, Timer

MESSAGES = 5


class MyHandler(EventHandler):
    def __init__(self) -> None:
        self.messages = 0
        self.timers = 0
        self.done = asyncio.Event()

    async def on_message(self, context: Context, message: Message) -> None:
        print(f"Received message: {message}")
        payload = message.payload
        if isinstance(payload, dict) and payload.get("schedule_followup"):
            # Timers are kept in memory in mock mode (Cassandra otherwise).
            future_time = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=1)
            await context.schedule(future_time)
        self.messages += 1
        self._check()

    async def on_timer(self, context: Context, timer: Timer) -> None:
        print(f"Timer fired for key: {timer.key} at {timer.time}")
        self.timers += 1
        self._check()

    def _check(self) -> None:
        if self.messages >= MESSAGES and self.timers >= 1:
            self.done.set()


async def main() -> None:
    client = ProsodyClient(
        # Normally set with PROSODY_BOOTSTRAP_SERVERS; mock mode needs no broker.
        bootstrap_servers="localhost:9092",
        # To allow loopbacks, the source_system must differ from the group_id.
        source_system="my-application-source",
        group_id="my-application",
        subscribed_topics="my-topic",
        mock=True,
        probe_port=None,
    )

    handler = MyHandler()
    # Starts at once; awaiting it waits until the consumer is running.
    client.subscribe(handler)

    await client.send("my-topic", "message-key", {"content": "Hello, Kafka!", "schedule_followup": True})
    for i in range(1, MESSAGES):
        await client.send("my-topic", f"key-{i}", {"content": f"message {i}"})

    await asyncio.wait_for(handler.done.wait(), timeout=30)
    await client.unsubscribe()
    print(f"Handled {handler.messages} messages and {handler.timers} timer.")


if __name__ == "__main__":
    asyncio.run(main())
