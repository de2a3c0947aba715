"""Keyed state without a broker: the wrappers over fake natives, and the native layer over a fake library.

The wrapper tests (python-api.md §9) drive ``ValueState``, ``MapState``,
``DequeState`` and ``_StateScan`` over plain Python objects with the native
method names. The native-layer tests drive ``Context.state`` and the native
handles (prosody/_state.py) over a fake of the C ABI's keyed-state section:
an in-memory store that answers ``prosody_state_call`` and
``prosody_cursor_next`` from a thread of its own, through the real
``_prosody_on_state`` trampoline, as the library does.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import queue
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import prosody
from prosody import (
    Context,
    DequeState,
    Direction,
    MapState,
    Message,
    NullValueError,
    PermanentStateError,
    StateError,
    TransientStateError,
    ValueState,
    _native,
    _state,
)
from prosody._task import OUTCOME_OK, OUTCOME_TRANSIENT, HandlerTask
from prosody.state import _StateScan

# ---------------------------------------------------------------- wrappers over fake natives


class Recorded:
    """A fake native handle: every method records its call and returns a settled future."""

    def __init__(self, results: dict[str, Any] | None = None) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.results = results or {}

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)

        def method(*args: Any) -> Any:
            self.calls.append((name, args))
            result = self.results.get(name)
            if name in ("scan", "keys"):
                return result
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            fut.set_result(result(*args) if callable(result) else result)
            return fut

        return method


class FakeScan:
    def __init__(self, items: list[Any]) -> None:
        self.items = list(items)
        self.closed = 0

    async def __anext__(self) -> Any:
        if not self.items:
            raise StopAsyncIteration
        return self.items.pop(0)

    async def aclose(self) -> None:
        self.closed += 1


async def test_value_state_calls_its_native_methods() -> None:
    native = Recorded({"get": 5})
    state: ValueState[int] = ValueState(native)
    assert state._native is native
    assert await state.get() == 5
    await state.set(6)
    await state.clear()
    await state.commit()
    await state.rollback()
    assert native.calls == [("get", ()), ("set", (6,)), ("clear", ()), ("commit", ()), ("rollback", ())]


async def test_writing_none_raises_null_value_error_naming_the_way_to_delete() -> None:
    native = Recorded()
    with pytest.raises(NullValueError, match=r"clear\(\)") as info:
        await ValueState(native).set(None)
    assert isinstance(info.value, TransientStateError) and isinstance(info.value, ValueError)
    assert isinstance(info.value, StateError) and not info.value.is_permanent
    with pytest.raises(NullValueError, match=r"remove\(key\)"):
        await MapState(native).set("k", None)
    with pytest.raises(TransientStateError):
        await DequeState(native).append(None)
    with pytest.raises(TransientStateError):
        await DequeState(native).appendleft(None)
    assert native.calls == []


@pytest.mark.parametrize("stored", [0, False, "", [], {}, 0.0])
async def test_map_get_returns_falsy_values_and_the_default_only_for_none(stored: Any) -> None:
    state: MapState[Any] = MapState(Recorded({"get": stored}))
    got = await state.get("k", "default")
    assert got == stored and type(got) is type(stored)
    assert await MapState(Recorded({"get": None})).get("k", "default") == "default"
    assert await MapState(Recorded({"get": None})).get("k") is None


async def test_map_state_calls_its_native_methods() -> None:
    native = Recorded({"contains_key": 1, "get_many": lambda keys: [None if k == "x" else k.upper() for k in keys]})
    state: MapState[str] = MapState(native)
    assert await state.contains("a") is True
    assert await state.get_many(["a", "x", "a"]) == ["A", None, "A"]
    await state.set("a", "v")
    await state.remove("a")
    await state.clear()
    await state.commit()
    await state.rollback()
    assert [c[0] for c in native.calls] == [
        "contains_key", "get_many", "set", "remove", "clear", "commit", "rollback",
    ]
    assert native.calls[2] == ("set", ("a", "v")) and native.calls[3] == ("remove", ("a",))


async def test_map_scans_call_scan_and_keys_with_the_direction_token() -> None:
    entries = [("a", 1), ("b", 2)]
    native = Recorded()
    state: MapState[int] = MapState(native)
    native.results["scan"] = FakeScan(entries)
    assert [e async for e in state.items(Direction.BACKWARD)] == entries
    native.results["keys"] = FakeScan(["a", "b"])
    assert [k async for k in state.keys()] == ["a", "b"]
    native.results["scan"] = FakeScan(entries)
    assert [v async for v in state.values()] == [1, 2]
    native.results["keys"] = FakeScan(["a"])
    assert [k async for k in state] == ["a"]  # like a dict: keys
    assert native.calls == [("scan", ("backward",)), ("keys", ("forward",)), ("scan", ("forward",)),
                            ("keys", ("forward",))]
    # Something that is not a Direction reaches the native layer as it is (which refuses it).
    native.results["scan"] = FakeScan([])
    state.items("sideways")  # type: ignore[arg-type]
    assert native.calls[-1] == ("scan", ("sideways",))


async def test_deque_state_calls_its_native_methods() -> None:
    native = Recorded({"pop_back": 3, "pop_front": 1, "peek_back": 3, "peek_front": 1, "get": "x",
                       "len": 2, "is_empty": 0})
    state: DequeState[Any] = DequeState(native)
    await state.append(1)
    await state.appendleft(0)
    assert (await state.pop(), await state.popleft(), await state.peek(), await state.peekleft()) == (3, 1, 3, 1)
    assert await state.get(4) == "x"
    size = await state.size()
    assert size == 2 and type(size) is int
    assert await state.is_empty() is False
    native.results["scan"] = FakeScan([1, 2])
    assert [x async for x in state.values(Direction.BACKWARD)] == [1, 2]
    native.results["scan"] = FakeScan([1])
    assert [x async for x in state] == [1]
    assert native.calls == [
        ("push_back", (1,)), ("push_front", (0,)), ("pop_back", ()), ("pop_front", ()), ("peek_back", ()),
        ("peek_front", ()), ("get", (4,)), ("len", ()), ("is_empty", ()), ("scan", ("backward",)),
        ("scan", ("forward",)),
    ]


async def test_deque_get_converts_the_index_as_an_unsigned_32_bit_integer() -> None:
    native = Recorded({"get": None})
    state: DequeState[int] = DequeState(native)
    with pytest.raises(TypeError):
        await state.get(1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await state.get("1")  # type: ignore[arg-type]
    with pytest.raises(OverflowError):
        await state.get(-1)
    with pytest.raises(OverflowError):
        await state.get(2**32)
    assert native.calls == []
    assert await state.get(2**32 - 1) is None  # past the end
    assert await state.get(0) is None
    assert native.calls == [("get", (2**32 - 1,)), ("get", (0,))]


async def test_state_scan_transforms_and_closes_its_native_cursor() -> None:
    native = FakeScan([1, 2, 3])
    scan = _StateScan(native, lambda x: x * 10)
    assert scan.__aiter__() is scan
    assert await scan.__anext__() == 10
    async with contextlib.aclosing(scan) as s:
        assert [x async for x in s] == [20, 30]
    assert native.closed == 1
    await scan.aclose()
    assert native.closed == 2  # delegated each time; the native cursor closes once (below)


# ---------------------------------------------------------------- the native layer over a fake library


class FakeStateLib:
    """The C ABI's keyed-state section over an in-memory store; everything else is the real library.

    Completions are reported from a worker thread through the callback the
    caller passed (the real ``_prosody_on_state``), one handle's in call
    order. Clearing ``gate`` holds them back.
    """

    REGISTERED = {"v": _state.KIND_VALUE, "m": _state.KIND_MAP, "d": _state.KIND_DEQUE,
                  "mv": _state.KIND_VALUE, "mm": _state.KIND_MAP, "md": _state.KIND_DEQUE}

    def __init__(self, ffi: Any, lib: Any) -> None:
        self.ffi, self.lib = ffi, lib
        self.handles: dict[int, str] = {}
        self.cursors: dict[int, list[list[tuple[bytes | None, bytes | None]]]] = {}
        self.values: dict[str, bytes] = {}
        self.maps: dict[str, dict[bytes, bytes]] = {}
        self.deques: dict[str, list[bytes]] = {}
        self.opened: list[tuple[int, str, int]] = []
        self.ops: list[tuple[int, dict[str, Any]]] = []
        self.released_states: list[int] = []
        self.released_cursors: list[int] = []
        self.next_status: tuple[int, str] | None = None
        self.gate = threading.Event()
        self.gate.set()
        self._next_handle = 100
        self._queue: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._worker = threading.Thread(target=self._run, daemon=True)
        self._worker.start()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.lib, name)

    def close(self) -> None:
        self.gate.set()
        self._queue.put(None)
        self._worker.join(5)

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            self.gate.wait()
            job()

    def _report(self, cb: Any, ud: Any, status: int, items: list[tuple[bytes | None, bytes | None]],
                number: int = 0, message: str | None = None) -> None:
        ffi = self.ffi

        def job() -> None:
            keep: list[Any] = []
            c_items = ffi.new("prosody_state_item[]", max(len(items), 1))
            for i, (k, v) in enumerate(items):
                if k is not None:
                    c_k = ffi.new("char[]", k)
                    keep.append(c_k)
                    c_items[i].key, c_items[i].key_len = c_k, len(k)
                if v is not None:
                    c_v = ffi.new("uint8_t[]", v)
                    keep.append(c_v)
                    c_items[i].value, c_items[i].value_len = c_v, len(v)
            c_msg = ffi.new("char[]", message.encode()) if message else ffi.NULL
            cb(ud, status, c_items if items else ffi.NULL, len(items), number, c_msg)

        self._queue.put(job)

    # ---- the ABI ----

    def prosody_event_state(self, event: int, name: bytes, name_len: int, kind: int, out: Any, err: Any) -> int:
        text = name[:name_len].decode()
        if self.REGISTERED.get(text) != kind:
            err[0] = self.lib_string(f'keyed-state collection "{text}" is not registered')
            return _native.ERR_PERMANENT
        self._next_handle += 1
        self.handles[self._next_handle] = text
        self.opened.append((event, text, kind))
        out[0] = self._next_handle
        return _native.OK

    def lib_string(self, text: str) -> Any:
        # A message the caller frees with prosody_free: none of the library's, so a no-op free.
        return self.ffi.NULL

    def prosody_state_call(self, state: int, op: int, args: Any, cb: Any, ud: Any, err: Any) -> int:
        ffi = self.ffi
        assert args.size == ffi.sizeof("prosody_state_args")
        name = self.handles[state]
        key = ffi.unpack(args.key, args.key_len) if args.key else None
        value = ffi.buffer(args.value, args.value_len)[:] if args.value else None
        keys = [ffi.unpack(args.keys[i].key, args.keys[i].key_len) for i in range(args.keys_len)]
        self.ops.append((op, {"key": key, "value": value, "keys": keys, "index": args.index}))
        if self.next_status is not None:
            status, message = self.next_status
            self.next_status = None
            self._report(cb, ud, status, [], 0, message)
            return _native.OK
        if value is not None and value.strip() == b"null":
            self._report(cb, ud, _native.ERR_NULL_VALUE, [], 0, "keyed state cannot store null")
            return _native.OK
        kind = self.REGISTERED[name]
        out: list[tuple[bytes | None, bytes | None]] = []
        number = 0
        if kind == _state.KIND_VALUE:
            if op == _state.OP_GET and name in self.values:
                out = [(None, self.values[name])]
            elif op == _state.OP_SET:
                assert value is not None
                self.values[name] = value
            elif op == _state.OP_CLEAR:
                self.values.pop(name, None)
        elif kind == _state.KIND_MAP:
            m = self.maps.setdefault(name, {})
            if op == _state.OP_GET and key in m:
                out = [(key, m[key])]
            elif op == _state.OP_SET:
                assert key is not None and value is not None
                m[key] = value
            elif op == _state.OP_REMOVE:
                m.pop(key, None)  # type: ignore[arg-type]
            elif op == _state.OP_CONTAINS:
                number = int(key in m)
            elif op == _state.OP_GET_MANY:
                out = [(k, m.get(k)) for k in keys]
            elif op == _state.OP_CLEAR:
                m.clear()
        else:
            d = self.deques.setdefault(name, [])
            if op == _state.OP_PUSH_BACK:
                d.append(value)  # type: ignore[arg-type]
            elif op == _state.OP_PUSH_FRONT:
                d.insert(0, value)  # type: ignore[arg-type]
            elif op in (_state.OP_POP_BACK, _state.OP_PEEK_BACK) and d:
                out = [(None, d.pop() if op == _state.OP_POP_BACK else d[-1])]
            elif op in (_state.OP_POP_FRONT, _state.OP_PEEK_FRONT) and d:
                out = [(None, d.pop(0) if op == _state.OP_POP_FRONT else d[0])]
            elif op == _state.OP_GET and args.index < len(d):
                out = [(None, d[args.index])]
            elif op == _state.OP_LEN:
                number = len(d)
            elif op == _state.OP_IS_EMPTY:
                number = int(not d)
            elif op == _state.OP_CLEAR:
                d.clear()
        self._report(cb, ud, _native.OK, out, number)
        return _native.OK

    def prosody_state_scan(self, state: int, direction: int, keys_only: int, out: Any, err: Any) -> int:
        assert direction in (0, 1)
        name = self.handles[state]
        items: list[tuple[bytes | None, bytes | None]]
        if self.REGISTERED[name] == _state.KIND_MAP:
            m = self.maps.get(name, {})
            items = [(k, None if keys_only else m[k]) for k in sorted(m, reverse=direction == 1)]
        else:
            d = self.deques.get(name, [])
            items = [(None, v) for v in (reversed(d) if direction == 1 else d)]
        self._next_handle += 1
        self.cursors[self._next_handle] = [items[i:i + 256] for i in range(0, len(items), 256)]
        out[0] = self._next_handle
        return _native.OK

    def prosody_cursor_next(self, cursor: int, cb: Any, ud: Any, err: Any) -> int:
        chunks = self.cursors[cursor]
        self._report(cb, ud, _native.OK, chunks.pop(0) if chunks else [])
        return _native.OK

    def prosody_cursor_release(self, cursor: int, err: Any) -> int:
        self.released_cursors.append(cursor)
        return _native.OK

    def prosody_state_release(self, state: int, err: Any) -> int:
        self.released_states.append(state)
        return _native.OK


class StateDispatcher:
    """What Context and HandlerTask use of a Dispatcher, with the fake library."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fake: FakeStateLib,
                 collections: dict[str, tuple[str, str]] | None = None) -> None:
        self.loop = loop
        self.fake = fake
        self.collections = collections if collections is not None else {
            "v": ("value", "json"), "m": ("map", "json"), "d": ("deque", "json"),
            "mv": ("value", "message"), "mm": ("map", "message"), "md": ("deque", "message"),
        }
        self._ok: list[int] = []
        self.completed: list[tuple[int, int, bytes | None, bool]] = []

    def library(self) -> tuple[Any, Any]:
        return self.fake.ffi, self.fake

    def _complete(self, event: int, outcome: int, text: bytes | None, waited: bool) -> None:
        self.completed.append((event, outcome, text, waited))

    def query_cancel(self, event: int) -> bool:
        return False


