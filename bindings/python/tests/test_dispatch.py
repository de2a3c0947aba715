"""The event hot path: eager handler tasks (HandlerTask) and the dispatcher's batch decoding.

HandlerTask tests start handlers as the dispatcher does, from a loop
callback (no task is current there). Dispatcher tests feed hand-built
``prosody_event`` batches through a fake library (a recording
``prosody_py_complete``) to the real batch builder (``prosody._batch``).
"""

from __future__ import annotations

import asyncio
import gc
import contextvars
import json
import sys
import tracemalloc
import types
from collections.abc import Callable, Iterator
from dataclasses import FrozenInstanceError
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from prosody import (
    Context,
    EventHandler,
    Message,
    PermanentError,
    ProsodyHandler,
    Timer,
    TransientError,
    _batch,
    _dispatch,
    _native,
)
from prosody.context import _INITIAL_SLOTS
from prosody._task import OUTCOME_OK, OUTCOME_PERMANENT, OUTCOME_TRANSIENT, HandlerTask

from conftest import Recorder

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


# ---------------------------------------------------------------- HandlerTask


class FakeDispatcher:
    """What HandlerTask and Context use of a Dispatcher."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._ok: list[int] = []
        self.completed: list[tuple[int, int, bytes | None, bool]] = []

    def _complete(self, event: int, outcome: int, text: bytes | None, waited: bool) -> None:
        self.completed.append((event, outcome, text, waited))

    def outcomes(self) -> list[tuple[int, int, bytes | None]]:
        return [(e, OUTCOME_OK, None) for e in self._ok] + [c[:3] for c in self.completed]

    def query_cancel(self, event: int) -> bool:
        return False


def launch(disp: FakeDispatcher, fn: Callable[..., Any], *, event: int = 1, direct: bool = True,
           args: tuple[Any, ...] | None = None) -> tuple[HandlerTask, Context]:
    """Starts a handler exactly as Dispatcher._dispatch does. Call it from a loop callback."""
    ctx = Context(disp, event)  # type: ignore[arg-type]
    task = HandlerTask(loop=disp.loop)
    task._pctx = ctx
    task._context = context = contextvars.copy_context()
    if not direct:
        task._direct = False
    context.run(task._first, fn, *(args if args is not None else (ctx, None)))
    if not task.done():
        ctx._task = task
    return task, ctx


async def start(disp: FakeDispatcher, fn: Callable[..., Any], **kw: Any) -> tuple[HandlerTask, Context, bool]:
    """Runs launch() in a loop callback; returns the task, its context and whether it was done at once."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[tuple[HandlerTask, Context, bool]] = loop.create_future()

    def callback() -> None:
        try:
            task, ctx = launch(disp, fn, **kw)
            fut.set_result((task, ctx, task.done()))
        except BaseException as e:
            fut.set_exception(e)

    loop.call_soon(callback)
    return await fut


async def test_a_handler_that_never_waits_completes_in_the_first_step() -> None:
    disp = FakeDispatcher(asyncio.get_running_loop())
    seen: list[Any] = []

    async def handler(ctx: Context, item: Any) -> None:
        seen.append(asyncio.current_task())

    task, ctx, done_at_once = await start(disp, handler, event=7)
    assert done_at_once
    assert seen == [task]  # current_task() is the handler's task, also in the eager step
    assert disp.outcomes() == [(7, OUTCOME_OK, None)]
    assert disp.completed == []  # eager completions go straight to the batch's list
    assert ctx._done and ctx._task is None
    assert task.result() is None
    assert task not in asyncio.all_tasks()


