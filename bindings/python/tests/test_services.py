"""Against the real services: Kafka (PROSODY_TEST_KAFKA) and Cassandra (PROSODY_TEST_CASSANDRA)."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import prosody
from prosody import AdminClient, Context, Direction, Message, ProsodyClient

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


def _read_all(topic: str) -> list[Any]:
    """Every record of topic up to its high-water marks, read raw (blocking)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": KAFKA, "group.id": unique("reader"), "enable.auto.commit": False})
    try:
        meta = c.list_topics(topic, timeout=30)
        out: list[Any] = []
        for p in meta.topics[topic].partitions:
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            if high <= low:
                continue
            c.assign([TopicPartition(topic, p, low)])
            got = 0
            while got < high - low:
                m = c.poll(10)
                assert m is not None, f"timed out reading {topic}[{p}]"
                assert m.error() is None, m.error()
                out.append(m)
                got += 1
        return out
    finally:
        c.close()


def _offsets(group: str, topic: str, committed: bool) -> dict[int, int]:
    """group's committed offsets of topic's partitions, or their high-water marks."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": KAFKA, "group.id": group, "enable.auto.commit": False})
    try:
        parts = c.list_topics(topic, timeout=30).topics[topic].partitions
        if committed:
            return {tp.partition: tp.offset for tp in c.committed([TopicPartition(topic, p) for p in parts], timeout=30)}
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in parts}
    finally:
        c.close()


def _committed(group: str, topic: str) -> dict[int, int]:
    return _offsets(group, topic, committed=True)


def _hwms(topic: str) -> dict[int, int]:
    return _offsets(unique("hwm"), topic, committed=False)


def _low_latency(group: str, topic: str, failures: str, max_retries: int) -> ProsodyClient:
    """A low-latency consumer of topic writing to failures, with quick retries."""
    return kafka_client(group_id=group, subscribed_topics=topic, mode="low-latency", failure_topic=failures,
                        max_retries=max_retries, retry_base=timedelta(milliseconds=5),
                        max_retry_delay=timedelta(milliseconds=50))


async def test_low_latency_dead_letters_on_real_kafka(kafka_topic: str) -> None:
    """A handler that always fails for some keys: each of their messages is on
    the failure topic once, with its key, payload and source-* headers; the
    other keys are handled; every offset is committed."""
    failures = unique("py-failures")
    admin = AdminClient(bootstrap_servers=KAFKA)
    await asyncio.wait_for(admin.create_topic(failures, partition_count=1, replication_factor=1), 30)
    group = unique("g")
    handled: list[str] = []

    async def on_message(ctx: Context, m: Message) -> None:
        if m.key.startswith("bad"):
            raise RuntimeError(f"bad key {m.key}")
        handled.append(m.key)

    consumer = _low_latency(group, kafka_topic, failures, max_retries=1)
    producer = kafka_client(source_system=unique("src"))
    try:
        await asyncio.wait_for(consumer.subscribe(Recorder(on_message=on_message)), 60)
        for i in range(40):
            await producer.send(kafka_topic, f"bad-{i}" if i % 4 == 0 else f"good-{i}", {"i": i})
        await eventually(lambda: len(handled) == 30, timeout=60, what="the good keys")

        def letters_done() -> bool:
            return len(_read_all(failures)) >= 10 and _committed(group, kafka_topic) == _hwms(kafka_topic)

        deadline = asyncio.get_running_loop().time() + 90
        while not await asyncio.to_thread(letters_done):
            assert asyncio.get_running_loop().time() < deadline, "dead letters and commits did not arrive"
            await asyncio.sleep(0.2)
        sources = {(m.partition(), m.offset()): m for m in await asyncio.to_thread(_read_all, kafka_topic)}
        letters = await asyncio.to_thread(_read_all, failures)
        seen: dict[tuple[int, int], int] = {}
        for dl in letters:
            h = dict(dl.headers())
            where = (int(h["source-partition"]), int(h["source-offset"]))
            seen[where] = seen.get(where, 0) + 1
            orig = sources[where]
            assert dl.key() == orig.key() and dl.value() == orig.value()
            names = [k for k, _ in dl.headers()]
            assert names[-7:] == ["source-kind", "source-topic", "source-partition", "source-offset",
                                  "source-timestamp", "source-group-id", "source-error"]
            assert h["source-kind"] == b"message" and h["source-topic"] == kafka_topic.encode()
            ts = datetime.fromtimestamp(orig.timestamp()[1] / 1000, timezone.utc)
            assert h["source-timestamp"] == ts.strftime("%Y-%m-%dT%H:%M:%S.").encode() + f"{ts.microsecond // 1000:03d}Z".encode()
            assert h["source-group-id"] == group.encode()
            assert f"bad key {orig.key().decode()}".encode() in h["source-error"]
        assert len(seen) == 10 and set(seen.values()) == {1}
    finally:
        await stop(consumer)
        producer._release()
        await admin.delete_topic(failures)



class _WriteFailures(logging.Handler):
    """Counts the core's log records of refused dead-letter writes."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("writing the dead letter failed"):
            self.count += 1


