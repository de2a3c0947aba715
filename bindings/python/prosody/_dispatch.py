"""Event delivery for one subscription: batches in, batches out, all on the loop thread.

The client's eventfd is watched with ``loop.add_reader``. When it is
readable, ``_drain`` takes ready events with ``prosody_client_poll`` into a
preallocated array until a poll returns fewer than asked. One C call per
batch (``prosody._batch``) builds every event's Message or Timer, trace
carrier and Context from the array, so Python reads no cffi fields and decodes nothing
per event. Every event then starts its handler at once (``HandlerTask``): a
handler that never waits completes inside ``_drain`` without a task being
scheduled; one that waits goes on as a task. Finished events are completed
in batches: after each polled batch, and once per loop iteration for
handlers that waited. The batches go to ``prosody_py_complete``, which hands
them to a helper thread that calls ``prosody_events_complete``, so the
core's completion work does not run on the event loop. No Python code runs
on a library thread, and the core never hands out a key's next event before
the previous one is completed, so per-key order needs nothing here.
"""

from __future__ import annotations

import asyncio
import logging
from array import array
from collections.abc import Callable, Iterator
from contextvars import copy_context
from datetime import datetime, timezone
from json import JSONDecoder, loads
from typing import Any

from . import _native, _otel
from ._batch import KIND_FAILED, KIND_INTERRUPTED, Builder
from ._task import OUTCOME_OK, OUTCOME_PERMANENT, OUTCOME_TRANSIENT, HandlerTask, failure_text
from .context import _INITIAL_SLOTS, Context
from .handler import EventHandler, ProsodyHandler, ShutdownSignal
from .message import Message
from .timer import Timer

__all__ = ["Dispatcher"]

_log = logging.getLogger("prosody.dispatch")

POLL_CAPACITY = 256

_EVENT_MESSAGE = 1
_EVENT_CANCELLED = 3

_INTERRUPTED_TEXT = b"building the event was interrupted"

# One built event (prosody/_batch.c): the event handle, its kind (a
# PROSODY_EVENT_*, KIND_FAILED or KIND_INTERRUPTED), the Message or Timer
# (for the last two the exception that building it raised; None for a
# cancellation notice), the trace
# carrier or None, and the handler's Context (None unless there is a handler
# to call).
Row = tuple[int, int, Any, dict[str, str] | None, Any]

_UTC = timezone.utc
# json.loads(text) is this scanner plus checks for whitespace around the
# document; _batch takes json.loads on the bytes for any other document (with
# such whitespace, not UTF-8, or invalid), which gives the same result or the
# same error.
_scan_json: Callable[[str, int], tuple[Any, int]] = getattr(JSONDecoder(), "scan_once")


# ProsodyHandler's own methods; a patched ProsodyHandler is always called.
_PLAIN = (ProsodyHandler.on_message, ProsodyHandler.on_timer)


