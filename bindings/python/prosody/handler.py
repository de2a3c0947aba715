"""The handler interface users implement, and the wrapper the native layer calls."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Protocol

from typing_extensions import TypeVar

from . import _otel
from ._task import report_to_sentry as _report_to_sentry
from .message import JSONValue, Message
from .timer import Timer

if TYPE_CHECKING:
    from .context import Context

__all__ = ["EventHandler", "ProsodyHandler", "ShutdownSignal"]

P = TypeVar("P", default=JSONValue)


class EventHandler(ABC, Generic[P]):
    """Implement ``on_message`` and ``on_timer`` as coroutines.

    One instance serves every call, and calls for different keys run
    concurrently on the event loop the client subscribed from. Calls always
    come from that loop's thread, never from a library thread.
    """

    @abstractmethod
    async def on_message(self, context: Context, message: Message[P]) -> None:
        """Handles one message. Raising marks it failed (transient unless permanent)."""

    @abstractmethod
    async def on_timer(self, context: Context, timer: Timer) -> None:
        """Handles one due timer. Raising marks it failed (transient unless permanent)."""


class _Waitable(Protocol):
    def is_set(self) -> bool: ...

    def wait(self) -> Awaitable[Any]: ...


class ShutdownSignal:
    """The shutdown event the native layer passes to ProsodyHandler.

    The native layer fires it when the client is closed with handlers still
    running; it then cancels those handler tasks itself, so ProsodyHandler
    need not race a waiter against every call.
    """

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event: asyncio.Event | None = None

    def is_set(self) -> bool:
        return self._event is not None and self._event.is_set()

    def set(self) -> None:
        if self._event is None:
            self._event = asyncio.Event()
        self._event.set()

    async def wait(self) -> bool:
        if self._event is None:
            self._event = asyncio.Event()
        return await self._event.wait()


class ProsodyHandler:
    """Wraps an EventHandler: trace context, shutdown race and error reporting per call."""

    __slots__ = ("handler", "_message_follows", "_timer_follows")

    def __init__(
        self,
        handler: EventHandler[Any],
        *,
        message_spans_follow: bool = False,
        timer_spans_follow: bool = True,
    ) -> None:
        self.handler = handler
        self._message_follows = message_spans_follow
        self._timer_follows = timer_spans_follow

    async def on_message(
        self,
        context: Context,
        message: Message[Any],
        otel_carrier: Mapping[str, str],
        shutdown_event: _Waitable | None,
    ) -> None:
        with _otel.handler_scope("on_message", otel_carrier, self._message_follows):
            await self._run(self.handler.on_message(context, message), shutdown_event)

    async def on_timer(
        self,
        context: Context,
        timer: Timer,
        otel_carrier: Mapping[str, str],
        shutdown_event: _Waitable | None,
    ) -> None:
        with _otel.handler_scope("on_timer", otel_carrier, self._timer_follows):
            await self._run(self.handler.on_timer(context, timer), shutdown_event)

    async def _run(self, call: Awaitable[None], shutdown_event: _Waitable | None) -> None:
        try:
            if shutdown_event is None or isinstance(shutdown_event, ShutdownSignal):
                # The native layer cancels this task when its signal fires.
                await call
            else:
                await _race(call, shutdown_event)
        except Exception as e:
            _report_to_sentry(e)
            raise


async def _race(call: Awaitable[None], shutdown_event: _Waitable) -> None:
    """Runs call as a task; cancels it if shutdown_event is set first."""
    task = asyncio.ensure_future(call)
    if shutdown_event.is_set():
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise asyncio.CancelledError("prosody: shutting down")
    waiter = asyncio.ensure_future(shutdown_event.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
    await task
