"""Runtime behaviour in mock mode: delivery, ordering, concurrency, timers, errors, cancellation."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from prosody import AdminClient, Context, Message, PermanentError, Timer, TransientError, permanent

from conftest import Recorder, eventually, mock_client, stop, unique

REPO = Path(__file__).resolve().parents[3]


def test_quickstart_example_runs_and_exits() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "examples" / "python" / "quickstart.py")],
        capture_output=True, text=True, timeout=90,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("Received message:") == 5
    assert "Timer fired for key: message-key" in out.stdout
    assert "Handled 5 messages and 1 timer." in out.stdout


async def test_round_trip_fields(mock_topic: str) -> None:
    handler = Recorder()
    consumer = mock_client(group_id=unique("g"), subscribed_topics=mock_topic)
    producer = mock_client(source_system=unique("src"))
    await consumer.subscribe(handler)
    assert await consumer.consumer_state() == "running"
    before = datetime.now(timezone.utc) - timedelta(seconds=5)
    await producer.send(mock_topic, "key-1", {"n": 1, "text": "héllo", "list": [1, 2.5, None, True]})
    await eventually(lambda: len(handler.messages) == 1, what="the message")
    m = handler.messages[0]
    assert (m.topic, m.key) == (mock_topic, "key-1")
    assert m.payload == {"n": 1, "text": "héllo", "list": [1, 2.5, None, True]}
    assert m.offset == 0 and 0 <= m.partition < 4
    assert m.timestamp.tzinfo is not None and m.timestamp > before
    await consumer.unsubscribe()
    assert await consumer.consumer_state() == "configured"
    consumer._release()
    producer._release()


async def test_per_key_order_and_resubscribe(mock_topic: str) -> None:
    seen: dict[str, list[int]] = {}

    async def record(ctx: Context, m: Message) -> None:
        assert isinstance(m.payload, dict)
        await asyncio.sleep(0.001 * (m.payload["i"] % 3))  # out-of-order completion if unordered
        seen.setdefault(m.key, []).append(int(m.payload["i"]))  # type: ignore[arg-type]

    handler = Recorder(on_message=record)
    group = unique("g")
    consumer = mock_client(group_id=group, subscribed_topics=mock_topic, max_concurrency=16)
    producer = mock_client(source_system=unique("src"))
    await consumer.subscribe(handler)
    keys = [f"k{j}" for j in range(10)]
    for i in range(300):
        await producer.send(mock_topic, keys[i % 10], {"i": i})
    await eventually(lambda: sum(map(len, seen.values())) == 300, what="300 messages")
    for j, key in enumerate(keys):
        assert seen[key] == list(range(j, 300, 10)), key
    # Unsubscribe commits; subscribing again goes on from there.
    await consumer.unsubscribe()
    await consumer.subscribe(handler)
    await producer.send(mock_topic, "k0", {"i": 300})
    await eventually(lambda: seen["k0"][-1] == 300, what="the message after resubscribe")
    assert sum(map(len, seen.values())) == 301
    await stop(consumer)
    producer._release()


async def test_a_blocked_key_does_not_block_other_keys(mock_topic: str) -> None:
    release = asyncio.Event()
    started: list[str] = []

    async def block_a(ctx: Context, m: Message) -> None:
        started.append(m.key)
        if m.key == "a":
            await release.wait()

    handler = Recorder(on_message=block_a)
    consumer = mock_client(group_id=unique("g"), subscribed_topics=mock_topic)
    producer = mock_client(source_system=unique("src"))
    await consumer.subscribe(handler)
    await producer.send(mock_topic, "a", {"n": 1})
    await eventually(lambda: "a" in started, what="key a to start")
    for key in ["b", "c", "d", "e"]:
        await producer.send(mock_topic, key, {"n": 1})
    await eventually(lambda: {"b", "c", "d", "e"} <= set(started), what="other keys while a is blocked")
    # Concurrency: several handlers are in flight at once on the loop.
    assert len(started) == 5
    release.set()
    await stop(consumer)
    producer._release()


async def test_timers_in_mock_mode(mock_topic: str) -> None:
    lists: dict[str, list[int]] = {}
    now = datetime.now(timezone.utc).replace(microsecond=0)

    async def on_message(ctx: Context, m: Message) -> None:
        far1, far2 = now + timedelta(hours=1), now + timedelta(hours=2)
        await ctx.schedule(far1)
        await ctx.schedule(far2)
        lists["two"] = [len(await ctx.scheduled())]
        await ctx.unschedule(far1)
        lists["unschedule"] = [len(await ctx.scheduled())]
        await ctx.schedule(far1)
        await ctx.clear_and_schedule(now + timedelta(seconds=1.6))  # rounds half-up to +2 s
        times = await ctx.scheduled()
        lists["clear_and_schedule"] = [len(times)]
        assert times == [now + timedelta(seconds=2)] and times[0].tzinfo is not None

    handler = Recorder(on_message=on_message)
    consumer = mock_client(group_id=unique("g"), subscribed_topics=mock_topic)
    producer = mock_client(source_system=unique("src"))
    await consumer.subscribe(handler)
    await producer.send(mock_topic, "timer-key", {"n": 1})
    await eventually(lambda: len(handler.timers) == 1, timeout=20, what="the timer to fire")
    assert lists == {"two": [2], "unschedule": [1], "clear_and_schedule": [1]}
    timer = handler.timers[0]
    assert timer.key == "timer-key" and timer.time == now + timedelta(seconds=2)
    fired_at = datetime.now(timezone.utc)
    assert abs((fired_at - timer.time).total_seconds()) < 3
    await stop(consumer)
    producer._release()


async def test_clear_scheduled_and_kept_context_is_invalid(mock_topic: str) -> None:
    kept: list[Context] = []
    counts: list[int] = []

    async def on_message(ctx: Context, m: Message) -> None:
        await ctx.schedule(datetime.now(timezone.utc) + timedelta(hours=1))
        await ctx.clear_scheduled()
        counts.append(len(await ctx.scheduled()))
        kept.append(ctx)

    handler = Recorder(on_message=on_message)
    consumer = mock_client(group_id=unique("g"), subscribed_topics=mock_topic)
    producer = mock_client(source_system=unique("src"))
    await consumer.subscribe(handler)
    await producer.send(mock_topic, "k", {"n": 1})
    await eventually(lambda: len(kept) == 1, what="the handler")
    await asyncio.sleep(0.1)
    assert counts == [0]
    with pytest.raises(PermanentError, match="no longer valid"):
        await kept[0].schedule(datetime.now(timezone.utc) + timedelta(hours=1))
    assert kept[0].should_cancel() is True
    await stop(consumer)
    producer._release()


async def test_transient_errors_are_retried_permanent_ones_are_not(mock_topic: str) -> None:
    calls: dict[str, int] = {}

    class Flaky(Recorder):
        @permanent(TypeError)
        async def on_message(self, context: Context, message: Message) -> None:
            calls[message.key] = calls.get(message.key, 0) + 1
            if message.key == "transient" and calls[message.key] < 3:
                raise RuntimeError("try again")
            if message.key == "explicit":
                raise TransientError("explicit transient") if calls[message.key] < 2 else None  # type: ignore[misc]
            if message.key == "permanent":
                raise TypeError("malformed")

    consumer = mock_client(group_id=unique("g"), subscribed_topics=mock_topic, mode="low-latency",
                           failure_topic=unique("dlq"), retry_base=0.01, max_retries=5)
    producer = mock_client(source_system=unique("src"))
    admin_topic = consumer  # the failure topic is auto-created by the mock cluster on first use
    await consumer.subscribe(Flaky())
    for key in ["transient", "explicit", "permanent", "fine"]:
        await producer.send(mock_topic, key, {"n": 1})
    await eventually(lambda: calls.get("transient") == 3 and calls.get("explicit") == 2
                     and calls.get("fine") == 1 and calls.get("permanent") == 1, what="retries")
    await asyncio.sleep(0.5)
    assert calls["permanent"] == 1  # not retried
    assert calls["transient"] == 3
    await stop(admin_topic)
    producer._release()


async def test_best_effort_never_retries(mock_topic: str) -> None:
    calls: list[str] = []

    async def fail(ctx: Context, m: Message) -> None:
        calls.append(m.key)
        raise RuntimeError("boom")

    consumer = mock_client(group_id=unique("g"), subscribed_topics=mock_topic, mode="best-effort")
    producer = mock_client(source_system=unique("src"))
    await consumer.subscribe(Recorder(on_message=fail))
    await producer.send(mock_topic, "k", {"n": 1})
    await eventually(lambda: len(calls) == 1, what="the call")
    await asyncio.sleep(0.5)
    assert calls == ["k"]
    await stop(consumer)
    producer._release()


async def test_timeout_reaches_should_cancel_and_on_cancel(mock_topic: str) -> None:
    observed: list[tuple[bool, bool]] = []

    async def slow(ctx: Context, m: Message) -> None:
        before = ctx.should_cancel()
        try:
            await asyncio.wait_for(ctx.on_cancel(), timeout=10)
        finally:  # the task is cancelled at the timeout too
            observed.append((before, ctx.should_cancel()))

    consumer = mock_client(group_id=unique("g"), subscribed_topics=mock_topic, timeout=0.5,
                           mode="best-effort")
    producer = mock_client(source_system=unique("src"))
    await consumer.subscribe(Recorder(on_message=slow))
    await producer.send(mock_topic, "k", {"n": 1})
    await eventually(lambda: len(observed) == 1, what="cancellation after the timeout")
    assert observed == [(False, True)]
    await stop(consumer)
    producer._release()


async def test_shutdown_cancellation_reaches_the_handler(mock_topic: str) -> None:
    cancelled = asyncio.Event()
    started = asyncio.Event()

    async def wait_for_cancel(ctx: Context, m: Message) -> None:
        started.set()
        await ctx.on_cancel()
        cancelled.set()

    consumer = mock_client(group_id=unique("g"), subscribed_topics=mock_topic, shutdown_timeout=1.0)
    producer = mock_client(source_system=unique("src"))
    await consumer.subscribe(Recorder(on_message=wait_for_cancel))
    await producer.send(mock_topic, "k", {"n": 1})
    await asyncio.wait_for(started.wait(), 20)
    await asyncio.wait_for(consumer.unsubscribe(), 20)
    assert cancelled.is_set()
    consumer._release()
    producer._release()


async def test_send_failures_raise_runtime_error() -> None:
    producer = mock_client(send_timeout=0.2)
    with pytest.raises(ValueError, match='topic "": must not be empty'):
        await producer.send("", "k", {"n": 1})  # bad input: named, and a ValueError
    producer._release()
    with pytest.raises(RuntimeError, match="closed"):
        await producer.send("t", "k", {"n": 1})


async def test_core_logs_reach_python_logging(mock_topic: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="prosody")
    consumer = mock_client(group_id=unique("g"), subscribed_topics=mock_topic)
    await consumer.subscribe(Recorder())
    await eventually(lambda: any(r.name == "prosody" and "partition assigned" in r.getMessage()
                                 for r in caplog.records), what="a partition assigned log record")
    await stop(consumer)


async def test_otel_context_flows_from_send_to_handler(mock_topic: str) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    tracer = trace.get_tracer("test")

    async def in_handler(ctx: Context, m: Message) -> None:
        with tracer.start_as_current_span("test-receive"):
            pass

    consumer = mock_client(group_id=unique("g"), subscribed_topics=mock_topic)
    producer = mock_client(source_system=unique("src"))
    handler = Recorder(on_message=in_handler)
    await consumer.subscribe(handler)
    with tracer.start_as_current_span("test-send") as send_span:
        await producer.send(mock_topic, "k", {"n": 1})
    await eventually(lambda: len(handler.messages) == 1, what="the message")
    await stop(consumer)
    producer._release()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert {"test-send", "on_message", "test-receive"} <= set(spans)
    trace_id = send_span.get_span_context().trace_id
    assert spans["on_message"].context.trace_id == trace_id
    assert spans["on_message"].parent is not None
    assert spans["on_message"].parent.span_id == send_span.get_span_context().span_id
    assert spans["test-receive"].parent is not None
    assert spans["test-receive"].parent.span_id == spans["on_message"].context.span_id


async def test_timer_handler_receives_timer(mock_topic: str) -> None:
    async def schedule_soon(ctx: Context, m: Message) -> None:
        await ctx.schedule(datetime.now(timezone.utc))

    fired: list[Timer] = []

    async def on_timer(ctx: Context, t: Timer) -> None:
        fired.append(t)
        assert ctx.should_cancel() is False

    consumer = mock_client(group_id=unique("g"), subscribed_topics=mock_topic)
    producer = mock_client(source_system=unique("src"))
    await consumer.subscribe(Recorder(on_message=schedule_soon, on_timer=on_timer))
    await producer.send(mock_topic, "tk", {"n": 1})
    await eventually(lambda: len(fired) == 1, what="the timer")
    assert fired[0].key == "tk"
    await stop(consumer)
    producer._release()


_ = os


async def test_pipeline_defers_a_poisoned_key(mock_topic: str) -> None:
    """In mock mode the deferred message is read back from the in-memory
    broker: a key failing its first five attempts is parked, the other keys
    move on, and its later messages run after it, in order."""
    attempts: list[float] = []
    handled: list[tuple[str, int]] = []
    loop = asyncio.get_running_loop()

    async def on_message(ctx: Context, m: Message) -> None:
        assert isinstance(m.payload, dict)
        seq = int(m.payload["seq"])  # type: ignore[arg-type]
        if m.key == "poison" and seq == 0:
            attempts.append(loop.time())
            if len(attempts) <= 5:
                raise RuntimeError(f"attempt {len(attempts)} fails")
        handled.append((m.key, seq))

    consumer = mock_client(group_id=unique("g"), subscribed_topics=mock_topic,
                           defer_base=timedelta(seconds=1), defer_max_delay=timedelta(seconds=2))
    producer = mock_client(source_system=unique("src"))
    await consumer.subscribe(Recorder(on_message=on_message))
    await producer.send(mock_topic, "poison", {"seq": 0})
    for i in range(10):
        await producer.send(mock_topic, f"healthy-{i}", {"seq": i})
    await producer.send(mock_topic, "poison", {"seq": 1})
    await producer.send(mock_topic, "poison", {"seq": 2})
    await eventually(lambda: sum(1 for k, _ in handled if k.startswith("healthy")) == 10, what="the healthy keys")
    assert [s for k, s in handled if k == "poison"] == []  # still deferred
    await eventually(lambda: [s for k, s in handled if k == "poison"] == [0, 1, 2], timeout=60, what="the poisoned key")
    assert len(attempts) == 6
    gaps = [b - a for a, b in zip(attempts, attempts[1:])]
    assert all(g > 0.4 for g in gaps[1:]), gaps  # backed off: whole seconds, never at once after the first retry
    await stop(consumer)
    producer._release()


async def test_unsubscribe_starts_no_queued_handler(mock_topic: str, caplog: pytest.LogCaptureFixture) -> None:
    # Every permit is held by a handler waiting at the gate when unsubscribe
    # is called: those finish, and no other handler starts after the call.
    caplog.set_level(logging.INFO, logger="prosody")
    permits, quick, messages = 4, 20, 200
    gate = asyncio.Event()
    starts = 0
    blocked = 0

    async def gated(ctx: Context, m: Message) -> None:
        nonlocal starts, blocked
        starts += 1
        if starts > quick:
            blocked += 1
            await gate.wait()

    consumer = mock_client(group_id=unique("g"), subscribed_topics=mock_topic, max_concurrency=permits)
    producer = mock_client(source_system=unique("src"))
    await consumer.subscribe(Recorder(on_message=gated))
    for i in range(messages):
        await producer.send(mock_topic, f"k{i % 50}", {"i": i})
    await eventually(lambda: blocked == permits, what="every permit held by a blocked handler")
    started_before = starts
    unsubscribing = asyncio.ensure_future(consumer.unsubscribe())

    def draining() -> int:
        return sum(1 for r in caplog.records if r.name == "prosody" and "partition released; draining" in r.getMessage())

    await eventually(lambda: draining() == 4, what="every partition draining")
    gate.set()
    await asyncio.wait_for(unsubscribing, 60)
    assert starts == started_before, f"{starts - started_before} handlers started after unsubscribe began"
    consumer._release()
    producer._release()


async def test_a_client_held_by_nothing_but_its_call_finishes_the_call() -> None:
    # The only reference to each client is the call's future: the client
    # must live until the call is done, not be released by its finaliser
    # as soon as the call has started.
    name = unique("py-temp")
    await AdminClient(bootstrap_servers="mock:9092", mock=True).create_topic(name, partition_count=1)
    await mock_client(source_system="py-temp").send(name, "k", {"n": 1})
    await AdminClient(bootstrap_servers="mock:9092", mock=True).delete_topic(name)


async def test_a_new_owner_skips_what_was_handled_but_not_committed() -> None:
    # One partition; its first message never finishes, so nothing after it
    # is committed when the first consumer stops. The second consumer (a
    # cold cache) reads everything again and skips what the first handled,
    # by event id or, without one, by offset; the in-memory ids of mock
    # mode live as long as the process.
    topic = unique("py-dedup")
    await AdminClient(bootstrap_servers="mock:9092", mock=True).create_topic(topic, partition_count=1)
    # No id cache on the producer: a copy of an id sent before is written.
    producer = mock_client(source_system=unique("src"), idempotence_cache_size=0)
    group = unique("g")
    await producer.send(topic, "blocker", {"seq": 0})
    for seq in range(1, 7):
        payload: dict[str, object] = {"seq": seq}
        if seq % 2 == 0:
            payload["id"] = f"event-{seq}"
        await producer.send(topic, f"k{seq % 3}", payload)

    first_seen: list[int] = []
    never = asyncio.Event()

    async def block_first(ctx: Context, m: Message) -> None:
        assert isinstance(m.payload, dict)
        if m.key == "blocker":
            await never.wait()
        first_seen.append(int(m.payload["seq"]))  # type: ignore[arg-type]

    first = mock_client(group_id=group, subscribed_topics=topic, shutdown_timeout=0.2)
    await first.subscribe(Recorder(on_message=block_first))
    await eventually(lambda: len(first_seen) == 6, what="all but the blocker handled")
    await stop(first)

    await producer.send(topic, "k1", {"seq": 7, "id": "event-7"})
    await producer.send(topic, "k2", {"seq": 8, "id": "event-2"})  # a copy of a handled id
    second_seen: list[int] = []

    async def record(ctx: Context, m: Message) -> None:
        assert isinstance(m.payload, dict)
        second_seen.append(int(m.payload["seq"]))  # type: ignore[arg-type]

    second = mock_client(group_id=group, subscribed_topics=topic)
    await second.subscribe(Recorder(on_message=record))
    await eventually(lambda: sorted(second_seen) == [0, 7], what="the blocker and the new message")
    # The copy of event-2 comes after event-7 in the log: once the copy's
    # offset is committed, nothing more can arrive.
    await stop(second)
    third_seen: list[int] = []

    async def record_third(ctx: Context, m: Message) -> None:
        third_seen.append(0)

    third = mock_client(group_id=group, subscribed_topics=topic)
    await third.subscribe(Recorder(on_message=record_third))
    await producer.send(topic, "k9", {"seq": 9})
    await eventually(lambda: len(third_seen) == 1, what="a fresh message after everything was committed")
    await stop(third)
    assert sorted(second_seen) == [0, 7]
    producer._release()