class Dispatcher:
    """Runs a client's events on the loop that subscribed."""

    __slots__ = (
        "loop", "_client", "_handler", "_user", "_fd", "_ffi", "_lib", "_buf", "_count",
        "_builder", "_inflight", "_ok", "_failed", "_flush_pending",
        "_shutdown", "_watching", "_aborted",
    )

    def __init__(self, client: int, loop: asyncio.AbstractEventLoop, handler: ProsodyHandler, fd: int) -> None:
        ffi, lib = _native.load()
        self.loop = loop
        self._client = client
        self._handler = handler
        # The plain ProsodyHandler adds nothing to a call without trace
        # context or SDK (no span to open, nothing to race): such calls go to
        # the user's handler directly.
        plain = type(handler) is ProsodyHandler and (ProsodyHandler.on_message, ProsodyHandler.on_timer) == _PLAIN
        self._user: EventHandler[Any] | None = handler.handler if plain else None
        self._fd = fd
        self._ffi = ffi
        self._lib = lib
        # Reused for every poll: no per-batch cdata.
        self._buf = ffi.new("prosody_event[]", POLL_CAPACITY)
        self._count = ffi.new("size_t *")
        self._builder = Builder(
            self._buf, int(ffi.cast("uintptr_t", self._buf)), POLL_CAPACITY,
            Message, Timer, _scan_json, loads, datetime.fromtimestamp, _UTC,
            Context, _INITIAL_SLOTS, self,
        )
        self._inflight: dict[int, Context] = {}  # events whose handlers are waiting
        self._ok = array("Q")  # events done OK, not yet completed
        self._failed: list[tuple[int, int, bytes | None]] = []
        self._flush_pending = False
        self._shutdown = ShutdownSignal()
        self._watching = False
        self._aborted = False

    def library(self) -> tuple[Any, Any]:
        return self._ffi, self._lib

    def start(self) -> None:
        self.loop.add_reader(self._fd, self._drain)
        self._watching = True

    def stop(self) -> None:
        """Stops watching the event fd (after unsubscribe completed, or before release)."""
        if self._watching:
            self._watching = False
            try:
                self.loop.remove_reader(self._fd)
            except Exception:  # the loop may be closed already
                pass

    def abort(self) -> None:
        """The client is going away: cancel every running handler task."""
        self._aborted = True  # also stops the batch being dispatched, if a handler released the client
        self.stop()
        self._shutdown.set()
        for ctx in list(self._inflight.values()):
            ctx._cancel()
            if ctx._task is not None:
                ctx._task.cancel()

    def query_cancel(self, event: int) -> bool:
        flag = self._ffi.new("int *")
        status = self._lib.prosody_event_should_cancel(event, flag, self._ffi.NULL)
        return status != _native.OK or bool(flag[0])

    # ---- the hot path ----

    def _drain(self) -> None:
        ffi = self._ffi
        poll = self._lib.prosody_client_poll
        build = self._builder.build
        buf, count = self._buf, self._count
        while True:
            status = poll(self._client, buf, POLL_CAPACITY, count, ffi.NULL)
            if status != _native.OK:
                # The client was released or the process forked: nothing more will come.
                _log.debug("prosody_client_poll: %s", _native.status_name(status))
                self.stop()
                return
            n = count[0]
            if n:
                self._run_batch(iter(build(n)))
            if n < POLL_CAPACITY:
                return

    def _run_batch(self, rows: Iterator[Row]) -> None:
        # Completions of this batch's handlers are flushed at its end (before
        # the next poll), not scheduled per loop iteration.
        self._flush_pending = True
        try:
            self._dispatch(rows)
        except BaseException:
            # A handler raised KeyboardInterrupt or SystemExit: the rest of the
            # batch (already built) runs if the loop goes on.
            rest = list(rows)
            if rest:
                self.loop.call_soon(self._run_batch, iter(rest))
            raise
        finally:
            self._flush()

    def _dispatch(self, rows: Iterator[Row]) -> None:
        loop = self.loop
        inflight = self._inflight
        handler = self._handler
        user = self._user
        # Whether a call needs ProsodyHandler's span; checked once per batch.
        direct = user is not None and not _otel.sdk_installed()
        shutdown = self._shutdown
        for event, kind, item, carrier, ctx in rows:
            if self._aborted:
                return  # the library fails the client's remaining events itself
            if kind == _EVENT_CANCELLED:
                ctx = inflight.get(event)
                if ctx is not None:
                    ctx._cancel()
                continue
            if kind == KIND_FAILED:
                # An undecodable payload (the core validated it, so rare): item is the error.
                self._complete(event, OUTCOME_PERMANENT, failure_text(item), False)
                continue
            if kind == KIND_INTERRUPTED:
                # KeyboardInterrupt or SystemExit while the event was built: it
                # is retried, and the interruption goes on (_run_batch keeps
                # the rest of the batch).
                self._complete(event, OUTCOME_TRANSIENT, _INTERRUPTED_TEXT, False)
                raise item
            task = HandlerTask(loop=loop)
            task._pctx = ctx
            task._context = context = copy_context()
            if direct and carrier is None:
                assert user is not None
                method = user.on_message if kind == _EVENT_MESSAGE else user.on_timer
                context.run(task._first, method, ctx, item)
            else:
                task._direct = False
                wrapper = handler.on_message if kind == _EVENT_MESSAGE else handler.on_timer
                context.run(task._first, wrapper, ctx, item, carrier or {}, shutdown)
            if not task.done():
                ctx._task = task
                inflight[event] = ctx

    def _complete(self, event: int, outcome: int, text: bytes | None, waited: bool) -> None:
        """An event's handler is done: buffer its completion."""
        if waited:
            self._inflight.pop(event, None)
        if outcome == OUTCOME_OK:
            self._ok.append(event)
        else:
            self._failed.append((event, outcome, text))
        if not self._flush_pending:
            self._flush_pending = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        ok, failed = self._ok, self._failed
        n_ok, n_failed = len(ok), len(failed)
        if not n_ok and not n_failed:
            return
        ffi = self._ffi
        null = ffi.NULL
        items = null
        keep = []  # failure texts must live until the call returns (the helper copies them)
        if n_failed:
            self._failed = []
            items = ffi.new("prosody_completion[]", n_failed)
            for i in range(n_failed):
                event, outcome, text = failed[i]
                item = items[i]
                item.event = event
                item.outcome = outcome
                if text is not None:
                    c_text = ffi.new("char[]", text)
                    keep.append(c_text)
                    item.message = c_text
        if n_ok:
            with ffi.from_buffer("uint64_t[]", ok) as ok_items:
                status = self._lib.prosody_py_complete(ok_items, n_ok, items, n_failed)
            del ok[:]
        else:
            status = self._lib.prosody_py_complete(null, 0, items, n_failed)
        if status != _native.OK:
            # Events the library already failed (client released), or a fork.
            _log.debug("prosody_py_complete: %s", _native.status_name(status))