async def test_a_handler_that_waits_continues_as_a_task() -> None:
    disp = FakeDispatcher(asyncio.get_running_loop())
    gate = asyncio.get_running_loop().create_future()
    seen: list[Any] = []

    async def handler(ctx: Context, item: Any) -> None:
        seen.append(asyncio.current_task())
        await gate
        seen.append(asyncio.current_task())
        await asyncio.sleep(0)  # a bare yield
        seen.append(asyncio.current_task())

    task, ctx, done_at_once = await start(disp, handler, event=3)
    assert not done_at_once and not task.done()
    assert task in asyncio.all_tasks()
    assert "HandlerTask pending" in repr(task) and task.get_name() == "prosody-handler-3"
    assert task.get_coro() is not None and task.get_stack()
    gate.set_result(None)
    assert await task is None
    assert seen == [task, task, task]
    assert disp.completed == [(3, OUTCOME_OK, None, True)]
    assert ctx._done


@pytest.mark.parametrize("after_await", [False, True])
async def test_exceptions_map_to_transient_or_permanent(after_await: bool) -> None:
    disp = FakeDispatcher(asyncio.get_running_loop())

    def failing(exc: BaseException) -> Callable[..., Any]:
        async def handler(ctx: Context, item: Any) -> None:
            if after_await:
                await asyncio.sleep(0.001)
            raise exc
        return handler

    tasks = []
    for event, exc in enumerate([RuntimeError("boom"), PermanentError("bad"), TransientError("later")], 1):
        task, _, done_at_once = await start(disp, failing(exc), event=event)
        assert done_at_once is not after_await
        tasks.append(task)
    await asyncio.gather(*tasks)  # the tasks themselves finish with None, as before
    assert sorted(disp.outcomes()) == [
        (1, OUTCOME_TRANSIENT, b"RuntimeError: boom"),
        (2, OUTCOME_PERMANENT, b"PermanentError: bad"),
        (3, OUTCOME_TRANSIENT, b"TransientError: later"),
    ]


async def test_cancelling_a_waiting_handler() -> None:
    disp = FakeDispatcher(asyncio.get_running_loop())

    async def waits(ctx: Context, item: Any) -> None:
        await asyncio.sleep(10)

    async def swallows(ctx: Context, item: Any) -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            assert asyncio.current_task().cancelling() == 1  # type: ignore[union-attr]
            asyncio.current_task().uncancel()  # type: ignore[union-attr]

    t1, _, _ = await start(disp, waits, event=1)
    t2, _, _ = await start(disp, swallows, event=2)
    assert t1.cancel("stop") and t2.cancel()
    assert t1.cancelling() == 1
    await asyncio.gather(t1, t2)
    assert not t1.cancel()  # done
    assert sorted(disp.outcomes()) == [(1, OUTCOME_TRANSIENT, b"the handler was cancelled"), (2, OUTCOME_OK, None)]


async def test_a_handler_cancelling_itself() -> None:
    disp = FakeDispatcher(asyncio.get_running_loop())

    async def cancel_then_wait(ctx: Context, item: Any) -> None:
        asyncio.current_task().cancel()  # type: ignore[union-attr]
        await asyncio.sleep(10)

    async def cancel_then_return(ctx: Context, item: Any) -> None:
        asyncio.current_task().cancel()  # type: ignore[union-attr]

    t1, _, done1 = await start(disp, cancel_then_wait, event=1)
    t2, _, done2 = await start(disp, cancel_then_return, event=2)
    assert not done1 and done2
    await asyncio.gather(t1, return_exceptions=True)
    # As asyncio.Task: returning with a pending cancel leaves the task cancelled;
    # the handler itself returned normally, so the event is OK.
    assert t2.cancelled()
    assert sorted(disp.outcomes()) == [(1, OUTCOME_TRANSIENT, b"the handler was cancelled"), (2, OUTCOME_OK, None)]


async def test_contextvars_are_per_handler_and_kept_across_waits() -> None:
    disp = FakeDispatcher(asyncio.get_running_loop())
    seen: list[tuple[str, str]] = []

    async def handler(ctx: Context, item: Any) -> None:
        before = VAR.get()
        VAR.set(f"handler-{ctx._event}")
        await asyncio.sleep(0.001)
        seen.append((before, VAR.get()))

    token = VAR.set("client")  # the context the loop callback (the reader) runs in
    try:
        t1, _, _ = await start(disp, handler, event=1)
        t2, _, _ = await start(disp, handler, event=2)
        assert VAR.get() == "client"
        await asyncio.gather(t1, t2)
    finally:
        VAR.reset(token)
    assert seen == [("client", "handler-1"), ("client", "handler-2")]
    assert t1.get_context()[VAR] == "handler-1"


