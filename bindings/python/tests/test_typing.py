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
    from prosody import (AdminClient, Context, EventHandler, Message, ProsodyClient, Timer,
                         ValueDefinition, permanent, value)

    class OrderEvent(TypedDict):
        order_id: str
        amount: int

    COUNTER: ValueDefinition[int] = value("counter", ttl=datetime.timedelta(days=30))

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
    from prosody import Context, EventHandler, Message, ProsodyClient, Timer
    from typing import TypedDict

    class OrderEvent(TypedDict):
        amount: int

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