@pytest.fixture
def fake() -> Iterator[FakeStateLib]:
    ffi, lib = _native.load()
    f = FakeStateLib(ffi, lib)
    yield f
    f.close()


@pytest.fixture
async def ctx(fake: FakeStateLib) -> Context:
    return Context(StateDispatcher(asyncio.get_running_loop(), fake), 7)


V = prosody.value("v")
M = prosody.map("m")
D = prosody.deque("d")
MV = prosody.message_value("mv")
MM = prosody.message_map("mm")
MD = prosody.message_deque("md")


async def test_context_state_opens_each_collection_once_per_attempt(ctx: Context, fake: FakeStateLib) -> None:
    value, mapping, deque = ctx.state(V), ctx.state(M), ctx.state(D)
    assert (type(value), type(mapping), type(deque)) == (ValueState, MapState, DequeState)
    assert type(value._native) is _state.NativeValueState
    assert type(mapping._native) is _state.NativeMapState
    assert type(deque._native) is _state.NativeDequeState
    assert ctx.state(V) is value and ctx.state(prosody.value("v")) is value  # by kind, payload and name
    assert fake.opened == [(7, "v", 1), (7, "m", 2), (7, "d", 3)]


class Broken:
    def __init__(self, config: Any) -> None:
        self.config = config

    def to_config(self) -> Any:
        if isinstance(self.config, Exception):
            raise self.config
        return self.config


