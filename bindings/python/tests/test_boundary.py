"""What users pass in arrives exactly, is rejected clearly, or is cancelled as promised."""

from __future__ import annotations

import asyncio
import logging
import math
import os
import random
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from prosody import AdminClient, Context, EventHandler, Message, ProsodyClient, Timer

from conftest import KAFKA, Recorder, eventually, kafka_client, mock_client, stop, unique


# ---- bytes arrive exactly ----


async def test_a_nul_byte_in_a_key_arrives_byte_exact(mock_topic: str) -> None:
    consumer = mock_client(group_id=unique("g"), subscribed_topics=mock_topic)
    producer = mock_client(source_system=unique("src"))
    rec = Recorder()
    await consumer.subscribe(rec)
    await producer.send(mock_topic, "user-1\x00admin", {"n": 1})
    await producer.send(mock_topic, "user-1", {"n": 2})
    await eventually(lambda: len(rec.messages) == 2, what="both messages")
    assert sorted(m.key for m in rec.messages) == ["user-1", "user-1\x00admin"]
    await stop(consumer)
    producer._release()


@pytest.mark.parametrize(
    "topic, words",
    [("t\x00other", '"\\x00" at byte 1'), ("a b", '" " at byte 1'), ("", "must not be empty"),
     ("..", "not allowed"), ("x" * 250, "250 bytes long")],
)
async def test_topic_names_kafka_refuses_are_refused_naming_the_topic(topic: str, words: str) -> None:
    producer = mock_client(source_system=unique("src"))
    with pytest.raises(ValueError) as e:
        await producer.send(topic, "k", {"n": 1})
    assert str(e.value).startswith("topic ") and words in str(e.value), str(e.value)
    producer._release()


async def test_random_keys_and_payloads_arrive_byte_exact_on_kafka(kafka_topic: str) -> None:
    """Property: any UTF-8 key (NUL and astral characters included) and any JSON payload round-trips."""
    rng = random.Random(18)
    alphabet = ["\x00", "\x01", "\x7f", "a", "Z", " ", "é", "\u2028", "\ufffd", "😀", "\U0010fffd", "\\", '"']

    def text(n: int) -> str:
        return "".join(rng.choice(alphabet) if rng.random() < 0.7 else chr(rng.randint(0x20, 0xD7FF))
                       for _ in range(n))

    cases = [(f"{i}:{text(rng.randint(0, 40))}", {"i": i, "s": text(rng.randint(0, 200)),
                                                   "n": rng.uniform(-1e9, 1e9), "l": [text(3), None, True]})
             for i in range(150)]
    consumer = kafka_client(group_id=unique("g"), subscribed_topics=kafka_topic)
    producer = kafka_client(source_system=unique("src"))
    rec = Recorder()
    await consumer.subscribe(rec)
    await asyncio.gather(*(producer.send(kafka_topic, key, payload) for key, payload in cases))
    await eventually(lambda: len(rec.messages) >= len(cases), timeout=60, what="every message")
    got = {m.key: m.payload for m in rec.messages}
    assert got == {key: payload for key, payload in cases}
    await stop(consumer)
    producer._release()


# ---- clear errors ----


@pytest.mark.parametrize("name, args", [
    ("key", ("t", None, {})), ("key", ("t", 5, {})), ("key", ("t", b"k", {})),
    ("topic", (None, "k", {})), ("topic", (7, "k", {})), ("topic", (b"t", "k", {})),
])
async def test_wrong_argument_types_raise_type_error_naming_the_argument(name: str, args: tuple[Any, ...]) -> None:
    producer = mock_client(source_system=unique("src"))
    with pytest.raises(TypeError, match=f"send: {name} must be a str, got "):
        await producer.send(*args)
    producer._release()