async def test_dead_letter_not_committed_before_it_is_written(kafka_topic: str) -> None:
    """While the failure topic refuses the dead letter (max.message.bytes
    below its size), the failed message's offset is not committed, though
    later keys are handled; once the topic takes it, it is written and the
    offsets move on."""
    from confluent_kafka.admin import AdminClient as RawAdmin, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    raw = RawAdmin({"bootstrap.servers": KAFKA})
    failures = unique("py-refusing")
    for f in raw.create_topics([NewTopic(failures, 1, 1, config={"max.message.bytes": "100"})]).values():
        await asyncio.to_thread(f.result, 30)
    group = unique("g")
    handled: list[str] = []
    counter = _WriteFailures()
    logging.getLogger().addHandler(counter)

    async def on_message(ctx: Context, m: Message) -> None:
        if m.key == "bad":
            raise RuntimeError("always fails")
        handled.append(m.key)

    # One partition: offsets 0-4 good, 5 bad, 6-19 good.
    admin = AdminClient(bootstrap_servers=KAFKA)
    source = unique("py-one")
    await asyncio.wait_for(admin.create_topic(source, partition_count=1, replication_factor=1), 30)
    consumer = _low_latency(group, source, failures, max_retries=0)
    producer = kafka_client(source_system=unique("src"))
    try:
        await asyncio.wait_for(consumer.subscribe(Recorder(on_message=on_message)), 60)
        for i in range(20):
            await producer.send(source, "bad" if i == 5 else f"good-{i}", {"i": i})
        await eventually(lambda: len(handled) == 19, timeout=60, what="the later keys")
        deadline = asyncio.get_running_loop().time() + 60
        while (await asyncio.to_thread(_committed, group, source)).get(0) != 5:
            assert asyncio.get_running_loop().time() < deadline, "the offset was not committed up to the failed message"
            await asyncio.sleep(0.1)
        before = counter.count
        await eventually(lambda: counter.count >= before + 3, timeout=60, what="three more refused writes")
        assert (await asyncio.to_thread(_committed, group, source))[0] == 5
        assert await asyncio.to_thread(_read_all, failures) == []
        res = ConfigResource(ConfigResource.Type.TOPIC, failures, incremental_configs=[
            ConfigEntry("max.message.bytes", "1048588", incremental_operation=AlterConfigOpType.SET)])
        for f in raw.incremental_alter_configs([res]).values():
            await asyncio.to_thread(f.result, 30)
        deadline = asyncio.get_running_loop().time() + 60
        while (await asyncio.to_thread(_committed, group, source)).get(0) != 20:
            assert asyncio.get_running_loop().time() < deadline, "the offsets did not move on"
            await asyncio.sleep(0.1)
        letters = await asyncio.to_thread(_read_all, failures)
        assert [(dl.key(), dict(dl.headers())["source-offset"]) for dl in letters] == [(b"bad", b"5")]
    finally:
        logging.getLogger().removeHandler(counter)
        await stop(consumer)
        producer._release()
        await admin.delete_topic(source)
        await admin.delete_topic(failures)


