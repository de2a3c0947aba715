from abc import ABC, abstractmethod
from collections.abc import Awaitable, Mapping
from typing import Any, Generic, Protocol

from typing_extensions import TypeVar

from .context import Context
from .message import JSONValue, Message
from .timer import Timer

__all__ = ["EventHandler", "ProsodyHandler", "ShutdownSignal"]

P = TypeVar("P", default=JSONValue)

class EventHandler(ABC, Generic[P]):
    @abstractmethod
    async def on_message(self, context: Context, message: Message[P]) -> None: ...
    @abstractmethod
    async def on_timer(self, context: Context, timer: Timer) -> None: ...

class _Waitable(Protocol):
    def is_set(self) -> bool: ...
    def wait(self) -> Awaitable[Any]: ...

class ShutdownSignal:
    def __init__(self) -> None: ...
    def is_set(self) -> bool: ...
    def set(self) -> None: ...
    async def wait(self) -> bool: ...

class ProsodyHandler:
    handler: EventHandler[Any]
    def __init__(
        self,
        handler: EventHandler[Any],
        *,
        message_spans_follow: bool = False,
        timer_spans_follow: bool = True,
    ) -> None: ...
    async def on_message(
        self,
        context: Context,
        message: Message[Any],
        otel_carrier: Mapping[str, str],
        shutdown_event: _Waitable | None,
    ) -> None: ...
    async def on_timer(
        self,
        context: Context,
        timer: Timer,
        otel_carrier: Mapping[str, str],
        shutdown_event: _Waitable | None,
    ) -> None: ...