@pytest.mark.parametrize("definition", [
    object(),
    Broken(RuntimeError("boom")),
    Broken(["not", "a", "dict"]),
    Broken({"name": "v", "kind": "list", "payload": "json"}),
    Broken({"name": "v", "kind": "value", "payload": "xml"}),
    Broken({"name": "", "kind": "value", "payload": "json"}),
])
async def test_a_malformed_definition_is_a_transient_state_error(ctx: Context, definition: Any) -> None:
    with pytest.raises(TransientStateError):
        ctx.state(definition)


async def test_an_unregistered_or_mismatched_collection_is_a_permanent_state_error(ctx: Context) -> None:
    with pytest.raises(PermanentStateError):
        ctx.state(prosody.value("nope"))
    with pytest.raises(PermanentStateError):
        ctx.state(prosody.map("v"))  # registered as a value: the library refuses the kind
    with pytest.raises(PermanentStateError, match="message"):
        ctx.state(prosody.message_value("v"))  # registered with JSON items: refused here
    with pytest.raises(PermanentStateError, match="json"):
        ctx.state(prosody.value("mv"))


async def test_a_context_whose_attempt_ended_refuses_state(ctx: Context) -> None:
    ctx._done = True
    with pytest.raises(TransientStateError, match="no longer valid"):
        ctx.state(V)