async def test_keyed_state_with_real_cassandra_survives_a_restart(kafka_topic: str) -> None:
    counter_def = prosody.value("py-counter", ttl=timedelta(days=1))
    entries_def = prosody.map("py-entries", ttl=timedelta(days=1))
    seen: list[tuple[int, int, str]] = []

    async def on_message(ctx: Context, m: Message) -> None:
        counter, entries = ctx.state(counter_def), ctx.state(entries_def)
        n = (await counter.get() or 0) + 1
        assert isinstance(n, int)
        await counter.set(n)
        for i in range(100):
            await entries.set(f"{n}-{i:03d}", i)
        keys = [k async for k in entries.keys()]
        assert keys == sorted(keys) and len(set(keys)) == len(keys)
        last = [k async for k in entries.keys(Direction.BACKWARD)][0]
        seen.append((n, len(keys), last))

    group = unique("g")
    producer = kafka_client(source_system=unique("src"))
    for round_ in range(2):
        consumer = kafka_client(group_id=group, subscribed_topics=kafka_topic, cassandra_keyspace="prosody_py_tests",
                                state_collections=[counter_def, entries_def])
        await asyncio.wait_for(consumer.subscribe(Recorder(on_message=on_message)), 60)
        for _ in range(2):
            await producer.send(kafka_topic, "state-key", {"n": 1})
        await eventually(lambda: len(seen) == 2 * (round_ + 1), timeout=90, what="the messages")
        await stop(consumer)  # the next client reads what this one committed
    producer._release()
    assert seen == [(n, 100 * n, f"{n}-099") for n in range(1, 5)]


async def test_telemetry_topic_gets_the_handlers_events(kafka_topic: str) -> None:
    """A consumer with telemetry on writes its handler events to the
    telemetry topic (a second consumer reads them back); unsubscribe
    flushes what it holds."""
    telemetry_topic = unique("py-telemetry")
    admin = AdminClient(bootstrap_servers=KAFKA)
    await asyncio.wait_for(admin.create_topic(telemetry_topic, partition_count=1, replication_factor=1), 30)
    events: list[dict[str, Any]] = []
    handled: list[str] = []

    async def read(ctx: Context, m: Message) -> None:
        assert isinstance(m.payload, dict)
        events.append(m.payload)

    async def handle(ctx: Context, m: Message) -> None:
        handled.append(m.key)
        if m.key == "fails":
            raise ValueError("the handler refuses it")

    consumer = kafka_client(group_id=unique("g"), subscribed_topics=kafka_topic, mode="best-effort",
                            telemetry_enabled=True, telemetry_topic=telemetry_topic)
    reader = kafka_client(group_id=unique("g"), subscribed_topics=telemetry_topic)
    producer = kafka_client(source_system=unique("src"))
    try:
        await asyncio.wait_for(consumer.subscribe(Recorder(on_message=handle)), 60)
        await asyncio.wait_for(reader.subscribe(Recorder(on_message=read)), 60)
        for key in ("ok", "fails"):
            await producer.send(kafka_topic, key, {"id": key})
        await eventually(lambda: len(handled) == 2, timeout=60, what="two messages handled")
        await asyncio.wait_for(consumer.unsubscribe(), 60)

        def kinds() -> set[tuple[str, str]]:
            return {(e["type"], e["key"]) for e in events}

        want = {("prosody.message.dispatched", "ok"), ("prosody.message.succeeded", "ok"),
                ("prosody.message.dispatched", "fails"), ("prosody.message.failed", "fails")}
        await eventually(lambda: want <= kinds(), timeout=60, what="the handler events on the telemetry topic")
        failed = next(e for e in events if e["type"] == "prosody.message.failed")
        assert failed["errorCategory"] == "transient"
        assert "the handler refuses it" in failed["exception"]
        assert failed["topic"] == kafka_topic and failed["demandType"] == "normal"
        assert list(failed)[:3] == ["type", "eventTime", "offset"]
    finally:
        await stop(reader)
        await stop(consumer)
        producer._release()
        await admin.delete_topic(telemetry_topic)
