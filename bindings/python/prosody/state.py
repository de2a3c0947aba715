"""Keyed-state definitions and handle wrappers.

The definitions register collections through ``state_collections`` (the core
validates them) and name them to ``Context.state``, which returns the
handles below: thin pure-Python wrappers around a native handle (attribute
``_native``; see prosody/_state.py), valid only inside the handler attempt
that opened them. Every data operation is a coroutine; ``items``, ``keys``
and ``values`` open their scan at once and return an async iterator.
"""

from __future__ import annotations

import builtins
import enum
import operator
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar, Generic, overload

from typing_extensions import TypeVar

from .errors import NullValueError
from .message import JSONValue

__all__ = [
    "Direction",
    "ValueDefinition", "MapDefinition", "DequeDefinition",
    "MessageValueDefinition", "MessageMapDefinition", "MessageDequeDefinition",
    "value", "map", "deque", "message_value", "message_map", "message_deque",
    "ValueState", "MapState", "DequeState",
]

T = TypeVar("T", default=JSONValue)
V = TypeVar("V", default=JSONValue)
P = TypeVar("P", default=JSONValue)
R = TypeVar("R")
D = TypeVar("D")


class Direction(enum.Enum):
    FORWARD = "forward"
    BACKWARD = "backward"


def _ttl_seconds(ttl: timedelta | int | None) -> int | None:
    if isinstance(ttl, timedelta):
        return int(ttl.total_seconds())
    if ttl is None:
        return None
    return int(ttl)


@dataclass(frozen=True)
class _Definition:
    """The fields every state definition has; subclasses set kind and payload."""

    kind: ClassVar[str]
    payload: ClassVar[str]
    name: str
    ttl: timedelta | int | None = None
    read_uncommitted: bool | None = None

    def to_config(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "payload": self.payload,
            "ttl_seconds": _ttl_seconds(self.ttl),
            "read_uncommitted": self.read_uncommitted,
            "keyset_limit": getattr(self, "keyset_limit", None),
            "capacity": getattr(self, "capacity", None),
        }


@dataclass(frozen=True)
class ValueDefinition(_Definition, Generic[T]):
    kind: ClassVar[str] = "value"
    payload: ClassVar[str] = "json"


@dataclass(frozen=True)
class MapDefinition(_Definition, Generic[V]):
    kind: ClassVar[str] = "map"
    payload: ClassVar[str] = "json"
    keyset_limit: int | None = None


@dataclass(frozen=True)
class DequeDefinition(_Definition, Generic[T]):
    kind: ClassVar[str] = "deque"
    payload: ClassVar[str] = "json"
    capacity: int | None = None


@dataclass(frozen=True)
class MessageValueDefinition(_Definition, Generic[P]):
    kind: ClassVar[str] = "value"
    payload: ClassVar[str] = "message"


@dataclass(frozen=True)
class MessageMapDefinition(_Definition, Generic[P]):
    kind: ClassVar[str] = "map"
    payload: ClassVar[str] = "message"
    keyset_limit: int | None = None


@dataclass(frozen=True)
class MessageDequeDefinition(_Definition, Generic[P]):
    kind: ClassVar[str] = "deque"
    payload: ClassVar[str] = "message"
    capacity: int | None = None


def value(name: str, *, ttl: timedelta | int | None = None, read_uncommitted: bool | None = None) -> ValueDefinition[Any]:
    return ValueDefinition(name, ttl, read_uncommitted)


def map(  # noqa: A001 - the documented name
    name: str, *, ttl: timedelta | int | None = None, read_uncommitted: bool | None = None,
    keyset_limit: int | None = None,
) -> MapDefinition[Any]:
    return MapDefinition(name, ttl, read_uncommitted, keyset_limit)


def deque(
    name: str, *, ttl: timedelta | int | None = None, read_uncommitted: bool | None = None,
    capacity: int | None = None,
) -> DequeDefinition[Any]:
    return DequeDefinition(name, ttl, read_uncommitted, capacity)


def message_value(
    name: str, *, ttl: timedelta | int | None = None, read_uncommitted: bool | None = None
) -> MessageValueDefinition[Any]:
    return MessageValueDefinition(name, ttl, read_uncommitted)


def message_map(
    name: str, *, ttl: timedelta | int | None = None, read_uncommitted: bool | None = None,
    keyset_limit: int | None = None,
) -> MessageMapDefinition[Any]:
    return MessageMapDefinition(name, ttl, read_uncommitted, keyset_limit)


def message_deque(
    name: str, *, ttl: timedelta | int | None = None, read_uncommitted: bool | None = None,
    capacity: int | None = None,
) -> MessageDequeDefinition[Any]:
    return MessageDequeDefinition(name, ttl, read_uncommitted, capacity)


