"""Shared helpers: service addresses, unique names, a recording handler."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import prosody
from prosody import AdminClient, Context, EventHandler, Message, ProsodyClient, Timer

KAFKA = os.environ.get("PROSODY_TEST_KAFKA", "localhost:9094")
CASSANDRA = os.environ.get("PROSODY_TEST_CASSANDRA", "localhost:9042")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


async def eventually(cond: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    """Waits until cond() is true; fails the test after timeout seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


class Recorder(EventHandler):
    """Records every call; optional hooks run inside the handler."""

    def __init__(
        self,
        on_message: Callable[[Context, Message], Any] | None = None,
        on_timer: Callable[[Context, Timer], Any] | None = None,
    ) -> None:
        self.messages: list[Message] = []
        self.timers: list[Timer] = []
        self._on_message = on_message
        self._on_timer = on_timer

    async def on_message(self, context: Context, message: Message) -> None:
        self.messages.append(message)
        if self._on_message is not None:
            result = self._on_message(context, message)
            if asyncio.iscoroutine(result):
                await result

    async def on_timer(self, context: Context, timer: Timer) -> None:
        self.timers.append(timer)
        if self._on_timer is not None:
            result = self._on_timer(context, timer)
            if asyncio.iscoroutine(result):
                await result


def mock_client(**options: Any) -> ProsodyClient:
    base: dict[str, Any] = {"bootstrap_servers": "mock:9092", "mock": True, "probe_port": None}
    base.update(options)
    return ProsodyClient(**base)


def kafka_client(**options: Any) -> ProsodyClient:
    base: dict[str, Any] = {
        "bootstrap_servers": KAFKA,
        "probe_port": None,
        "cassandra_nodes": CASSANDRA,
        "telemetry_enabled": False,
    }
    base.update(options)
    return ProsodyClient(**base)


@pytest.fixture
async def mock_topic() -> str:
    """A fresh topic in the in-memory cluster (4 partitions)."""
    name = unique("py-topic")
    admin = AdminClient(bootstrap_servers="mock:9092", mock=True)
    await admin.create_topic(name, partition_count=4)
    return name


@pytest.fixture
async def kafka_topic() -> AsyncIterator[str]:
    """A fresh topic on the real broker, deleted afterwards."""
    name = unique("py-topic")
    admin = AdminClient(bootstrap_servers=KAFKA)
    try:
        await asyncio.wait_for(admin.create_topic(name, partition_count=4, replication_factor=1), 30)
    except Exception as e:  # no silent skip: say how to get the broker
        pytest.fail(f"Kafka at {KAFKA} is not usable ({e}); run `make services-up`")
    yield name
    await admin.delete_topic(name)


async def stop(client: ProsodyClient) -> None:
    """Unsubscribes if running and releases the client at once."""
    try:
        if await client.consumer_state() == "running":
            await asyncio.wait_for(client.unsubscribe(), 60)
    finally:
        client._release()


__all__ = ["prosody", "KAFKA", "CASSANDRA"]
