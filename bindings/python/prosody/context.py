"""The per-call context: timers and keyed state for the event's key, and cancellation."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from . import _native, _state
from .errors import PermanentError, TransientError

if TYPE_CHECKING:
    from ._dispatch import Dispatcher
    from ._task import HandlerTask

__all__ = ["Context"]

_INVALID = "The context is no longer valid because the event has already been processed"


# Timers are stored as whole unsigned 32-bit seconds (the library refuses
# any other time, and so does this check, with the argument's name).
_FIRST = datetime(1970, 1, 1, tzinfo=timezone.utc)
_LAST = datetime(2106, 2, 7, 6, 28, 15, tzinfo=timezone.utc)


def _epoch_ms(method: str, time: datetime) -> int:
    if not isinstance(time, datetime):
        raise TypeError(f"{method}: time must be a datetime, got {type(time).__name__}")
    if time.tzinfo is None or time.utcoffset() is None:
        # A naive datetime is local time to Python and UTC to many readers:
        # guessing either fires timers hours off.
        raise ValueError(
            f"{method}: time must be timezone-aware (got the naive {time.isoformat()}): "
            "use datetime.now(timezone.utc) or attach a tzinfo"
        )
    ms = round(time.timestamp() * 1000)
    if not (0 <= (ms + 500) // 1000 <= 4294967295):
        raise ValueError(
            f"{method}: time {time.isoformat()} is out of range: timers are kept as whole seconds "
            f"from {_FIRST.isoformat()} to {_LAST.isoformat()}"
        )
    return ms


def _op_error(status: int, message: str | None) -> Exception:
    if status == _native.ERR_INVALID_ARGUMENT:
        return ValueError(message or _native.status_name(status))
    if status == _native.ERR_PERMANENT or status == _native.ERR_INVALID_HANDLE:
        return PermanentError(message or _INVALID)
    if status in (_native.ERR_TRANSIENT, _native.ERR_TERMINAL, _native.ERR_CANCELLED):
        return TransientError(message or _native.status_name(status))
    return _native.status_error(status, message)


# What a new Context holds besides its dispatcher and event: __init__ and
# prosody._batch (which makes the Contexts of polled events) both start
# from this table.
_INITIAL_SLOTS: dict[str, Any] = {
    "_cancelled": False, "_cancel_waiter": None, "_done": False, "_task": None, "_states": None,
}


class Context:
    """Given to every handler call; valid until that call returns.

    Timer methods act on the key of the event being handled. Every method
    must be called from the event loop the client subscribed from.
    """

    __slots__ = ("_disp", "_event", "_cancelled", "_cancel_waiter", "_done", "_task", "_states")
    _disp: Dispatcher
    _event: int
    _cancelled: bool
    _cancel_waiter: asyncio.Future[None] | None
    _done: bool
    _task: HandlerTask | None  # set while the handler waits
    # The keyed-state handles of the attempt, by (kind, payload, name); None until the first.
    _states: dict[tuple[str, str, str], Any] | None

    def __init__(self, disp: Dispatcher, event: int) -> None:
        self._disp = disp
        self._event = event
        for name, value in _INITIAL_SLOTS.items():
            setattr(self, name, value)

    # ---- timers ----

    async def schedule(self, time: datetime) -> None:
        """Schedules a timer for this key at ``time`` (UTC; rounded to the second)."""
        ms = _epoch_ms("schedule", time)
        await self._op(lambda lib, cb, ud, err: lib.prosody_event_schedule(self._event, ms, cb, ud, err))

    async def clear_and_schedule(self, time: datetime) -> None:
        """Replaces every timer of this key with one at ``time``."""
        ms = _epoch_ms("clear_and_schedule", time)
        await self._op(
            lambda lib, cb, ud, err: lib.prosody_event_clear_and_schedule(self._event, ms, cb, ud, err)
        )

    async def unschedule(self, time: datetime) -> None:
        """Removes this key's timer at ``time``, if there is one."""
        ms = _epoch_ms("unschedule", time)
        await self._op(lambda lib, cb, ud, err: lib.prosody_event_unschedule(self._event, ms, cb, ud, err))

    async def clear_scheduled(self) -> None:
        """Removes every timer of this key."""
        await self._op(lambda lib, cb, ud, err: lib.prosody_event_clear_scheduled(self._event, cb, ud, err))

    async def scheduled(self) -> list[datetime]:
        """This key's pending timer times (UTC, whole seconds), earliest first."""
        times: list[int] = await self._op(
            lambda lib, cb, ud, err: lib.prosody_event_scheduled(self._event, cb, ud, err), times=True
        )
        return [datetime.fromtimestamp(ms / 1000, timezone.utc) for ms in times]

    async def _op(self, call: Any, times: bool = False) -> Any:
        if self._done:
            raise PermanentError(_INVALID)
        ffi, lib = self._disp.library()
        loop = self._disp.loop
        fut: asyncio.Future[Any] = loop.create_future()

        def settle(status: int, result: Any, message: str | None) -> None:
            if fut.done():
                return
            if status == _native.OK:
                fut.set_result(result)
            else:
                fut.set_exception(_op_error(status, message))

        key, ud = _native.register(loop, settle)
        err = ffi.new("char **")
        cb = lib._prosody_on_times if times else lib._prosody_on_done
        status = call(lib, cb, ud, err)
        if status != _native.OK:
            _native.unregister(key)
            raise _op_error(status, _native.take_error(err))
        return await fut

    # ---- cancellation ----

    def should_cancel(self) -> bool:
        """True once the handler has been asked to stop (timeout, rebalance or shutdown)."""
        if self._cancelled or self._done:
            return True
        return self._disp.query_cancel(self._event)

    async def on_cancel(self) -> None:
        """Completes when the handler is asked to stop."""
        if self._cancelled or self._done:
            return
        if self._cancel_waiter is None:
            self._cancel_waiter = self._disp.loop.create_future()
        await asyncio.shield(self._cancel_waiter)

    def _cancel(self) -> None:
        self._cancelled = True
        waiter = self._cancel_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # ---- keyed state ----

    def state(self, definition: Any) -> Any:
        """The event's key's handle of a registered collection, for this attempt.

        Returns a ValueState, MapState or DequeState (of ``Message`` items
        for the message_* definitions); calling it again in the attempt with
        the same definition returns the same handle. A definition that is
        malformed, or a context whose attempt has ended, raises
        TransientStateError; a collection that is not registered (or is
        registered with another kind or payload), PermanentStateError.
        """
        return _state.open_state(self, definition)