async def test_timeout_and_task_group_work_from_the_first_step() -> None:
    # asyncio.timeout and TaskGroup need the current task from the handler's
    # first step; Python 3.10 has neither, so there the same handlers use
    # wait_for and gather, which need it too.
    disp = FakeDispatcher(asyncio.get_running_loop())

    async def times_out(ctx: Context, item: Any) -> None:
        if sys.version_info >= (3, 11):
            async with asyncio.timeout(0.01):
                await asyncio.sleep(10)
        else:
            await asyncio.wait_for(asyncio.sleep(10), 0.01)

    async def in_time(ctx: Context, item: Any) -> None:
        if sys.version_info >= (3, 11):
            async with asyncio.timeout(10):
                async with asyncio.TaskGroup() as tg:
                    tg.create_task(asyncio.sleep(0.001))
                    tg.create_task(asyncio.sleep(0.002))
        else:
            await asyncio.wait_for(asyncio.gather(asyncio.sleep(0.001), asyncio.sleep(0.002)), 10)

    t1, _, _ = await start(disp, times_out, event=1)
    t2, _, _ = await start(disp, in_time, event=2)
    await asyncio.gather(t1, t2)
    assert sorted(disp.outcomes()) == [(1, OUTCOME_TRANSIENT, b"TimeoutError: "), (2, OUTCOME_OK, None)]


async def test_handler_methods_that_are_not_coroutine_functions() -> None:
    loop = asyncio.get_running_loop()
    disp = FakeDispatcher(loop)
    fut: asyncio.Future[None] = loop.create_future()
    seen: list[Any] = []

    def returns_none(ctx: Context, item: Any) -> None:
        seen.append(asyncio.current_task())

    def returns_future(ctx: Context, item: Any) -> asyncio.Future[None]:
        return fut

    def raises_stop(ctx: Context, item: Any) -> None:
        raise StopIteration

    t1, _, _ = await start(disp, returns_none, event=1)
    t2, _, done2 = await start(disp, returns_future, event=2)
    t3, _, _ = await start(disp, raises_stop, event=3)
    assert seen == [t1] and not done2
    fut.set_result(None)
    await t2
    outcomes = sorted(disp.outcomes())
    assert outcomes[0][:2] == (1, OUTCOME_TRANSIENT) and outcomes[0][2].startswith(b"TypeError")  # type: ignore[union-attr]
    assert outcomes[1] == (2, OUTCOME_OK, None)
    assert outcomes[2][:2] == (3, OUTCOME_TRANSIENT) and b"StopIteration" in outcomes[2][2]  # type: ignore[operator]


async def test_keyboard_interrupt_is_reported_then_raised() -> None:
    disp = FakeDispatcher(asyncio.get_running_loop())

    async def interrupted(ctx: Context, item: Any) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        await start(disp, interrupted, event=1)
    assert disp.outcomes() == [(1, OUTCOME_TRANSIENT, b"the handler was interrupted")]


async def test_sentry_reporting_happens_once(monkeypatch: pytest.MonkeyPatch) -> None:
    captured: list[BaseException] = []
    monkeypatch.setenv("SENTRY_DSN", "https://key@example.invalid/1")
    monkeypatch.setitem(sys.modules, "sentry_sdk", types.SimpleNamespace(capture_exception=captured.append))
    disp = FakeDispatcher(asyncio.get_running_loop())

    class Failing(EventHandler):
        async def on_message(self, context: Context, message: Message) -> None:
            raise ValueError("direct")

        async def on_timer(self, context: Context, timer: Timer) -> None:
            raise ValueError("wrapped")

    failing = Failing()
    wrapped = ProsodyHandler(failing)
    await start(disp, failing.on_message, event=1)  # the dispatcher's direct call: reported by the task
    task, ctx, _ = await start(
        disp, wrapped.on_timer, event=2, direct=False, args=(None, None, {}, None)
    )  # through ProsodyHandler: reported there, not again by the task
    assert [str(e) for e in captured] == ["direct", "wrapped"]


