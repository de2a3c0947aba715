"""The shipped type information works for users: generics check, mistakes are caught."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

GOOD = textwrap.dedent(
    """
    import datetime
    from typing import TypedDict
    from typing_extensions import assert_type
    from prosody import (AdminClient, Context, DequeDefinition, DequeState, Direction, EventHandler,
                         MapDefinition, MapState, Message, MessageDequeDefinition, MessageMapDefinition,
                         MessageValueDefinition, ProsodyClient, Timer, ValueDefinition, ValueState, deque,
                         map, message_deque, message_map, message_value, permanent, value)

    class OrderEvent(TypedDict):
        order_id: str
        amount: int

    COUNTER: ValueDefinition[int] = value("counter", ttl=datetime.timedelta(days=30))
    SEEN: MapDefinition[list[str]] = map("seen", keyset_limit=16)
    RECENT: DequeDefinition[float] = deque("recent", capacity=10)
    LAST: MessageValueDefinition[OrderEvent] = message_value("last")
    BY_ID: MessageMapDefinition[OrderEvent] = message_map("by-id")
    PENDING: MessageDequeDefinition[OrderEvent] = message_deque("pending", capacity=100)

    async def use_state(context: Context, message: Message[OrderEvent]) -> None:
        count = context.state(COUNTER)
        assert_type(count, ValueState[int])
        await count.set((await count.get() or 0) + 1)
        await count.commit()
        seen = context.state(SEEN)
        assert_type(seen, MapState[list[str]])
        tags: list[str] | None = await seen.get("a")
        tags_or_empty: list[str] = await seen.get("a", [])
        many: list[list[str] | None] = await seen.get_many(["a", "b"])
        present: bool = await seen.contains("a")
        async for key, value_ in seen.items(Direction.BACKWARD):
            assert_type(key, str)
            assert_type(value_, list[str])
        async for only_key in seen:
            assert_type(only_key, str)
        everything = [v async for v in seen.values()]
        assert_type(everything, list[list[str]])
        recent = context.state(RECENT)
        assert_type(recent, DequeState[float])
        await recent.append(1.5)
        latest: float | None = await recent.pop()
        size: int = await recent.size()
        at: float | None = await recent.get(0)
        last = context.state(LAST)
        assert_type(last, ValueState[Message[OrderEvent]])
        await last.set(message)
        previous = await last.get()
        if previous is not None:
            amount: int = previous.payload["amount"]
        assert_type(context.state(BY_ID), MapState[Message[OrderEvent]])
        pending = context.state(PENDING)
        assert_type(pending, DequeState[Message[OrderEvent]])
        await pending.append(message)
        batch = [m async for m in pending.values()]
        assert_type(batch, list[Message[OrderEvent]])

    class OrderHandler(EventHandler[OrderEvent]):
        @permanent(TypeError)
        async def on_message(self, context: Context, message: Message[OrderEvent]) -> None:
            total: int = message.payload["amount"]
            await context.schedule(message.timestamp + datetime.timedelta(seconds=total))
            times: list[datetime.datetime] = await context.scheduled()
            if context.should_cancel():
                await context.on_cancel()

        async def on_timer(self, context: Context, timer: Timer) -> None:
            key: str = timer.key

    async def main() -> None:
        client = ProsodyClient(group_id="g", subscribed_topics=["t"], mock=True,
                               send_timeout=1.5, stall_threshold=datetime.timedelta(minutes=1),
                               probe_port=None, mode="low-latency", state_collections=[COUNTER])
        client.subscribe(OrderHandler())
        await client.send("t", "k", {"order_id": "1", "amount": 3})
        state: str = await client.consumer_state()
        await client.unsubscribe()
        await AdminClient(bootstrap_servers="x:9092").create_topic("t", partition_count=2)
    """
)

BAD = textwrap.dedent(
    """
    from prosody import (Context, EventHandler, Message, MessageDequeDefinition, ProsodyClient, Timer,
                         ValueDefinition, message_deque, value)
    from typing import TypedDict

    class OrderEvent(TypedDict):
        amount: int

    COUNTER: ValueDefinition[int] = value("counter")
    PENDING: MessageDequeDefinition[OrderEvent] = message_deque("pending")

    async def misuse_state(context: Context, message: Message[OrderEvent]) -> None:
        count = context.state(COUNTER)
        await count.set("one")  # not an int
        label: str | None = await count.get()  # an int, not a str
        await context.state(PENDING).append(message.payload)  # a payload, not a Message

    class OrderHandler(EventHandler[OrderEvent]):
        async def on_message(self, context: Context, message: Message[OrderEvent]) -> None:
            name: str = message.payload["amount"]  # wrong type
            context.schedule(3)  # not a datetime

        async def on_timer(self, context: Context, timer: Timer) -> None:
            pass

    ProsodyClient(mode="fastest", max_concurency=3)
    """
)


def mypy(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "example.py"
    path.write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(path)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )


def test_typed_example_passes_mypy_strict(tmp_path: Path) -> None:
    out = mypy(tmp_path, GOOD)
    assert out.returncode == 0, out.stdout


def test_type_mistakes_are_reported(tmp_path: Path) -> None:
    out = mypy(tmp_path, BAD)
    assert out.returncode == 1
    assert 'Incompatible types in assignment (expression has type "int", variable has type "str")' in out.stdout
    assert 'Argument 1 to "schedule" of "Context" has incompatible type "int"' in out.stdout
    assert 'Argument "mode" to "ProsodyClient" has incompatible type' in out.stdout
    assert 'Unexpected keyword argument "max_concurency"' in out.stdout
    # Keyed state: the handle's item type comes from the definition.
    assert 'Argument 1 to "set" of "ValueState" has incompatible type "str"; expected "int"' in out.stdout
    assert ('Incompatible types in assignment (expression has type "int | None", variable has type "str | None")'
            in out.stdout)
    assert ('Argument 1 to "append" of "DequeState" has incompatible type "OrderEvent"; '
            'expected "Message[OrderEvent]"') in out.stdout
