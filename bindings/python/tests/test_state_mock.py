"""Keyed state end to end in mock mode: handlers reading and writing their key's collections."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from typing import Any

from prosody import (
    Context,
    Timer,
    DequeDefinition,
    Direction,
    MapDefinition,
    Message,
    MessageDequeDefinition,
    MessageMapDefinition,
    MessageValueDefinition,
    PermanentStateError,
    TransientError,
    TransientStateError,
    ValueDefinition,
    deque,
    map,
    message_deque,
    message_map,
    message_value,
    value,
)

from conftest import Recorder, eventually, mock_client, stop, unique

COUNTER: ValueDefinition[int] = value("counter", ttl=timedelta(days=30))
SEEN: MapDefinition[int] = map("seen")
RECENT: DequeDefinition[int] = deque("recent", capacity=3)
LAST: MessageValueDefinition[Any] = message_value("last")
BY_OFFSET: MessageMapDefinition[Any] = message_map("by-offset")
PENDING: MessageDequeDefinition[Any] = message_deque("pending", capacity=100)
ALL = [COUNTER, SEEN, RECENT, LAST, BY_OFFSET, PENDING]


def seq(m: Message[Any]) -> int:
    assert isinstance(m.payload, dict)
    return int(m.payload["seq"])


async def run(mock_topic: str, on_message: Any, sends: list[tuple[str, int]], done: Any,
              what: str, **options: Any) -> None:
    """Subscribes a handler with every collection registered, sends (key, seq) messages, waits for done()."""
    consumer = mock_client(group_id=unique("g"), subscribed_topics=mock_topic, state_collections=ALL, **options)
    producer = mock_client(source_system=unique("src"))
    try:
        await consumer.subscribe(Recorder(on_message=on_message))
        for key, n in sends:
            await producer.send(mock_topic, key, {"seq": n})
        await eventually(done, timeout=30, what=what)
    finally:
        await stop(consumer)
        producer._release()


async def test_a_counter_per_key(mock_topic: str) -> None:
    seen: dict[str, list[int]] = {}

    async def count(ctx: Context, m: Message[Any]) -> None:
        counter = ctx.state(COUNTER)
        assert ctx.state(COUNTER) is counter  # one handle per attempt and definition
        await counter.set((await counter.get() or 0) + 1)
        seen.setdefault(m.key, []).append(await counter.get() or 0)  # the attempt's own write

    sends = [("a", 0), ("b", 0), ("a", 1), ("a", 2), ("b", 1)]
    await run(mock_topic, count, sends, lambda: sum(len(v) for v in seen.values()) == 5, "five messages")
    assert seen == {"a": [1, 2, 3], "b": [1, 2]}


async def test_a_failed_attempt_discards_its_writes_unless_committed(mock_topic: str) -> None:
    attempts: dict[str, int] = {}
    observed: dict[str, list[Any]] = {}

    async def handler(ctx: Context, m: Message[Any]) -> None:
        attempt = attempts[m.key] = attempts.get(m.key, 0) + 1
        counter, recent, seen_ = ctx.state(COUNTER), ctx.state(RECENT), ctx.state(SEEN)
        log = observed.setdefault(m.key, [])
        if m.key == "discard":
            log.append((await counter.get(), await recent.size(), await seen_.get("x")))
            if attempt == 1:
                await counter.set(100)
                await recent.append(1)
                await seen_.set("x", 1)
                assert (await counter.get(), await recent.peek(), await seen_.get("x")) == (100, 1, 1)
                raise TransientError("the retry must not see these writes")
        elif m.key == "commit":
            log.append(await counter.get())
            if attempt == 1:
                await counter.set(5)
                await counter.commit()  # stays, though the attempt fails
                await counter.set(6)
                raise TransientError("after a commit")
        elif m.key == "rollback":
            await counter.set(1)
            await counter.commit()
            await counter.set(2)
            await counter.rollback()  # back to the last commit
            log.append(await counter.get())
        elif m.key == "next":
            log.append(await counter.get())

    sends = [("discard", 0), ("commit", 0), ("rollback", 0)]
    await run(mock_topic, handler, sends,
              lambda: attempts.get("discard") == 2 and attempts.get("commit") == 2 and "rollback" in observed,
              "the retries", retry_base=0.01)
    assert observed["discard"] == [(None, 0, None), (None, 0, None)]
    assert observed["commit"] == [None, 5]
    assert observed["rollback"] == [1]


async def test_map_scans_cross_chunks_in_both_directions(mock_topic: str) -> None:
    results: dict[str, Any] = {}

    async def handler(ctx: Context, m: Message[Any]) -> None:
        entries = ctx.state(SEEN)
        if seq(m) == 0:
            for i in range(0, 700, 2):  # 350 committed entries
                await entries.set(f"k{i:04d}", i)
            results["staged"] = [k async for k in entries.keys()]
            return
        # The committed entries merged with this attempt's writes and removals.
        for i in range(1, 700, 2):
            await entries.set(f"k{i:04d}", i)
        for i in range(0, 700, 10):
            await entries.remove(f"k{i:04d}")
        results["forward"] = [k async for k in entries.keys()]
        results["backward"] = [k async for k in entries.keys(Direction.BACKWARD)]
        results["items"] = [e async for e in entries.items(Direction.BACKWARD)]
        results["values"] = [v async for v in entries.values()]
        results["iter"] = [k async for k in entries]

    await run(mock_topic, handler, [("k", 0), ("k", 1)], lambda: "iter" in results, "the scans")
    assert results["staged"] == [f"k{i:04d}" for i in range(0, 700, 2)]
    expected = [i for i in range(700) if i % 10]
    keys = [f"k{i:04d}" for i in expected]
    assert len(keys) == 630 and results["forward"] == keys and results["iter"] == keys
    assert results["backward"] == keys[::-1]
    assert results["items"] == [(f"k{i:04d}", i) for i in reversed(expected)]
    assert results["values"] == expected


async def test_map_keys_are_any_text_the_empty_key_too(mock_topic: str) -> None:
    got: dict[str, Any] = {}
    keys = ["", "é", "a b", "\x00nul", "🙂"]

    async def handler(ctx: Context, m: Message[Any]) -> None:
        entries = ctx.state(SEEN)
        if seq(m) == 0:
            for i, k in enumerate(keys):
                await entries.set(k, i)
            return
        got["many"] = await entries.get_many(keys + ["missing", ""])
        got["contains"] = [await entries.contains(k) for k in keys]
        got["keys"] = [k async for k in entries.keys()]

    await run(mock_topic, handler, [("k", 0), ("k", 1)], lambda: "keys" in got, "two messages")
    assert got["many"] == [0, 1, 2, 3, 4, None, 0]
    assert got["contains"] == [True] * 5
    assert got["keys"] == sorted(keys, key=lambda k: k.encode())


async def test_deque_capacity_drops_the_oldest(mock_topic: str) -> None:
    contents: list[list[int]] = []

    async def handler(ctx: Context, m: Message[Any]) -> None:
        recent = ctx.state(RECENT)
        await recent.append(seq(m))
        contents.append([x async for x in recent])

    sends = [("k", i) for i in range(1, 6)]
    await run(mock_topic, handler, sends, lambda: len(contents) == 5, "five messages")
    assert contents == [[1], [1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5]]


async def test_message_collections_round_trip_every_field(mock_topic: str) -> None:
    originals: list[Message[Any]] = []
    back: dict[str, Any] = {}

    async def handler(ctx: Context, m: Message[Any]) -> None:
        last, by_offset, pending = ctx.state(LAST), ctx.state(BY_OFFSET), ctx.state(PENDING)
        if seq(m) < 2:
            originals.append(m)
            await last.set(m)
            await by_offset.set(str(m.offset), m)
            await pending.append(m)
            return
        back["last"] = await last.get()
        back["map"] = [e async for e in by_offset.items()]
        back["deque"] = [x async for x in pending.values(Direction.BACKWARD)]
        back["popped"] = await pending.popleft()

    sends = [("k", 0), ("k", 1), ("k", 2)]
    await run(mock_topic, handler, sends, lambda: "popped" in back, "three messages")
    first, second = originals
    for got, want in [(back["last"], second), (back["popped"], first)]:
        assert type(got) is Message
        assert (got.topic, got.partition, got.offset, got.key, got.payload) == (
            want.topic, want.partition, want.offset, want.key, want.payload)
        assert got.timestamp == want.timestamp and got.timestamp.tzinfo is not None
        assert got == want
    assert back["map"] == [(str(first.offset), first), (str(second.offset), second)]
    assert back["deque"] == [second, first]


async def test_a_timer_handler_reads_what_the_message_handler_wrote(mock_topic: str) -> None:
    """The windowing pattern of the documentation: messages collect, the timer drains them."""
    drained: list[list[int]] = []

    async def on_message(ctx: Context, m: Message[Any]) -> None:
        await ctx.state(PENDING).append(m)
        if seq(m) == 2:
            await ctx.clear_and_schedule(datetime.now(timezone.utc))

    async def on_timer(ctx: Context, t: Timer) -> None:
        pending = ctx.state(PENDING)
        drained.append([seq(m) async for m in pending.values()])
        await pending.clear()
        assert await pending.is_empty()

    consumer = mock_client(group_id=unique("g"), subscribed_topics=mock_topic, state_collections=ALL)
    producer = mock_client(source_system=unique("src"))
    try:
        await consumer.subscribe(Recorder(on_message=on_message, on_timer=on_timer))
        for n in range(3):
            await producer.send(mock_topic, "window", {"seq": n})
        await eventually(lambda: len(drained) == 1, timeout=30, what="the timer")
    finally:
        await stop(consumer)
        producer._release()
    assert drained == [[0, 1, 2]]


async def test_state_errors_in_handlers(mock_topic: str) -> None:
    kept: dict[str, Any] = {}
    errors: list[BaseException] = []

    async def handler(ctx: Context, m: Message[Any]) -> None:
        kept["ctx"], kept["counter"] = ctx, ctx.state(COUNTER)
        entries = ctx.state(SEEN)
        await entries.set("a", 1)
        kept["scan"] = entries.keys()
        try:
            ctx.state(value("never-registered"))
        except PermanentStateError as e:
            errors.append(e)
        try:
            ctx.state(message_value("counter"))  # registered with JSON items
        except PermanentStateError as e:
            errors.append(e)
        try:
            await kept["counter"].set(object())
        except TransientStateError as e:
            errors.append(e)
        try:
            entries.items("sideways")  # type: ignore[arg-type]
        except TransientStateError as e:
            errors.append(e)

    await run(mock_topic, handler, [("k", 0)], lambda: len(errors) == 4, "the handler")
    assert [type(e) for e in errors] == [PermanentStateError, PermanentStateError, TransientStateError,
                                         TransientStateError]
    assert "forward" in str(errors[3]) and "backward" in str(errors[3])
    await asyncio.sleep(0.05)  # the handler has returned
    for attempt in (kept["counter"].get(), kept["counter"].set(1), kept["scan"].__anext__()):
        try:
            await attempt
        except TransientStateError as e:
            assert "no longer valid" in str(e)
        else:
            raise AssertionError("a handle used after its handler returned must fail")
    try:
        kept["ctx"].state(COUNTER)
    except TransientStateError:
        pass
    else:
        raise AssertionError("a kept context must refuse state()")


async def test_a_client_without_collections_refuses_state_permanently(mock_topic: str) -> None:
    errors: list[BaseException] = []

    async def handler(ctx: Context, m: Message[Any]) -> None:
        try:
            ctx.state(COUNTER)
        except BaseException as e:
            errors.append(e)

    consumer = mock_client(group_id=unique("g"), subscribed_topics=mock_topic)
    producer = mock_client(source_system=unique("src"))
    try:
        await consumer.subscribe(Recorder(on_message=handler))
        await producer.send(mock_topic, "k", {"seq": 0})
        await eventually(lambda: len(errors) == 1, timeout=30, what="the handler")
    finally:
        await stop(consumer)
        producer._release()
    assert type(errors[0]) is PermanentStateError, repr(errors[0])
