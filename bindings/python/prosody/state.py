"""Keyed-state definitions and handle wrappers.

The definitions register collections through ``state_collections`` (the core
validates them). Reading and writing state from a handler
(``Context.state``) comes with a later release; the handle wrappers below are
the thin pure-Python layer it will use.
"""

from __future__ import annotations

import builtins
import enum
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar, Generic

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
    async def get(self, key: str, default: Any = None) -> Any:
        result = await self._native.get(key)
        return default if result is None else result

    async def contains(self, key: str) -> bool:
        return bool(await self._native.contains_key(key))

    async def get_many(self, keys: Sequence[str]) -> builtins.list[V | None]:
        result: builtins.list[V | None] = await self._native.get_many(keys)
        return result

    async def set(self, key: str, value: V) -> None:
        await self._native.set(key, value)

    async def remove(self, key: str) -> None:
        await self._native.remove(key)

    def items(self, direction: Direction = Direction.FORWARD) -> _StateScan[tuple[str, V]]:
        return _StateScan(self._native.scan(direction.value), _same)

    def keys(self, direction: Direction = Direction.FORWARD) -> _StateScan[str]:
        return _StateScan(self._native.keys(direction.value), _same)

    def values(self) -> _StateScan[V]:
        return _StateScan(self._native.scan("forward"), lambda item: item[1])

    def __aiter__(self) -> AsyncIterator[str]:
        return _StateScan(self._native.keys("forward"), _same)


class DequeState(_State, Generic[T]):
    async def append(self, item: T) -> None:
        await self._native.push_back(item)

    async def appendleft(self, item: T) -> None:
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
        result: T | None = await self._native.get(index)
        return result

    async def size(self) -> int:
        return int(await self._native.len())

    async def is_empty(self) -> bool:
        return bool(await self._native.is_empty())

    def values(self, direction: Direction = Direction.FORWARD) -> _StateScan[T]:
        return _StateScan(self._native.scan(direction.value), _same)

    def __aiter__(self) -> AsyncIterator[T]:
        return _StateScan(self._native.scan("forward"), _same)


