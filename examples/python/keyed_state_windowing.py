"""The documentation's keyed-state examples, runnable in mock mode.

* A counter for each key: every message increments its key's count.
* Windowing: the first activity of a user is notified at once; later
  activity is collected in a message deque until the user's timer fires,
  and then notified as one batch.

The window lasts five minutes in the documentation; WINDOW_SECONDS (default
2) shortens it here so the program finishes quickly. It sends a burst of
activity for a few users, checks the counts and the notifications, and
exits.

    python examples/python/keyed_state_windowing.py
"""

from __future__ import annotations

import asyncio
import os
from datetime import datetime, timedelta, timezone
from typing import TypedDict

from prosody import (
    Context,
    EventHandler,
    Message,
    MessageDequeDefinition,
    ProsodyClient,
    Timer,
    ValueDefinition,
    message_deque,
    value,
)

WINDOW = timedelta(seconds=float(os.environ.get("WINDOW_SECONDS", "2")))
USERS = ["ada", "grace", "linus"]
BURST = 4  # activities per user


class Activity(TypedDict):
    action: str
    n: int


COUNTER: ValueDefinition[int] = value("counter", ttl=timedelta(days=30))
OPEN: ValueDefinition[bool] = value("window", ttl=timedelta(days=1))
PENDING: MessageDequeDefinition[Activity] = message_deque("pending", capacity=100, ttl=timedelta(days=1))

notifications: dict[str, list[list[int]]] = {user: [] for user in USERS}
counts: dict[str, int] = {}
done = asyncio.Event()


async def notify(user: str, batch: list[Message[Activity]]) -> None:
    # Outside the state transaction: a retried event may notify again, so a
    # real notifier would use a stable idempotency key.
    notifications[user].append([m.payload["n"] for m in batch])
    if all(sum(len(b) for b in notifications[u]) == BURST for u in USERS):
        done.set()


class BatchHandler(EventHandler[Activity]):
    async def on_message(self, context: Context, message: Message[Activity]) -> None:
        count = context.state(COUNTER)
        current = (await count.get() or 0) + 1
        await count.set(current)
        counts[message.key] = current

        window = context.state(OPEN)
        pending = context.state(PENDING)
        if await window.get():
            await pending.append(message)
            return
        await notify(message.key, [message])
        await window.set(True)
        await context.clear_and_schedule(datetime.now(timezone.utc) + WINDOW)

    async def on_timer(self, context: Context, timer: Timer) -> None:
        pending = context.state(PENDING)
        batch = [message async for message in pending.values()]
        if batch:
            await notify(timer.key, batch)
        await pending.clear()
        await context.state(OPEN).clear()


async def main() -> None:
    client = ProsodyClient(
        bootstrap_servers="localhost:9092",
        source_system="windowing-example-source",
        group_id="windowing-example",
        subscribed_topics="activity",
        mock=True,
        probe_port=None,
        state_collections=[COUNTER, OPEN, PENDING],
    )
    await client.subscribe(BatchHandler())
    for n in range(BURST):
        for user in USERS:
            await client.send("activity", user, {"action": "click", "n": n})
    try:
        await asyncio.wait_for(done.wait(), timeout=WINDOW.total_seconds() + 30)
    finally:
        await client.unsubscribe()

    for user in USERS:
        first, *rest = notifications[user]
        print(f"{user}: counted {counts[user]} messages; notified {first} at once, then {rest}")
        assert counts[user] == BURST, counts
        assert first == [0], notifications
        assert sorted(n for batch in rest for n in batch) == list(range(1, BURST)), notifications
    print("every user's burst became one immediate notification and one summary")


if __name__ == "__main__":
    asyncio.run(main())