async def test_values_maps_and_deques_round_trip_json(ctx: Context, fake: FakeStateLib) -> None:
    v = ctx.state(V)
    assert await v.get() is None
    await v.set({"n": 1, "s": "héllo", "l": [1, 2.5, None, True]})
    assert await v.get() == {"n": 1, "s": "héllo", "l": [1, 2.5, None, True]}
    assert fake.values["v"] == '{"n":1,"s":"héllo","l":[1,2.5,null,true]}'.encode()
    await v.clear()
    assert await v.get() is None

    m = ctx.state(M)
    await m.set("a", 0)
    await m.set("b", [1])
    assert await m.get("a", 9) == 0 and await m.get("zz", 9) == 9
    assert await m.contains("a") and not await m.contains("zz")
    assert await m.get_many(["b", "zz", "a", "b"]) == [[1], None, 0, [1]]
    assert await m.get_many([]) == []
    await m.remove("a")
    assert await m.get("a") is None

    d = ctx.state(D)
    await d.append(2)
    await d.append(3)
    await d.appendleft(1)
    assert (await d.size(), await d.is_empty()) == (3, False)
    assert (await d.get(0), await d.get(2), await d.get(3)) == (1, 3, None)
    assert (await d.peekleft(), await d.peek()) == (1, 3)
    assert (await d.popleft(), await d.pop(), await d.pop(), await d.pop()) == (1, 3, 2, None)
    assert await d.is_empty()
    assert fake.ops[-1][0] == _state.OP_IS_EMPTY