class _StateScan(Generic[R]):
    """An async iterator over a native cursor, with ``transform`` applied to each item."""

    def __init__(self, native: Any, transform: Callable[[Any], R]) -> None:
        self._native = native
        self._transform = transform

    def __aiter__(self) -> _StateScan[R]:
        return self

    async def __anext__(self) -> R:
        return self._transform(await self._native.__anext__())

    async def aclose(self) -> None:
        await self._native.aclose()


def _same(x: Any) -> Any:
    return x


def _second(item: Any) -> Any:
    return item[1]


def _token(direction: Any) -> Any:
    """What the native scan takes: a Direction's value; anything else as it is (the native layer refuses it)."""
    return direction.value if isinstance(direction, Direction) else direction


_U32_MAX = 0xFFFFFFFF


def _u32(index: Any) -> int:
    """A deque index as an unsigned 32-bit integer: TypeError for a non-integer, OverflowError out of range."""
    if isinstance(index, float):
        raise TypeError("a deque index must be an int, not float")
    i = operator.index(index)  # TypeError for anything that is not an integer
    if i < 0:
        raise OverflowError(f"a deque index cannot be negative (got {i}): it counts from the front, 0 first")
    if i > _U32_MAX:
        raise OverflowError(f"a deque index must be at most {_U32_MAX}, got {i}")
    return i


class _State:
    """What every state handle does: clear, commit, roll back."""

    def __init__(self, native: Any) -> None:
        self._native = native

    async def clear(self) -> None:
        await self._native.clear()

    async def commit(self) -> None:
        await self._native.commit()

    async def rollback(self) -> None:
        await self._native.rollback()


class ValueState(_State, Generic[T]):
    async def get(self) -> T | None:
        result: T | None = await self._native.get()
        return result

    async def set(self, value: T) -> None:
        if value is None:
            raise NullValueError("cannot store None; use clear() to delete the value")
        await self._native.set(value)


class MapState(_State, Generic[V]):
    @overload
    async def get(self, key: str) -> V | None: ...
    @overload
    async def get(self, key: str, default: D) -> V | D: ...

    async def get(self, key: str, default: Any = None) -> Any:
        """The entry's value; ``default`` only when there is no entry (a falsy value is returned as it is)."""
        result = await self._native.get(key)
        return default if result is None else result

    async def contains(self, key: str) -> bool:
        return bool(await self._native.contains_key(key))

    async def get_many(self, keys: Sequence[str]) -> builtins.list[V | None]:
        result: builtins.list[V | None] = await self._native.get_many(keys)
        return result

    async def set(self, key: str, value: V) -> None:
        if value is None:
            raise NullValueError("cannot store None; use remove(key) to delete the entry")
        await self._native.set(key, value)

    async def remove(self, key: str) -> None:
        await self._native.remove(key)

    def items(self, direction: Direction = Direction.FORWARD) -> _StateScan[tuple[str, V]]:
        return _StateScan(self._native.scan(_token(direction)), _same)

    def keys(self, direction: Direction = Direction.FORWARD) -> _StateScan[str]:
        return _StateScan(self._native.keys(_token(direction)), _same)

    def values(self) -> _StateScan[V]:
        return _StateScan(self._native.scan("forward"), _second)

    def __aiter__(self) -> AsyncIterator[str]:
        return _StateScan(self._native.keys("forward"), _same)


_NO_NONE_ITEM = "cannot store None in a deque; pop() or clear() remove items"


class DequeState(_State, Generic[T]):
    async def append(self, item: T) -> None:
        if item is None:
            raise NullValueError(_NO_NONE_ITEM)
        await self._native.push_back(item)

    async def appendleft(self, item: T) -> None:
        if item is None:
            raise NullValueError(_NO_NONE_ITEM)
        await self._native.push_front(item)

    async def pop(self) -> T | None:
        result: T | None = await self._native.pop_back()
        return result

    async def popleft(self) -> T | None:
        result: T | None = await self._native.pop_front()
        return result

    async def peek(self) -> T | None:
        result: T | None = await self._native.peek_back()
        return result

    async def peekleft(self) -> T | None:
        result: T | None = await self._native.peek_front()
        return result

    async def get(self, index: int) -> T | None:
        """The item at ``index`` (0 is the front), or None past the end."""
        result: T | None = await self._native.get(_u32(index))
        return result

    async def size(self) -> int:
        return int(await self._native.len())

    async def is_empty(self) -> bool:
        return bool(await self._native.is_empty())

    def values(self, direction: Direction = Direction.FORWARD) -> _StateScan[T]:
        return _StateScan(self._native.scan(_token(direction)), _same)

    def __aiter__(self) -> AsyncIterator[T]:
        return _StateScan(self._native.scan("forward"), _same)