async def test_a_nan_payload_says_json_has_no_nan() -> None:
    producer = mock_client(source_system=unique("src"))
    with pytest.raises(ValueError, match="payload cannot be represented as JSON.*NaN"):
        await producer.send("t", "k", {"x": math.nan})
    with pytest.raises(TypeError, match="payload cannot be represented as JSON"):
        await producer.send("t", "k", {"x": object()})
    producer._release()


async def test_lifecycle_errors_speak_the_api(mock_topic: str) -> None:
    consumer = mock_client(group_id=unique("g"), subscribed_topics=mock_topic)
    with pytest.raises(RuntimeError) as e:
        await consumer.unsubscribe()
    assert str(e.value) == "the client is not subscribed"
    await consumer.subscribe(Recorder())
    with pytest.raises(RuntimeError, match="^the client is already subscribed: unsubscribe first$"):
        await consumer.subscribe(Recorder())
    await stop(consumer)


def test_a_bad_mock_value_names_mock_alone() -> None:
    with pytest.raises(ValueError) as e:
        ProsodyClient(bootstrap_servers="localhost:9094", group_id="g", subscribed_topics="t", mock="yes")
    assert str(e.value).startswith("mock: ") and "cassandra" not in str(e.value)


def test_the_fork_check_comes_first_in_every_call() -> None:
    code = textwrap.dedent(
        """
        import asyncio, os, prosody
        c = prosody.ProsodyClient(bootstrap_servers="mock:9092", mock=True, probe_port=None,
                                  group_id="g", subscribed_topics="t")
        if os.fork() == 0:
            for name, call in [("consumer_state", c.consumer_state), ("is_stalled", c.is_stalled),
                               ("assigned_partition_count", c.assigned_partition_count),
                               ("unsubscribe", c.unsubscribe), ("send", lambda: c.send(None, None, None))]:
                try:
                    call()
                    print(name, "no error")
                except Exception as e:
                    print(name, type(e).__name__, e)
            os._exit(0)
        os.wait()
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    lines = out.stdout.splitlines()
    assert len(lines) == 5, out
    for line in lines:
        assert "RuntimeError ProsodyClient cannot be used after fork" in line, line


async def test_a_sync_handler_is_rejected_at_subscribe(mock_topic: str) -> None:
    class Sync(EventHandler):
        def on_message(self, context: Context, message: Message) -> None:  # type: ignore[override]
            pass

        async def on_timer(self, context: Context, timer: Timer) -> None:
            pass

    consumer = mock_client(group_id=unique("g"), subscribed_topics=mock_topic)
    with pytest.raises(TypeError, match=r"Sync.on_message must be a coroutine function: define it with `async def"):
        consumer.subscribe(Sync())
    assert await consumer.consumer_state() == "configured"
    consumer._release()


def test_repr_shows_what_identifies_the_client_and_never_secrets() -> None:
    client = mock_client(group_id="orders", subscribed_topics=["a", "b"], mode="best-effort",
                         cassandra_password="hunter2", cassandra_user="svc")
    text = repr(client)
    for part in ("mode='best-effort'", "group_id='orders'", "subscribed_topics=['a', 'b']",
                 "bootstrap_servers='mock:9092'", "consumer_state='configured'"):
        assert part in text, text
    assert "hunter2" not in text and "svc" not in text
    client._release()
    assert "consumer_state='closed'" in repr(client)


# ---- timers: no guessing, no clamping ----


async def test_schedule_refuses_naive_and_out_of_range_times(mock_topic: str) -> None:
    results: dict[str, str] = {}

    async def try_times(ctx: Context, m: Message) -> None:
        for label, t in [
            ("naive", datetime.now() + timedelta(seconds=3)),
            ("year 9999", datetime(9999, 1, 1, tzinfo=timezone.utc)),
            ("year 1960", datetime(1960, 1, 1, tzinfo=timezone.utc)),
            ("aware", datetime.now(timezone.utc) + timedelta(hours=1)),
        ]:
            for method in (ctx.schedule, ctx.clear_and_schedule, ctx.unschedule):
                try:
                    await method(t)
                    results[f"{label} {method.__name__}"] = "ok"
                except Exception as e:
                    results[f"{label} {method.__name__}"] = f"{type(e).__name__}: {e}"

    consumer = mock_client(group_id=unique("g"), subscribed_topics=mock_topic)
    producer = mock_client(source_system=unique("src"))
    await consumer.subscribe(Recorder(on_message=try_times))
    await producer.send(mock_topic, "k", {"n": 1})
    await eventually(lambda: len(results) == 12, what="every schedule call")
    for method in ("schedule", "clear_and_schedule", "unschedule"):
        assert results[f"naive {method}"].startswith(f"ValueError: {method}: time must be timezone-aware")
        assert "out of range" in results[f"year 9999 {method}"] and "2106-02-07" in results[f"year 9999 {method}"]
        assert "out of range" in results[f"year 1960 {method}"]
        assert results[f"aware {method}"] == "ok"
    await stop(consumer)
    producer._release()


# ---- cancelled as promised ----


async def test_a_hung_handler_is_cancelled_at_its_timeout_and_frees_its_key(mock_topic: str) -> None:
    cancelled = asyncio.Event()
    seen: list[int] = []

    async def hang_first(ctx: Context, m: Message) -> None:
        seen.append(m.payload["n"])
        if m.payload["n"] == 1:
            try:
                await asyncio.sleep(3600)  # ignores should_cancel() and on_cancel()
            except asyncio.CancelledError:
                cancelled.set()
                raise

    consumer = mock_client(group_id=unique("g"), subscribed_topics=mock_topic, timeout=1.0,
                           mode="best-effort", shutdown_timeout=30.0)
    producer = mock_client(source_system=unique("src"))
    await consumer.subscribe(Recorder(on_message=hang_first))
    await producer.send(mock_topic, "same-key", {"n": 1})
    await producer.send(mock_topic, "same-key", {"n": 2})
    # The key moves on well before the shutdown budget: the hung attempt
    # was given up on at its timeout and its task cancelled.
    await asyncio.wait_for(cancelled.wait(), 15)
    await eventually(lambda: seen == [1, 2], timeout=15, what="the key's next message")
    started = time.monotonic()
    await asyncio.wait_for(consumer.unsubscribe(), 30)
    assert time.monotonic() - started < 10
    await stop(consumer)
    producer._release()


def test_a_closed_event_loop_is_logged_and_unsubscribe_returns_at_once(caplog: pytest.LogCaptureFixture) -> None:
    mock_topic = unique("py-topic")

    async def create() -> None:
        admin = AdminClient(bootstrap_servers="mock:9092", mock=True)
        await admin.create_topic(mock_topic, partition_count=2)

    asyncio.run(create())
    consumer = mock_client(group_id=unique("g"), subscribed_topics=mock_topic, shutdown_timeout=20.0)
    producer = mock_client(source_system=unique("src"))
    rec = Recorder()
    first = asyncio.new_event_loop()

    async def subscribe() -> None:
        await consumer.subscribe(rec)

    first.run_until_complete(subscribe())
    first.close()  # without unsubscribing

    async def afterwards() -> float:
        await producer.send(mock_topic, "k", {"n": 1})
        await eventually(lambda: any("event loop that subscribed" in r.getMessage() for r in caplog.records),
                         timeout=15, what="the closed loop to be logged")
        started = time.monotonic()
        await asyncio.wait_for(consumer.unsubscribe(), 30)
        elapsed = time.monotonic() - started
        assert await consumer.consumer_state() == "configured"
        return elapsed

    with caplog.at_level(logging.ERROR, logger="prosody.dispatch"):
        elapsed = asyncio.run(afterwards())
    assert elapsed < 5, f"unsubscribe took {elapsed:.1f}s"
    consumer._release()
    producer._release()


__all__ = ["KAFKA", "os"]
