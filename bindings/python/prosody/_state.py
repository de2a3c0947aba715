"""Keyed state over libprosody: the native handles behind ValueState, MapState and DequeState.

``Context.state(definition)`` opens the event's collection with
``prosody_event_state`` and wraps the native handle in the public wrapper
(prosody/state.py), once per attempt and definition. The native handles
have the method names the wrappers call (python-api.md §9): every data
operation starts its ``prosody_state_call`` when called and returns an
``asyncio.Future``, which the completion (on a library thread, through
``_prosody_on_state``) settles on the event loop. The library runs and
reports one handle's operations in the order they were called.

Items cross as bytes: JSON text for a JSON collection; for a message
collection the JSON object ``{"topic", "partition", "offset", "key",
"timestamp" (epoch ms), "payload"}``, read back as a ``prosody.Message``.
Encoding happens when an operation is called (a value that cannot be
stored fails then, with a TransientStateError); decoding happens on the
loop when the result arrives.

When the handler's attempt ends (its task finished), ``Context`` ends its
handles: their cursors and the handles themselves are released, and any
later use raises TransientStateError without calling the library.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque as _deque
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from . import _native
from .errors import NullValueError, PermanentStateError, TransientStateError
from .message import Message
from .state import DequeState, Direction, MapState, ValueState

if TYPE_CHECKING:
    from .context import Context

__all__ = [
    "NativeValueState", "NativeMapState", "NativeDequeState", "NativeStateScan",
    "open_state", "state_error",
]

# include/prosody.h, "Keyed state".
KIND_VALUE, KIND_MAP, KIND_DEQUE = 1, 2, 3
FORWARD, BACKWARD = 0, 1
OP_GET = 1
OP_SET = 2
OP_CLEAR = 3
OP_COMMIT = 4
OP_ROLLBACK = 5
OP_CONTAINS = 6
OP_GET_MANY = 7
OP_REMOVE = 8
OP_PUSH_BACK = 9
OP_PUSH_FRONT = 10
OP_POP_BACK = 11
OP_POP_FRONT = 12
OP_PEEK_BACK = 13
OP_PEEK_FRONT = 14
OP_LEN = 15
OP_IS_EMPTY = 16

_KINDS = {"value": KIND_VALUE, "map": KIND_MAP, "deque": KIND_DEQUE}
_PAYLOADS = ("json", "message")
_DIRECTIONS = {"forward": FORWARD, "backward": BACKWARD, Direction.FORWARD: FORWARD, Direction.BACKWARD: BACKWARD}

EXPIRED = "The keyed-state handle is no longer valid because its event attempt has ended"
CONTEXT_EXPIRED = "The context is no longer valid because the event has already been processed"

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS = timedelta(milliseconds=1)

Items = list[_native.StateItem]
Result = Callable[[Items, int], Any]
Decode = Callable[[bytes], Any]


def state_error(status: int, message: str | None) -> Exception:
    """The prosody exception for a failed keyed-state call or completion."""
    text = message or _native.status_name(status)
    if status == _native.ERR_NULL_VALUE:
        return NullValueError(text)
    if status in (_native.ERR_PERMANENT, _native.ERR_STATE):
        return PermanentStateError(text)
    if status == _native.ERR_INVALID_HANDLE:
        return TransientStateError(message or EXPIRED)
    if status in (_native.ERR_TRANSIENT, _native.ERR_TERMINAL, _native.ERR_CANCELLED, _native.ERR_CLOSED,
                  _native.ERR_INVALID_ARGUMENT):
        # TERMINAL: the partition is going away; the event is retried where it goes.
        return TransientStateError(text)
    return _native.status_error(status, message)  # after fork, a library bug: RuntimeError


# ---- items ----


def _json_bytes(value: Any, what: str) -> bytes:
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    except (TypeError, ValueError) as e:  # also UnicodeEncodeError (lone surrogates)
        raise TransientStateError(f"{what} cannot be represented as JSON: {e}") from None


def encode_json(value: Any, null_hint: str) -> bytes:
    """An item of a JSON collection."""
    if value is None:
        raise NullValueError(f"keyed state cannot store None; {null_hint}")
    if isinstance(value, Message):
        raise TransientStateError(
            "a Message cannot be written to a JSON collection: register a message_value, "
            "message_map or message_deque collection for messages"
        )
    return _json_bytes(value, "the value")


def encode_message(value: Any, null_hint: str) -> bytes:
    """An item of a message collection: the message as a JSON object."""
    if value is None:
        raise NullValueError(f"keyed state cannot store None; {null_hint}")
    if not isinstance(value, Message):
        raise TransientStateError(
            f"a message collection stores prosody.Message objects, got {type(value).__name__}"
        )
    ts = value.timestamp
    if not isinstance(ts, datetime) or ts.utcoffset() is None:
        raise TransientStateError("the message's timestamp must be a timezone-aware datetime")
    for field, kind in (("topic", str), ("key", str), ("partition", int), ("offset", int)):
        v = getattr(value, field)
        if not isinstance(v, kind) or isinstance(v, bool):
            raise TransientStateError(f"the message's {field} must be {kind.__name__}, got {type(v).__name__}")
    return _json_bytes(
        {"topic": value.topic, "partition": value.partition, "offset": value.offset, "key": value.key,
         "timestamp": (ts - _EPOCH) // _MS, "payload": value.payload},
        "the message",
    )


def decode_json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError as e:
        raise TransientStateError(f"a stored keyed-state item does not decode as JSON: {e}") from None


def decode_message(data: bytes) -> Message[Any]:
    try:
        d = json.loads(data)
        return Message(d["topic"], d["partition"], d["offset"], _EPOCH + d["timestamp"] * _MS, d["key"],
                       d["payload"])
    except (ValueError, KeyError, TypeError, OverflowError) as e:
        raise TransientStateError(f"a stored message does not decode: {type(e).__name__}: {e}") from None


_CODECS: dict[str, tuple[Callable[[Any, str], bytes], Decode]] = {
    "json": (encode_json, decode_json),
    "message": (encode_message, decode_message),
}


def _key_bytes(key: Any) -> bytes:
    if not isinstance(key, str):
        raise TypeError(f"a map key must be a str, got {type(key).__name__}")
    try:
        return key.encode()
    except UnicodeEncodeError as e:
        raise TransientStateError(f"the map key is not valid Unicode text: {e}") from None


# ---- results ----


def _nothing(items: Items, number: int) -> None:
    return None


def _flag(items: Items, number: int) -> bool:
    return bool(number)


def _count(items: Items, number: int) -> int:
    return int(number)


def _one(decode: Decode) -> Result:
    def result(items: Items, number: int) -> Any:
        if not items or items[0][1] is None:
            return None
        return decode(items[0][1])

    return result


def _many(decode: Decode) -> Result:
    def result(items: Items, number: int) -> list[Any]:
        return [None if v is None else decode(v) for _, v in items]

    return result


# ---- handles ----


class _NativeState:
    """One collection opened for one attempt: a prosody_state handle."""

    __slots__ = ("_handle", "_ffi", "_lib", "_loop", "_encode", "_decode", "_get", "_cursors", "_ended")

    def __init__(self, handle: int, ffi: Any, lib: Any, loop: asyncio.AbstractEventLoop, payload: str) -> None:
        self._handle = handle
        self._ffi = ffi
        self._lib = lib
        self._loop = loop
        self._encode, self._decode = _CODECS[payload]
        self._get = _one(self._decode)
        self._cursors: set[NativeStateScan] = set()
        self._ended = False

    def _check(self) -> None:
        if self._ended:
            raise TransientStateError(EXPIRED)

    def _call(self, op: int, result: Result, *, key: bytes | None = None, value: bytes | None = None,
              keys: Sequence[bytes] | None = None, index: int = 0) -> asyncio.Future[Any]:
        """Starts ``prosody_state_call``; the future resolves to ``result(items, number)``."""
        self._check()
        ffi, lib = self._ffi, self._lib
        args = ffi.new("prosody_state_args *")
        args.size = ffi.sizeof("prosody_state_args")
        keep: list[Any] = []  # what args points at, alive until the call returns (the library copies it)
        if key is not None:
            c_key = ffi.from_buffer("char[]", key)
            keep.append(c_key)
            args.key, args.key_len = c_key, len(key)
        if value is not None:
            c_value = ffi.from_buffer("uint8_t[]", value)
            keep.append(c_value)
            args.value, args.value_len = c_value, len(value)
        if keys is not None:
            c_items = ffi.new("prosody_state_item[]", max(len(keys), 1))
            keep.append(c_items)
            for i, k in enumerate(keys):
                c_k = ffi.from_buffer("char[]", k)
                keep.append(c_k)
                c_items[i].key, c_items[i].key_len = c_k, len(k)
            args.keys, args.keys_len = c_items, len(keys)
        args.index = index
        fut: asyncio.Future[Any] = self._loop.create_future()

        def settle(status: int, raw: Any, message: str | None) -> None:
            if fut.done():  # the caller stopped waiting (cancelled)
                return
            if status != _native.OK:
                fut.set_exception(state_error(status, message))
                return
            try:
                out = result(*raw)
            except Exception as e:
                fut.set_exception(e)
            else:
                fut.set_result(out)

        pending, ud = _native.register(self._loop, settle)
        err = ffi.new("char **")
        status = lib.prosody_state_call(self._handle, op, args, lib._prosody_on_state, ud, err)
        del keep
        if status != _native.OK:
            _native.unregister(pending)
            raise state_error(status, _native.take_error(err))
        return fut

    def _scan(self, direction: Any, keys_only: bool, transform: Callable[[bytes | None, bytes | None], Any],
              ) -> NativeStateScan:
        self._check()
        d = _DIRECTIONS.get(direction) if isinstance(direction, (str, Direction)) else None
        if d is None:
            raise TransientStateError(f'invalid scan direction {direction!r}: expected "forward" or "backward"')
        ffi, lib = self._ffi, self._lib
        out, err = ffi.new("uint64_t *"), ffi.new("char **")
        status = lib.prosody_state_scan(self._handle, d, 1 if keys_only else 0, out, err)
        if status != _native.OK:
            raise state_error(status, _native.take_error(err))
        scan = NativeStateScan(self, int(out[0]), transform)
        self._cursors.add(scan)
        return scan

    def _end(self) -> None:
        """The attempt is over: release the cursors and the handle; later use raises."""
        if self._ended:
            return
        self._ended = True
        for scan in list(self._cursors):
            scan._release()
        self._lib.prosody_state_release(self._handle, self._ffi.NULL)

    # ---- what every kind has ----

    def clear(self) -> asyncio.Future[None]:
        return self._call(OP_CLEAR, _nothing)

    def commit(self) -> asyncio.Future[None]:
        return self._call(OP_COMMIT, _nothing)

    def rollback(self) -> asyncio.Future[None]:
        return self._call(OP_ROLLBACK, _nothing)


class NativeValueState(_NativeState):
    __slots__ = ()

    def get(self) -> asyncio.Future[Any]:
        return self._call(OP_GET, self._get)

    def set(self, value: Any) -> asyncio.Future[None]:
        self._check()
        return self._call(OP_SET, _nothing, value=self._encode(value, "use clear() to delete the value"))


class NativeMapState(_NativeState):
    __slots__ = ()

    def get(self, key: str) -> asyncio.Future[Any]:
        return self._call(OP_GET, self._get, key=_key_bytes(key))

    def set(self, key: str, value: Any) -> asyncio.Future[None]:
        self._check()
        k = _key_bytes(key)
        return self._call(OP_SET, _nothing, key=k, value=self._encode(value, "use remove(key) to delete an entry"))

    def remove(self, key: str) -> asyncio.Future[None]:
        return self._call(OP_REMOVE, _nothing, key=_key_bytes(key))

    def contains_key(self, key: str) -> asyncio.Future[bool]:
        return self._call(OP_CONTAINS, _flag, key=_key_bytes(key))

    def get_many(self, keys: Sequence[str]) -> asyncio.Future[list[Any]]:
        if isinstance(keys, (str, bytes)):
            raise TypeError("get_many takes a sequence of str keys, not a single string")
        encoded = [_key_bytes(k) for k in keys]
        if not encoded:
            self._check()
            fut: asyncio.Future[list[Any]] = self._loop.create_future()
            fut.set_result([])
            return fut
        return self._call(OP_GET_MANY, _many(self._decode), keys=encoded)

    def scan(self, direction: str) -> NativeStateScan:
        decode = self._decode

        def entry(k: bytes | None, v: bytes | None) -> tuple[str, Any]:
            return (k or b"").decode("utf-8", "replace"), None if v is None else decode(v)

        return self._scan(direction, False, entry)

    def keys(self, direction: str) -> NativeStateScan:
        return self._scan(direction, True, _map_key)


def _map_key(k: bytes | None, v: bytes | None) -> str:
    return (k or b"").decode("utf-8", "replace")


class NativeDequeState(_NativeState):
    __slots__ = ()

    def push_back(self, value: Any) -> asyncio.Future[None]:
        self._check()
        return self._call(OP_PUSH_BACK, _nothing, value=self._encode(value, "a deque cannot hold None"))

    def push_front(self, value: Any) -> asyncio.Future[None]:
        self._check()
        return self._call(OP_PUSH_FRONT, _nothing, value=self._encode(value, "a deque cannot hold None"))

    def pop_back(self) -> asyncio.Future[Any]:
        return self._call(OP_POP_BACK, self._get)

    def pop_front(self) -> asyncio.Future[Any]:
        return self._call(OP_POP_FRONT, self._get)

    def peek_back(self) -> asyncio.Future[Any]:
        return self._call(OP_PEEK_BACK, self._get)

    def peek_front(self) -> asyncio.Future[Any]:
        return self._call(OP_PEEK_FRONT, self._get)

    def get(self, index: int) -> asyncio.Future[Any]:
        return self._call(OP_GET, self._get, index=index)

    def len(self) -> asyncio.Future[int]:
        return self._call(OP_LEN, _count)

    def is_empty(self) -> asyncio.Future[bool]:
        return self._call(OP_IS_EMPTY, _flag)

    def scan(self, direction: str) -> NativeStateScan:
        decode = self._decode

        def item(k: bytes | None, v: bytes | None) -> Any:
            return None if v is None else decode(v)

        return self._scan(direction, False, item)


# ---- scans ----


def _retrieve(fut: asyncio.Future[None]) -> None:
    # A pull whose waiters all went away: its failure is not "never retrieved".
    if not fut.cancelled():
        fut.exception()


class NativeStateScan:
    """A cursor: an async iterator over the items of a map or deque, in chunks of up to 256.

    One chunk is read at a time; concurrent ``__anext__`` calls share it,
    so each item is returned once. A caller that stops waiting (cancelled)
    leaves the read going: its items are kept for the next call.
    """

    __slots__ = ("_owner", "_cursor", "_transform", "_buf", "_pull", "_done", "_closed", "_released")

    def __init__(self, owner: _NativeState, cursor: int,
                 transform: Callable[[bytes | None, bytes | None], Any]) -> None:
        self._owner = owner
        self._cursor = cursor
        self._transform = transform
        self._buf: _deque[Any] = _deque()
        self._pull: asyncio.Future[None] | None = None
        self._done = False
        self._closed = False
        self._released = False

    def __aiter__(self) -> NativeStateScan:
        return self

    async def __anext__(self) -> Any:
        while True:
            if self._closed:
                raise StopAsyncIteration
            if self._owner._ended:
                raise TransientStateError(EXPIRED)
            if self._buf:
                return self._buf.popleft()
            if self._done:
                raise StopAsyncIteration
            pull = self._pull
            if pull is None:
                pull = self._start_pull()
            await asyncio.shield(pull)

    def _start_pull(self) -> asyncio.Future[None]:
        owner = self._owner
        ffi, lib = owner._ffi, owner._lib
        fut: asyncio.Future[None] = owner._loop.create_future()
        fut.add_done_callback(_retrieve)

        def settle(status: int, raw: Any, message: str | None) -> None:
            if self._pull is fut:
                self._pull = None
            if status != _native.OK:
                fut.set_exception(state_error(status, message))
                return
            items: Items = raw[0]
            if self._closed:
                pass
            elif not items:
                self._done = True
                self._release()
            else:
                transform = self._transform
                try:
                    decoded = [transform(k, v) for k, v in items]
                except Exception as e:
                    fut.set_exception(e)
                    return
                self._buf.extend(decoded)
            fut.set_result(None)

        pending, ud = _native.register(owner._loop, settle)
        err = ffi.new("char **")
        status = lib.prosody_cursor_next(self._cursor, lib._prosody_on_state, ud, err)
        if status != _native.OK:
            _native.unregister(pending)
            raise state_error(status, _native.take_error(err))
        self._pull = fut
        return fut

    def _release(self) -> None:
        if self._released:
            return
        self._released = True
        self._owner._cursors.discard(self)
        owner = self._owner
        owner._lib.prosody_cursor_release(self._cursor, owner._ffi.NULL)

    async def aclose(self) -> None:
        """Ends the scan and releases its cursor (once); later pulls end the iteration."""
        self._closed = True
        self._buf.clear()
        self._release()


# ---- Context.state ----

_NATIVE: dict[int, type[_NativeState]] = {
    KIND_VALUE: NativeValueState, KIND_MAP: NativeMapState, KIND_DEQUE: NativeDequeState,
}
_WRAPPER: dict[int, type[Any]] = {KIND_VALUE: ValueState, KIND_MAP: MapState, KIND_DEQUE: DequeState}


def _definition_config(definition: Any) -> tuple[str, str, str]:
    """(name, kind, payload) of a definition, or a TransientStateError saying what is wrong."""
    to_config = getattr(definition, "to_config", None)
    if to_config is None:
        raise TransientStateError(
            f"state(): expected a keyed-state definition (value(), map(), deque(), message_value(), ...), "
            f"got {type(definition).__name__}"
        )
    try:
        config = to_config()
    except Exception as e:
        raise TransientStateError(f"state(): to_config() raised {type(e).__name__}: {e}") from e
    if not isinstance(config, dict):
        raise TransientStateError(f"state(): to_config() must return a dict, got {type(config).__name__}")
    name, kind, payload = config.get("name"), config.get("kind"), config.get("payload")
    if kind not in _KINDS:
        raise TransientStateError(f'state(): kind: expected "value", "map", or "deque", got {kind!r}')
    if payload not in _PAYLOADS:
        raise TransientStateError(f'state(): payload: expected "json" or "message", got {payload!r}')
    if not isinstance(name, str) or not name:
        raise TransientStateError(f"state(): name: expected a non-empty str, got {name!r}")
    return name, kind, payload


def open_state(ctx: Context, definition: Any) -> Any:
    """Context.state: the attempt's handle of the definition's collection (one per definition)."""
    if ctx._done:
        raise TransientStateError(CONTEXT_EXPIRED)
    name, kind, payload = _definition_config(definition)
    cache = ctx._states
    if cache is None:
        cache = ctx._states = {}
    wrapper = cache.get((kind, payload, name))
    if wrapper is not None:
        return wrapper
    disp = ctx._disp
    # The library knows each collection's kind; what it stores (JSON or
    # messages) only this package encodes, so that is checked here against
    # the client's registration.
    registered = getattr(disp, "collections", None)
    have = registered.get(name) if registered else None
    if have is not None and have != (kind, payload):
        raise PermanentStateError(
            f'keyed-state collection "{name}" is registered as a {have[0]} of {have[1]} items, '
            f"not a {kind} of {payload} items"
        )
    try:
        name_b = name.encode()
    except UnicodeEncodeError as e:
        raise TransientStateError(f"state(): name is not valid Unicode text: {e}") from None
    ffi, lib = disp.library()
    out, err = ffi.new("uint64_t *"), ffi.new("char **")
    code = _KINDS[kind]
    status = lib.prosody_event_state(ctx._event, name_b, len(name_b), code, out, err)
    if status != _native.OK:
        message = _native.take_error(err)
        if status == _native.ERR_INVALID_HANDLE:
            raise TransientStateError(CONTEXT_EXPIRED)
        raise state_error(status, message)
    native = _NATIVE[code](int(out[0]), ffi, lib, disp.loop, payload)
    wrapper = _WRAPPER[code](native)
    cache[(kind, payload, name)] = wrapper
    return wrapper


def end_states(ctx: Context) -> None:
    """The attempt of ``ctx`` is over: end every handle it opened."""
    states = ctx._states
    if not states:
        return
    for wrapper in states.values():
        wrapper._native._end()
