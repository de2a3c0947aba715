"""Eager handler tasks: a handler call runs at once, and becomes a task only if it waits.

``asyncio.create_task`` costs a task object, a scheduled step and a loop
iteration per event, even for a handler that never waits (Python 3.11 has no
eager tasks). ``HandlerTask`` runs the handler's first step at once, from the
dispatcher, in the event's own copy of the context, with itself as
``asyncio.current_task()``; a handler that returns without waiting is then
complete, and nothing was scheduled. A handler that waits continues as a task:
``HandlerTask`` steps the coroutine exactly as ``asyncio.Task`` does (the
step is a port of CPython's ``Task.__step``), so cancellation,
``asyncio.timeout``, ``TaskGroup``, ``current_task()`` and contextvars behave
as in an ordinary task. It is an ``asyncio.Future`` (the C one), so it can be
awaited, cancelled and gathered; ``asyncio.all_tasks()`` lists it once it
waits.

When the handler is done the task reports the outcome to its dispatcher
(``Dispatcher._complete``): OK, transient (any exception, and cancellation) or
permanent (an exception with a truthy ``is_permanent``). As the dispatcher's
task did before, the task itself then finishes with the result ``None``; a
``KeyboardInterrupt`` or ``SystemExit`` is reported as transient and
re-raised.
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import inspect
import os
from asyncio import CancelledError
from collections.abc import Callable
from types import CoroutineType
from typing import TYPE_CHECKING, Any

from ._state import end_states

if TYPE_CHECKING:
    from .context import Context

__all__ = ["HandlerTask"]

# asyncio's own bookkeeping for current_task() and all_tasks(); typed for any task-like object.
_enter_task: Callable[[asyncio.AbstractEventLoop, Any], None] = asyncio.tasks._enter_task
_leave_task: Callable[[asyncio.AbstractEventLoop, Any], None] = asyncio.tasks._leave_task
_register_task: Callable[[Any], None] = asyncio.tasks._register_task
_base_tasks: Any = importlib.import_module("asyncio.base_tasks")

OUTCOME_OK = 0
OUTCOME_TRANSIENT = 1
OUTCOME_PERMANENT = 2

_CANCELLED_TEXT = b"the handler was cancelled"
_INTERRUPTED_TEXT = b"the handler was interrupted"


def report_to_sentry(e: BaseException) -> None:
    """Reports a handler's exception to Sentry when SENTRY_DSN is set and sentry_sdk is importable."""
    if not os.environ.get("SENTRY_DSN"):
        return
    try:
        import sentry_sdk  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return
    sentry_sdk.capture_exception(e)


def _get_loop(fut: Any) -> Any:
    try:
        get_loop = fut.get_loop
    except AttributeError:
        return fut._loop
    return get_loop()


async def _await(awaitable: Any) -> None:
    """Awaits what a handler method returned when it is not a coroutine (as ``await x`` would)."""
    await awaitable


def failure_text(e: BaseException) -> bytes:
    """The failure message the core gets for an exception."""
    return f"{type(e).__name__}: {e}".encode("utf-8", "replace")


