import asyncio
from datetime import datetime
from typing import Any, overload

from typing_extensions import TypeVar

from .message import JSONValue, Message
from .state import (
    DequeDefinition,
    DequeState,
    MapDefinition,
    MapState,
    MessageDequeDefinition,
    MessageMapDefinition,
    MessageValueDefinition,
    ValueDefinition,
    ValueState,
)

__all__ = ["Context"]

T = TypeVar("T", default=JSONValue)
V = TypeVar("V", default=JSONValue)
P = TypeVar("P", default=JSONValue)

_INITIAL_SLOTS: dict[str, Any]

class Context:
    _disp: Any
    _event: int
    _cancelled: bool
    _done: bool
    _task: asyncio.Future[None] | None
    _states: dict[tuple[str, str, str], Any] | None
    def __init__(self, disp: Any, event: int) -> None: ...
    def _cancel(self) -> None: ...
    async def schedule(self, time: datetime) -> None: ...
    async def clear_and_schedule(self, time: datetime) -> None: ...
    async def unschedule(self, time: datetime) -> None: ...
    async def clear_scheduled(self) -> None: ...
    async def scheduled(self) -> list[datetime]: ...
    def should_cancel(self) -> bool: ...
    async def on_cancel(self) -> None: ...
    @overload
    def state(self, definition: ValueDefinition[T]) -> ValueState[T]: ...
    @overload
    def state(self, definition: MapDefinition[V]) -> MapState[V]: ...
    @overload
    def state(self, definition: DequeDefinition[T]) -> DequeState[T]: ...
    @overload
    def state(self, definition: MessageValueDefinition[P]) -> ValueState[Message[P]]: ...
    @overload
    def state(self, definition: MessageMapDefinition[P]) -> MapState[Message[P]]: ...
    @overload
    def state(self, definition: MessageDequeDefinition[P]) -> DequeState[Message[P]]: ...