# ---------------------------------------------------------------- Dispatcher


class FakeLib:
    """Serves prepared batches to prosody_client_poll; records prosody_py_complete."""

    def __init__(self, ffi: Any, lib: Any) -> None:
        self.ffi, self.lib = ffi, lib
        self.batches: list[list[dict[str, Any]]] = []
        self.ok: list[int] = []
        self.failed: list[tuple[int, int, str | None]] = []
        self.keep: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.lib, name)

    def prosody_client_poll(self, client: int, buf: Any, capacity: int, size: int, count: Any, err: Any) -> int:
        assert size == self.ffi.sizeof("prosody_event")
        batch = self.batches.pop(0) if self.batches else []
        assert len(batch) <= capacity
        for i, spec in enumerate(batch):
            ev = buf[i]
            ev.event = spec["event"]
            ev.kind = spec.get("kind", 1)
            ev.partition = spec.get("partition", 0)
            ev.offset = spec.get("offset", 0)
            ev.timestamp_ms = spec.get("timestamp_ms", 0)
            ev.time_ms = spec.get("time_ms", 0)
            for field in ("topic", "key", "payload", "traceparent", "tracestate", "baggage"):
                data = spec.get(field, b"")
                c = self.ffi.new("char[]", data or b"\0")
                self.keep.append(c)
                setattr(ev, field, self.ffi.cast("uint8_t *" if field == "payload" else "char *", c))
                setattr(ev, field + "_len", len(data))
        count[0] = len(batch)
        return 0

    def prosody_py_complete(self, ok: Any, n_ok: int, failed: Any, n_failed: int) -> int:
        self.ok.extend(ok[i] for i in range(n_ok))
        for i in range(n_failed):
            text = self.ffi.string(failed[i].message).decode() if failed[i].message else None
            self.failed.append((failed[i].event, failed[i].outcome, text))
        return 0


@pytest.fixture
def fake_lib(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLib]:
    ffi, lib = _native.load()
    fake = FakeLib(ffi, lib)
    monkeypatch.setattr(_native, "load", lambda: (ffi, fake))
    yield fake


