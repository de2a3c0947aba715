"""Against the real services: Kafka (PROSODY_TEST_KAFKA) and Cassandra (PROSODY_TEST_CASSANDRA)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from prosody import AdminClient, Context, Message

from conftest import KAFKA, Recorder, eventually, kafka_client, stop, unique


async def test_admin_create_and_delete_topic() -> None:
    name = unique("py-admin")
    admin = AdminClient(bootstrap_servers=KAFKA)
    await asyncio.wait_for(admin.create_topic(name, partition_count=3, replication_factor=1,
                                              cleanup_policy="delete", retention=timedelta(days=7)), 30)
    await admin.create_topic(name, partition_count=3)  # an existing topic is not an error
    consumer = kafka_client(group_id=unique("g"), subscribed_topics=name)
    await asyncio.wait_for(consumer.subscribe(Recorder()), 60)
    await stop(consumer)
    await asyncio.wait_for(admin.delete_topic(name), 30)
    consumer = kafka_client(group_id=unique("g"), subscribed_topics=name)
    with pytest.raises(RuntimeError, match=name):
        await asyncio.wait_for(consumer.subscribe(Recorder()), 60)
    consumer._release()


def test_admin_needs_bootstrap_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="bootstrap_servers"):
        AdminClient(bootstrap_servers=[])


async def test_real_kafka_round_trip_in_key_order(kafka_topic: str) -> None:
    seen: dict[str, list[int]] = {}

    async def record(ctx: Context, m: Message) -> None:
        assert isinstance(m.payload, dict)
        seen.setdefault(m.key, []).append(int(m.payload["i"]))  # type: ignore[arg-type]

    consumer = kafka_client(group_id=unique("g"), subscribed_topics=kafka_topic)
    producer = kafka_client(source_system=unique("src"))
    await asyncio.wait_for(consumer.subscribe(Recorder(on_message=record)), 60)
    for i in range(70):  # one after another: concurrent sends have no order to keep
        await producer.send(kafka_topic, f"k{i % 7}", {"i": i})
    await eventually(lambda: sum(map(len, seen.values())) >= 70, timeout=60, what="70 messages")
    for j in range(7):
        assert seen[f"k{j}"] == list(range(j, 70, 7))
    assert await consumer.assigned_partition_count() == 4
    await stop(consumer)
    producer._release()


async def test_timers_with_real_cassandra(kafka_topic: str) -> None:
    when = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=2)
    scheduled: list[list[datetime]] = []

    async def on_message(ctx: Context, m: Message) -> None:
        await ctx.clear_and_schedule(when)
        await ctx.schedule(when + timedelta(hours=1))
        scheduled.append(await ctx.scheduled())
        await ctx.unschedule(when + timedelta(hours=1))

    handler = Recorder(on_message=on_message)
    consumer = kafka_client(group_id=unique("g"), subscribed_topics=kafka_topic,
                            cassandra_keyspace="prosody_py_tests")
    producer = kafka_client(source_system=unique("src"))
    await asyncio.wait_for(consumer.subscribe(handler), 60)
    await producer.send(kafka_topic, "cass-key", {"n": 1})
    await eventually(lambda: len(handler.timers) == 1, timeout=90, what="the Cassandra timer")
    assert scheduled == [[when, when + timedelta(hours=1)]]
    assert handler.timers[0].key == "cass-key" and handler.timers[0].time == when
    await stop(consumer)
    producer._release()