class HandlerTask(asyncio.Future[None]):
    """Runs one handler call for a dispatcher; see the module docstring.

    The dispatcher builds it with ``HandlerTask(loop=loop)`` (the C future's
    constructor, no Python-level ``__init__`` on the hot path), sets
    ``_context`` and ``_pctx`` (and ``_direct``), and runs
    ``task._context.run(task._first, method, *args)``. The other fields
    start from the class defaults.
    """

    # Set for every event: slots. The rest lives in the instance dict (which
    # the C future has anyway), created only for a task that needs it.
    __slots__ = ("_pctx", "_context", "_coro")

    _context: contextvars.Context
    _pctx: Context  # the handler's Context: its dispatcher and event
    _coro: Any  # None until the handler method was called
    # Calls the user's handler directly (no ProsodyHandler frame, which
    # would report exceptions to Sentry): report them here.
    _direct: bool = True
    _fut_waiter: asyncio.Future[Any] | None = None
    _must_cancel: bool = False
    _cancel_msg: Any = None
    _num_cancels_requested: int = 0
    _name: str | None = None
    _waited: bool = False  # it has waited at least once (and is registered as a task)

    # ---- the Task API ----

    def get_coro(self) -> Any:
        return self._coro

    def get_context(self) -> contextvars.Context:
        return self._context

    def get_name(self) -> str:
        if self._name is None:
            self._name = f"prosody-handler-{self._pctx._event}"
        return self._name

    def set_name(self, value: object) -> None:
        self._name = str(value)

    def get_stack(self, *, limit: int | None = None) -> list[Any]:
        stack: list[Any] = _base_tasks._task_get_stack(self, limit)
        return stack

    def print_stack(self, *, limit: int | None = None, file: Any = None) -> None:
        _base_tasks._task_print_stack(self, limit, file)

    def cancelling(self) -> int:
        return self._num_cancels_requested

    def uncancel(self) -> int:
        if self._num_cancels_requested > 0:
            self._num_cancels_requested -= 1
            if self._num_cancels_requested == 0:
                self._must_cancel = False
        return self._num_cancels_requested

    def cancel(self, msg: Any = None) -> bool:
        self._log_traceback = False
        if self.done():
            return False
        self._num_cancels_requested += 1
        waiter = self._fut_waiter
        if waiter is not None and waiter.cancel(msg=msg):
            # Leave _fut_waiter: it may be a task that ignores the cancellation.
            return True
        # The next step (already scheduled, or running now) throws CancelledError.
        self._must_cancel = True
        self._cancel_msg = msg
        return True

    def __repr__(self) -> str:
        state = "cancelling" if self._num_cancels_requested and not self.done() else (
            "done" if self.done() else "pending"
        )
        waiter = f" wait_for={self._fut_waiter!r}" if self._fut_waiter is not None else ""
        return f"<HandlerTask {state} name={self.get_name()!r} coro={self._coro!r}{waiter}>"

    # ---- stepping ----

    def _first(self, fn: Callable[..., Any], *args: Any) -> None:
        """The first step, run at once by the dispatcher inside ``self._context``.

        Calls the handler method with this task current, then runs the
        coroutine to its first wait (or its end).
        """
        # Calling the method is inlined (this runs once per event); a handler
        # that never waits ends in the _send below.
        self._coro = None
        loop = self._loop
        _enter_task(loop, self)
        try:
            try:
                try:
                    coro = fn(*args)
                except StopIteration as e:  # as it would leave a coroutine frame (PEP 479)
                    raise RuntimeError("coroutine raised StopIteration") from e
                if type(coro) is not CoroutineType:
                    coro = _await(coro)  # fails as `await coro` would, if it is not awaitable
            except BaseException as e:
                self._failed(e)
                return
            self._coro = coro
            self._send(loop, None)
        finally:
            _leave_task(loop, self)

    def _step(self, exc: BaseException | None) -> None:
        """Every later step (asyncio.Task.__step)."""
        if self.done():
            raise asyncio.InvalidStateError(f"_step(): already done: {self!r}, {exc!r}")
        if self._must_cancel:
            if not isinstance(exc, CancelledError):
                exc = self._cancelled_error()
            self._must_cancel = False
        self._fut_waiter = None
        loop = self._loop
        _enter_task(loop, self)
        try:
            self._send(loop, exc)
        finally:
            _leave_task(loop, self)

    def _send(self, loop: asyncio.AbstractEventLoop, exc: BaseException | None) -> None:
        """Runs the coroutine to its next wait (or its end): the body of a step."""
        try:
            if exc is None:
                result = self._coro.send(None)
            else:
                result = self._coro.throw(exc)
        except StopIteration:
            # Done without waiting: for a first step, the common case.
            self._succeeded()
        except BaseException as e:
            self._failed(e)
        else:
            self._suspend(loop, result)

    def _succeeded(self) -> None:
        ctx = self._pctx
        ctx._done = True
        if ctx._states is not None:
            end_states(ctx)
        if self._waited:
            ctx._disp._complete(ctx._event, OUTCOME_OK, None, True)
        else:
            # Still in the dispatcher's batch, which flushes completions at its end.
            ctx._disp._ok.append(ctx._event)
        if self._must_cancel:
            # Cancelled right before the handler returned (as asyncio.Task).
            self._must_cancel = False
            super().cancel(msg=self._cancel_msg)
        else:
            self.set_result(None)

    def _failed(self, e: BaseException) -> None:
        ctx = self._pctx
        ctx._done = True
        if ctx._states is not None:
            end_states(ctx)
        if isinstance(e, CancelledError):
            outcome, text = OUTCOME_TRANSIENT, _CANCELLED_TEXT
        elif isinstance(e, Exception):
            if self._direct:
                report_to_sentry(e)
            outcome = OUTCOME_PERMANENT if getattr(e, "is_permanent", False) else OUTCOME_TRANSIENT
            text = failure_text(e)
        else:  # KeyboardInterrupt, SystemExit: report, then let them through
            ctx._disp._complete(ctx._event, OUTCOME_TRANSIENT, _INTERRUPTED_TEXT, self._waited)
            super().set_exception(e)
            raise e
        ctx._disp._complete(ctx._event, outcome, text, self._waited)
        if self._must_cancel:
            self._must_cancel = False
            super().cancel(msg=self._cancel_msg)
        else:
            self.set_result(None)

    def _suspend(self, loop: asyncio.AbstractEventLoop, result: Any) -> None:
        if not self._waited:
            self._waited = True
            _register_task(self)
        blocking = getattr(result, "_asyncio_future_blocking", None)
        if blocking is not None:
            # A future yielded by Future.__await__.
            if _get_loop(result) is not loop:
                new_exc = RuntimeError(
                    f"Task {self!r} got Future {result!r} attached to a different loop"
                )
                loop.call_soon(self._step, new_exc, context=self._context)
            elif blocking:
                if result is self:
                    new_exc = RuntimeError(f"Task cannot await on itself: {self!r}")
                    loop.call_soon(self._step, new_exc, context=self._context)
                else:
                    result._asyncio_future_blocking = False
                    result.add_done_callback(self._wakeup, context=self._context)
                    self._fut_waiter = result
                    if self._must_cancel:
                        if result.cancel(msg=self._cancel_msg):
                            self._must_cancel = False
            else:
                new_exc = RuntimeError(
                    f"yield was used instead of yield from in task {self!r} with {result!r}"
                )
                loop.call_soon(self._step, new_exc, context=self._context)
        elif result is None:
            # A bare yield gives up one loop iteration.
            loop.call_soon(self._step, None, context=self._context)
        elif inspect.isgenerator(result):
            new_exc = RuntimeError(
                f"yield was used instead of yield from for generator in task {self!r} with {result!r}"
            )
            loop.call_soon(self._step, new_exc, context=self._context)
        else:
            new_exc = RuntimeError(f"Task got bad yield: {result!r}")
            loop.call_soon(self._step, new_exc, context=self._context)

    def _wakeup(self, future: asyncio.Future[Any]) -> None:
        try:
            future.result()
        except BaseException as exc:  # also a cancellation
            self._step(exc)
        else:
            self._step(None)

    def _cancelled_error(self) -> CancelledError:
        msg = self._cancel_msg
        return CancelledError() if msg is None else CancelledError(msg)