async def test_message_collections_round_trip_every_field(ctx: Context, fake: FakeStateLib) -> None:
    ts = datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=timezone.utc)
    msg: Message[Any] = Message("orders", 3, 42, ts, "k-é", {"amount": 5, "tags": ["a"]})
    mv = ctx.state(MV)
    await mv.set(msg)
    assert json.loads(fake.values["mv"]) == {
        "topic": "orders", "partition": 3, "offset": 42, "key": "k-é",
        "timestamp": int(ts.timestamp() * 1000), "payload": {"amount": 5, "tags": ["a"]},
    }
    back = await mv.get()
    assert back == msg and type(back) is Message
    assert back is not None and back.timestamp.tzinfo is not None
    # Another zone, and sub-millisecond digits: the same instant, to the millisecond.
    later: Message[Any] = Message("t", 0, 1, datetime(2024, 1, 1, 2, 0, 0, 5999, tzinfo=timezone(timedelta(hours=2))), "k", None)
    md = ctx.state(MD)
    await md.append(later)
    got = await md.pop()
    assert got is not None and got.timestamp == datetime(2024, 1, 1, 0, 0, 0, 5000, tzinfo=timezone.utc)
    assert got.payload is None
    mm = ctx.state(MM)
    await mm.set("x", msg)
    assert [e async for e in mm.items()] == [("x", msg)]