async def drain(disp: _dispatch.Dispatcher) -> None:
    """Runs _drain from a loop callback, as the reader does; re-raises what it raised."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()

    def callback() -> None:
        try:
            disp._drain()
            fut.set_result(None)
        except BaseException as e:
            fut.set_exception(e)

    loop.call_soon(callback)
    await fut


def dispatcher(handler: EventHandler) -> _dispatch.Dispatcher:
    return _dispatch.Dispatcher(1, asyncio.get_running_loop(), ProsodyHandler(handler), -1)


async def test_messages_decode_as_before(fake_lib: FakeLib) -> None:
    payloads = [
        b'{"n": 1, "text": "h\xc3\xa9llo", "list": [1, 2.5, null, true]}',
        b'  [1, 2]\n',  # whitespace around the document
        b'"just a string"',
        b'12345678901234567890',
        b'\xef\xbb\xbf{"bom": 1}',  # a UTF-8 BOM: json.loads on bytes accepts it
        b'{"a": {"b": {"c": [{}]}}}',
    ]
    ts = 1_700_000_000_123
    fake_lib.batches = [[
        {"event": i + 1, "topic": b"orders" if i % 2 else b"payments", "key": f"k\u00e9{i}".encode(),
         "payload": p, "partition": i, "offset": 100 + i, "timestamp_ms": ts + i // 2}
        for i, p in enumerate(payloads)
    ]]
    handler = Recorder()
    await drain(dispatcher(handler))
    assert fake_lib.ok == list(range(1, len(payloads) + 1)) and fake_lib.failed == []
    for i, (m, p) in enumerate(zip(handler.messages, payloads)):
        expected = Message(
            "orders" if i % 2 else "payments", i, 100 + i,
            datetime.fromtimestamp((ts + i // 2) / 1000, timezone.utc), f"k\u00e9{i}", json.loads(p),
        )
        assert m == expected
        assert type(m) is Message
        with pytest.raises(FrozenInstanceError):
            m.key = "x"  # type: ignore[misc]


async def test_the_contexts_of_polled_events_start_as_new_ones(fake_lib: FakeLib) -> None:
    seen: list[Context] = []
    fake_lib.batches = [[{"event": 2**63 + 5, "topic": b"t", "key": b"k", "payload": b"{}"}]]
    disp = dispatcher(Recorder(on_message=lambda ctx, m: seen.append(ctx)))
    await drain(disp)
    reference = Context(disp, 2**63 + 5)
    reference._done = True  # the handler returned
    assert type(seen[0]) is Context
    assert {n: getattr(seen[0], n) for n in Context.__slots__} == {n: getattr(reference, n) for n in Context.__slots__}


async def test_an_interrupt_while_building_loses_no_event(fake_lib: FakeLib, monkeypatch: pytest.MonkeyPatch) -> None:
    """A KeyboardInterrupt raised in json.loads (Python code: a signal can land there) while a batch is
    built: that event is retried (transient), the interruption goes on, and the rest of the batch runs."""

    def loads(data: bytes) -> Any:
        if data == b" {}":
            raise KeyboardInterrupt
        return json.loads(data)

    monkeypatch.setattr(_dispatch, "loads", loads)
    fake_lib.batches = [[{"event": i, "topic": b"t", "key": b"k%d" % i, "payload": p}
                         for i, p in enumerate([b"{}", b" {}", b"{}", b" [1]"], 1)]]
    handler = Recorder()
    with pytest.raises(KeyboardInterrupt):
        await drain(dispatcher(handler))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert [m.key for m in handler.messages] == ["k1", "k3", "k4"]
    assert handler.messages[2].payload == [1]
    assert fake_lib.ok == [1, 3, 4]
    assert fake_lib.failed == [(2, OUTCOME_TRANSIENT, "building the event was interrupted")]


def test_the_builder_refuses_a_context_slot_it_has_no_start_for() -> None:
    class Wider(Context):
        __slots__ = ("_extra",)

    ffi, _ = _native.load()
    buf = ffi.new("prosody_event[]", 1)
    args = (buf, int(ffi.cast("uintptr_t", buf)), 1, Message, Timer, json.JSONDecoder().scan_once, json.loads,
            datetime.fromtimestamp, timezone.utc)
    with pytest.raises(TypeError, match="no initial value for Context._extra"):
        _batch.Builder(*args, Wider, {"_cancelled": False}, None)
    with pytest.raises(TypeError, match="message and context must be classes"):
        _batch.Builder(*args, object(), {}, None)
    # A builder whose second init fails refuses to build rather than use half a state.
    builder = _batch.Builder(*args, Context, _INITIAL_SLOTS, None)
    assert builder.build(0) == []
    with pytest.raises(TypeError):
        builder.__init__(*args, Wider, {"_cancelled": False}, None)  # type: ignore[misc]
    with pytest.raises(ValueError, match="not initialised"):
        builder.build(1)


async def test_timestamps_are_exact_in_every_range(fake_lib: FakeLib) -> None:
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    stamps = [
        0, 1, 999, 1000, 86_399_999, 86_400_000,  # the first day
        951_782_400_000, 951_868_799_999,  # 2000-02-29 (a leap day in a century year)
        4_107_542_400_000,  # 2100-03-01 (2100 is no leap year)
        1_700_000_000_123, 1_767_225_599_999,  # now-ish, the last ms of 2025
        253_402_300_799_999,  # the last millisecond of year 9999
        -1, -1000, -62_135_596_800_000,  # before 1970: datetime.fromtimestamp itself
    ]
    fake_lib.batches = [[
        {"event": i + 1, "topic": b"t", "key": b"k", "payload": b"{}", "timestamp_ms": ts}
        for i, ts in enumerate(stamps)
    ] + [{"event": 100, "kind": 2, "topic": b"t", "key": b"k", "time_ms": 1_893_456_000_000}]]
    handler = Recorder()
    await drain(dispatcher(handler))
    assert fake_lib.failed == []
    got = [m.timestamp for m in handler.messages]
    assert got == [epoch + timedelta(milliseconds=ts) for ts in stamps]
    assert all(t.tzinfo is timezone.utc for t in got)
    for ts, t in zip(stamps, got):
        if ts < 2**33 * 1000:  # before 2242: datetime.fromtimestamp's float still keeps the microseconds
            assert t == datetime.fromtimestamp(ts / 1000, timezone.utc)
    assert handler.timers == [Timer("k", datetime(2030, 1, 1, tzinfo=timezone.utc))]


async def test_timestamps_outside_datetime_fail_the_message(fake_lib: FakeLib) -> None:
    fake_lib.batches = [[
        {"event": 1, "topic": b"t", "key": b"k", "payload": b"{}", "timestamp_ms": 253_402_300_800_000},
        {"event": 2, "topic": b"t", "key": b"k", "payload": b"{}", "timestamp_ms": -2**62},
        {"event": 3, "topic": b"t", "key": b"k", "payload": b"{}", "timestamp_ms": 5},
    ]]
    handler = Recorder()
    await drain(dispatcher(handler))
    assert fake_lib.ok == [3]
    assert [(e, o) for e, o, _ in fake_lib.failed] == [(1, OUTCOME_PERMANENT), (2, OUTCOME_PERMANENT)]
    assert all(t and t.split(":")[0] in ("ValueError", "OverflowError", "OSError") for _, _, t in fake_lib.failed)


async def test_building_a_batch_keeps_no_references(fake_lib: FakeLib) -> None:
    """Every object the builder makes is released with the batch (refcounts return to where they were)."""
    handler = Recorder()
    disp = dispatcher(handler)
    spec = [
        {"event": 1, "topic": b"t", "key": b"key-one", "payload": b'{"a": [1, "x"]}', "timestamp_ms": 7},
        {"event": 2, "topic": b"u", "key": b"key-one", "payload": b' {"a": 1}', "timestamp_ms": 8},
        {"event": 3, "topic": b"u", "key": b"key-one", "payload": b"{", "timestamp_ms": 8},
        {"event": 4, "kind": 2, "topic": b"u", "key": b"key-one", "time_ms": 1000},
        {"event": 5, "kind": 3},
        {"event": 6, "topic": b"u", "key": b"key-one", "payload": b"{}", "traceparent": b"00-x", "baggage": b"b=1"},
    ]
    for _ in range(3):  # warm every cache (topics, timestamps, interned ints)
        fake_lib.batches = [spec]
        await drain(disp)
    handler.messages.clear()
    handler.timers.clear()
    gc.collect()  # garbage of earlier tests (messages in cycles) must not be freed while counting
    before = sys.gettotalrefcount() if hasattr(sys, "gettotalrefcount") else None
    counts = {id(o): sys.getrefcount(o) for o in (None, Message, Timer, timezone.utc)}
    for _ in range(50):
        fake_lib.batches = [spec]
        await drain(disp)
        handler.messages.clear()
        handler.timers.clear()
    assert {id(o): sys.getrefcount(o) for o in (None, Message, Timer, timezone.utc)} == counts
    if before is not None:  # a debug build counts every reference
        assert sys.gettotalrefcount() - before < 100
    # A leaked key, payload, integer or tuple per event would be at least
    # 6 x 500 x 28 bytes here.
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for _ in range(500):
            fake_lib.batches = [spec]
            await drain(disp)
            handler.messages.clear()
            handler.timers.clear()
            fake_lib.keep.clear()  # the batch's bytes (every event is done)
            fake_lib.ok.clear()
            fake_lib.failed.clear()
        grown = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert grown < 40_000


async def test_undecodable_events_fail_permanently(fake_lib: FakeLib) -> None:
    fake_lib.batches = [[
        {"event": 1, "topic": b"t", "key": b"k", "payload": b'{"a": '},
        {"event": 2, "topic": b"t", "key": b"k", "payload": b'{"a": 1} x'},
        {"event": 3, "topic": b"t", "key": b"\xff", "payload": b"{}"},
        {"event": 4, "topic": b"t", "key": b"k", "payload": b"{}"},
    ]]
    handler = Recorder()
    await drain(dispatcher(handler))
    assert fake_lib.ok == [4] and len(handler.messages) == 1
    assert [(e, o) for e, o, _ in fake_lib.failed] == [(i, OUTCOME_PERMANENT) for i in (1, 2, 3)]
    texts = [t or "" for _, _, t in fake_lib.failed]
    assert texts[0].startswith("JSONDecodeError") and "Extra data" in texts[1]
    assert texts[2].startswith("UnicodeDecodeError")


async def test_timers_large_payloads_and_several_batches(fake_lib: FakeLib) -> None:
    big = json.dumps({"data": "x" * 400_000}).encode()  # more than the initial arena
    fake_lib.batches = [
        [{"event": i, "topic": b"t", "key": b"k", "payload": b"{}"} for i in range(1, 257)],
        [{"event": 300, "kind": 2, "topic": b"t", "key": b"timer-key", "time_ms": 1_700_000_000_000},
         {"event": 301, "topic": b"t", "key": b"big", "payload": big}],
    ]
    handler = Recorder()
    await drain(dispatcher(handler))  # a full batch: polls again
    assert len(handler.messages) == 257 and handler.messages[-1].payload == json.loads(big)
    assert handler.timers == [Timer("timer-key", datetime.fromtimestamp(1_700_000_000, timezone.utc))]
    assert sorted(fake_lib.ok) == list(range(1, 257)) + [300, 301]


async def test_trace_context_reaches_the_handler(fake_lib: FakeLib) -> None:
    from opentelemetry import baggage, trace

    trace_id = 0x0AF7651916CD43DD8448EB211C80319C
    seen: list[tuple[int, object]] = []

    def record(ctx: Context, m: Message) -> None:
        seen.append((trace.get_current_span().get_span_context().trace_id, baggage.get_baggage("tenant")))

    fake_lib.batches = [[
        {"event": 1, "topic": b"t", "key": b"k", "payload": b"{}",
         "traceparent": b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
         "tracestate": b"vendor=1", "baggage": b"tenant=acme"},
        {"event": 2, "topic": b"t", "key": b"k2", "payload": b"{}"},
    ]]
    await drain(dispatcher(Recorder(on_message=record)))
    assert seen[0] == (trace_id, "acme")
    assert seen[1][0] != trace_id and seen[1][1] is None
    assert fake_lib.ok == [1, 2]


async def test_waiting_handlers_cancellation_notices_and_abort(fake_lib: FakeLib) -> None:
    results: dict[str, bool] = {}

    async def wait_cancel(ctx: Context, m: Message) -> None:
        if m.key == "quick":
            return
        if m.key == "notice":
            await ctx.on_cancel()
            results["notice"] = ctx.should_cancel()
        else:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                results["aborted"] = True
                raise

    fake_lib.batches = [[
        {"event": 1, "topic": b"t", "key": b"notice", "payload": b"{}"},
        {"event": 2, "topic": b"t", "key": b"abort", "payload": b"{}"},
        {"event": 3, "topic": b"t", "key": b"quick", "payload": b"{}"},
    ], [{"event": 1, "kind": 3}, {"event": 3, "kind": 3}, {"event": 99, "kind": 3}]]
    disp = dispatcher(Recorder(on_message=wait_cancel))
    await drain(disp)
    assert fake_lib.ok == [3] and set(disp._inflight) == {1, 2}
    await drain(disp)  # the notices: 1 is waiting; 3 is done already; 99 is unknown
    for _ in range(5):
        await asyncio.sleep(0)
    assert results == {"notice": True} and fake_lib.ok == [3, 1]
    disp.abort()
    for _ in range(5):
        await asyncio.sleep(0)
    assert results == {"notice": True, "aborted": True}
    assert fake_lib.failed == [(2, OUTCOME_TRANSIENT, "the handler was cancelled")] and not disp._inflight


async def test_handlers_run_in_the_subscribers_context(fake_lib: FakeLib) -> None:
    seen: list[str] = []

    def record(ctx: Context, m: Message) -> None:
        seen.append(VAR.get())
        VAR.set(m.key)

    fake_lib.batches = [[{"event": i, "topic": b"t", "key": f"k{i}".encode(), "payload": b"{}"} for i in (1, 2)]]
    token = VAR.set("subscriber")
    try:
        await drain(dispatcher(Recorder(on_message=record)))
    finally:
        VAR.reset(token)
    assert seen == ["subscriber", "subscriber"]


async def test_an_interrupt_leaves_the_rest_of_the_batch_for_later(fake_lib: FakeLib) -> None:
    def interrupt(ctx: Context, m: Message) -> None:
        if m.key == "stop":
            raise SystemExit(3)

    handler = Recorder(on_message=interrupt)
    fake_lib.batches = [[{"event": i, "topic": b"t", "key": k, "payload": b"{}"}
                         for i, k in enumerate([b"a", b"stop", b"b", b"c"], 1)]]
    with pytest.raises(SystemExit):
        await drain(dispatcher(handler))  # the rest is scheduled before this test resumes
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert [m.key for m in handler.messages] == ["a", "stop", "b", "c"]
    assert fake_lib.ok == [1, 3, 4]
    assert fake_lib.failed == [(2, OUTCOME_TRANSIENT, "the handler was interrupted")]


def test_the_completion_helper_accepts_unknown_events() -> None:
    ffi, lib = _native.load()
    ok = ffi.new("uint64_t[]", [2**63 + 1, 2**63 + 2])
    failed = ffi.new("prosody_completion[]", 1)
    failed[0].event = 2**63 + 3
    failed[0].outcome = OUTCOME_TRANSIENT
    text = ffi.new("char[]", b"failure")
    failed[0].message = text
    # Queued for the helper thread, which gets INVALID_HANDLE from the library and drops them.
    assert lib.prosody_py_complete(ok, 2, failed, 1) == _native.OK
    assert lib.prosody_py_complete(ffi.NULL, 0, ffi.NULL, 0) == _native.OK


async def test_a_handler_releasing_the_client_stops_the_batch(fake_lib: FakeLib) -> None:
    disp: _dispatch.Dispatcher

    def release(ctx: Context, m: Message) -> None:
        if m.key == "release":
            disp.abort()  # what ProsodyClient._release does

    handler = Recorder(on_message=release)
    disp = dispatcher(handler)
    fake_lib.batches = [[{"event": i, "topic": b"t", "key": k, "payload": b"{}"}
                         for i, k in enumerate([b"a", b"release", b"b"], 1)]]
    await drain(disp)
    assert [m.key for m in handler.messages] == ["a", "release"]


async def test_a_patched_prosody_handler_is_always_called(
    fake_lib: FakeLib, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    original = ProsodyHandler.on_message

    async def patched(self: ProsodyHandler, *args: Any) -> None:
        calls.append("patched")
        await original(self, *args)

    monkeypatch.setattr(ProsodyHandler, "on_message", patched)
    handler = Recorder()
    fake_lib.batches = [[{"event": 1, "topic": b"t", "key": b"k", "payload": b"{}"}]]
    await drain(dispatcher(handler))
    assert calls == ["patched"] and len(handler.messages) == 1 and fake_lib.ok == [1]