@pytest.mark.parametrize("bad", [object(), lambda: 1, float("nan"), {1j: 2}, "\ud800"])
async def test_an_unrepresentable_value_is_a_transient_state_error(ctx: Context, bad: Any) -> None:
    with pytest.raises(TransientStateError) as info:
        await ctx.state(V).set(bad)
    assert not info.value.is_permanent


async def test_items_that_are_not_what_the_collection_stores_are_transient(ctx: Context) -> None:
    msg: Message[Any] = Message("t", 0, 0, datetime.now(timezone.utc), "k", 1)
    with pytest.raises(TransientStateError, match="JSON collection"):
        await ctx.state(V).set(msg)  # type: ignore[arg-type]
    with pytest.raises(TransientStateError, match="Message"):
        await ctx.state(MV).set({"topic": "t"})  # type: ignore[arg-type]
    with pytest.raises(TransientStateError, match="timezone-aware"):
        await ctx.state(MD).append(Message("t", 0, 0, datetime.now(), "k", 1))
    with pytest.raises(TypeError):
        await ctx.state(M).get(1)  # type: ignore[call-overload]


async def test_library_statuses_become_state_errors(ctx: Context, fake: FakeStateLib) -> None:
    v = ctx.state(V)
    cases = [
        (_native.ERR_NULL_VALUE, NullValueError), (_native.ERR_TRANSIENT, TransientStateError),
        (_native.ERR_TERMINAL, TransientStateError), (_native.ERR_PERMANENT, PermanentStateError),
    ]
    for status, cls in cases:
        fake.next_status = (status, f"failed with {status}")
        with pytest.raises(cls, match=f"failed with {status}$"):
            await v.get()
    assert await v.get() is None  # still usable


async def fill(m: MapState[Any], n: int) -> None:
    for i in range(n):
        await m.set(f"k{i:04d}", i)


async def test_map_scans_are_ordered_and_distinct_across_chunks(ctx: Context, fake: FakeStateLib) -> None:
    m = ctx.state(M)
    await fill(m, 600)
    expected = [f"k{i:04d}" for i in range(600)]
    assert [k async for k in m.keys()] == expected
    assert [k async for k in m.keys(Direction.BACKWARD)] == expected[::-1]
    assert [k async for k, _ in m.items(Direction.BACKWARD)] == expected[::-1]
    assert [v async for v in m.values()] == list(range(600))
    assert len(fake.released_cursors) == 4  # each released once it ended


async def test_concurrent_pulls_share_chunks_without_duplicates_or_loss(ctx: Context) -> None:
    m = ctx.state(M)
    await fill(m, 600)
    scan = m.keys()

    async def pull() -> list[str]:
        got = []
        async for k in scan:
            got.append(k)
            if len(got) % 7 == 0:
                await asyncio.sleep(0)
        return got

    parts = await asyncio.gather(*(pull() for _ in range(5)))
    seen = [k for part in parts for k in part]
    assert sorted(seen) == [f"k{i:04d}" for i in range(600)] and len(set(seen)) == 600


async def test_aclose_after_a_pull_closes_the_cursor_once(ctx: Context, fake: FakeStateLib) -> None:
    m = ctx.state(M)
    await fill(m, 3)
    scan = m.items()
    assert await scan.__anext__() == ("k0000", 0)
    async with contextlib.aclosing(scan):
        pass
    await scan.aclose()
    assert len(fake.released_cursors) == 1
    with pytest.raises(StopAsyncIteration):
        await scan.__anext__()
    ctx._done = True
    _state.end_states(ctx)
    assert len(fake.released_cursors) == 1


async def test_cancelling_a_pending_pull_leaves_the_scan_and_handle_usable(ctx: Context, fake: FakeStateLib) -> None:
    m = ctx.state(M)
    await fill(m, 300)
    scan = m.keys()
    fake.gate.clear()  # the first chunk is held back
    waiter = asyncio.ensure_future(scan.__anext__())
    await asyncio.sleep(0.05)
    assert not waiter.done()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    fake.gate.set()
    assert [k async for k in scan] == [f"k{i:04d}" for i in range(300)]  # nothing lost
    assert await m.get("k0001") == 1


async def test_a_bad_direction_raises_at_once_naming_both(ctx: Context) -> None:
    for state in (ctx.state(M), ctx.state(D)):
        with pytest.raises(TransientStateError) as info:
            state._native.scan("sideways")
        assert "forward" in str(info.value) and "backward" in str(info.value)
    with pytest.raises(TransientStateError, match="forward"):
        ctx.state(M).items("up")  # type: ignore[arg-type]  # synchronous: no await


async def test_handles_and_scans_end_with_their_attempt(fake: FakeStateLib) -> None:
    disp = StateDispatcher(asyncio.get_running_loop(), fake)
    kept: dict[str, Any] = {}

    async def handler(ctx: Context, item: Any) -> None:
        m = ctx.state(M)
        await fill(m, 300)
        scan = m.keys()
        assert await scan.__anext__() == "k0000"
        kept.update(ctx=ctx, m=m, scan=scan, d=ctx.state(D))

    ctx = Context(disp, 9)
    task = HandlerTask(loop=disp.loop)
    task._pctx = ctx
    task._context = contextvars.copy_context()
    disp.loop.call_soon(lambda: task._context.run(task._first, handler, ctx, None))
    await task
    assert disp.completed == [(9, OUTCOME_OK, None, True)]
    assert sorted(fake.released_states) == sorted(fake.handles)  # both handles
    assert len(fake.released_cursors) == 1
    ops = len(fake.ops)
    with pytest.raises(TransientStateError, match="no longer valid"):
        await kept["m"].get("k0000")
    with pytest.raises(TransientStateError, match="no longer valid"):
        await kept["d"].append(1)
    with pytest.raises(TransientStateError, match="no longer valid"):
        await kept["scan"].__anext__()
    with pytest.raises(TransientStateError, match="no longer valid"):
        kept["m"].items()
    with pytest.raises(TransientStateError, match="no longer valid"):
        kept["ctx"].state(M)
    assert len(fake.ops) == ops  # the library was not called


async def test_a_failed_attempt_ends_its_handles_too(fake: FakeStateLib) -> None:
    disp = StateDispatcher(asyncio.get_running_loop(), fake)

    async def handler(ctx: Context, item: Any) -> None:
        await ctx.state(V).set(1)
        raise RuntimeError("boom")

    ctx = Context(disp, 3)
    task = HandlerTask(loop=disp.loop)
    task._pctx = ctx
    task._context = contextvars.copy_context()
    disp.loop.call_soon(lambda: task._context.run(task._first, handler, ctx, None))
    await task
    assert disp.completed[0][:2] == (3, OUTCOME_TRANSIENT)
    assert fake.released_states == list(fake.handles)
