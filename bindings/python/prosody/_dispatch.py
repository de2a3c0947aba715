"""Event delivery for one subscription: batches in, batches out, all on the loop thread.

The client's wake-up fd is watched with ``loop.add_reader``. When it is
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
import concurrent.futures
import logging
import select
import threading
import weakref
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

__all__ = ["Dispatcher", "watch_loop"]

_log = logging.getLogger("prosody.dispatch")

POLL_CAPACITY = 256

_EVENT_MESSAGE = 1
_EVENT_TIMER = 2
_EVENT_CANCELLED = 3
_EVENT_EXPIRED = 4
_OUTCOME_ABORT = 3

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


_EVENT_SIZE = 0  # sizeof(prosody_event), set when the first Dispatcher is made


class Dispatcher:
    """Runs a client's events on the loop that subscribed."""

    __slots__ = (
        "loop", "_client", "_handler", "_user", "_fd", "_ffi", "_lib", "_buf", "_count",
        "_builder", "_inflight", "_expired", "_ok", "_failed", "_flush_pending",
        "_shutdown", "_watching", "_aborted", "_orphan", "collections", "__weakref__",
    )

    def __init__(self, client: int, loop: asyncio.AbstractEventLoop, handler: ProsodyHandler, fd: int,
                 collections: dict[str, tuple[str, str]] | None = None) -> None:
        global _EVENT_SIZE
        ffi, lib = _native.load()
        _EVENT_SIZE = ffi.sizeof("prosody_event")
        self.loop = loop
        # The client's keyed-state collections: name -> (kind, payload).
        self.collections = collections
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
        # Expired events whose cancelled tasks have not finished: the library
        # keeps their bytes until they are completed (the outcome is ignored).
        self._expired: set[int] = set()
        self._ok = array("Q")  # events done OK, not yet completed
        self._failed: list[tuple[int, int, bytes | None]] = []
        self._flush_pending = False
        self._shutdown = ShutdownSignal()
        self._watching = False
        self._aborted = False
        # Set once the loop has closed under a subscription: the result of
        # the unsubscribe made for it (see _orphaned).
        self._orphan: concurrent.futures.Future[None] | None = None

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

    def orphaned(self) -> bool:
        """Whether the loop that subscribed has closed and the consumer was stopped for it."""
        return self._orphan is not None

    def orphan_unsubscribed(self) -> concurrent.futures.Future[None]:
        assert self._orphan is not None
        return self._orphan

    def _orphaned(self) -> None:
        """The loop has closed while subscribed (on a thread of watch_loop's).

        No handler can run again: the client unsubscribes now, and the events
        held, and those that still arrive until it has, are aborted (their
        offsets stay uncommitted, for the partitions' next owner), rather
        than the consumer running on with nobody to handle its events.
        """
        ffi, lib = self._ffi, self._lib
        fut: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._orphan = fut
        self._aborted = True
        _log.error(
            "the event loop that subscribed this client was closed while it was subscribed: "
            "its handlers cannot run; unsubscribing now (events in flight are left uncommitted, for the next owner)"
        )
        self._flush()  # outcomes the loop did not get to send

        client = self._client
        _native.begin(None, fut, lambda lib, ud, err: lib.prosody_client_unsubscribe(client, lib._prosody_on_done, ud, err))
        # Aborted, not failed: no retry, no commit; the partitions' next
        # owner handles these events again.
        text = b"the event loop that subscribed was closed"
        for event in [*self._inflight, *self._expired]:
            lib.prosody_event_complete(event, _OUTCOME_ABORT, text, ffi.NULL)
        self._inflight.clear()
        self._expired.clear()
        buf = ffi.new("prosody_event[]", POLL_CAPACITY)
        count = ffi.new("size_t *")
        size = ffi.sizeof("prosody_event")
        while not fut.done():
            select.select([self._fd], [], [], 0.05)
            while lib.prosody_client_poll(self._client, buf, POLL_CAPACITY, size, count, ffi.NULL) == _native.OK and count[0]:
                for i in range(count[0]):
                    if buf[i].kind in (_EVENT_MESSAGE, _EVENT_TIMER):
                        lib.prosody_event_complete(buf[i].event, _OUTCOME_ABORT, text, ffi.NULL)

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
            status = poll(self._client, buf, POLL_CAPACITY, _EVENT_SIZE, count, ffi.NULL)
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
            if kind == _EVENT_EXPIRED:
                # The handler ran past its timeout and the library has given
                # up on it (its attempt failed transiently): cancel its task.
                # Its outcome, when it comes, is ignored.
                ctx = inflight.pop(event, None)
                if ctx is not None:
                    self._expired.add(event)
                    ctx._cancel()
                    if ctx._task is not None:
                        ctx._task.cancel("prosody: the handler ran past its timeout")
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
            self._expired.discard(event)
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


# ---- loops that close under a subscription ----

# The dispatchers whose loops are watched. A loop has no hook for its
# closing, so one thread checks them every _WATCH_TICK while any
# subscription runs (reading is_closed(), nothing more, under the GIL).
_WATCH_TICK = 0.5
_watched: weakref.WeakSet[Dispatcher] = weakref.WeakSet()
_watch_lock = threading.Lock()
_watch_running = False


def watch_loop(dispatcher: Dispatcher) -> None:
    """Watches the loop of a subscription that started; see Dispatcher._orphaned."""
    global _watch_running
    with _watch_lock:
        _watched.add(dispatcher)
        if _watch_running:
            return
        _watch_running = True
    threading.Thread(target=_watch, name="prosody-loop-watch", daemon=True).start()


def _watch() -> None:
    global _watch_running
    tick = threading.Event()
    while True:
        tick.wait(_WATCH_TICK)
        with _watch_lock:
            live = [d for d in _watched if d._watching and not d._aborted]
            closed = [d for d in live if d.loop.is_closed()]
            for d in _watched.copy():
                if d not in live or d in closed:
                    _watched.discard(d)
            if not _watched:
                _watch_running = False
        for d in closed:
            threading.Thread(target=d._orphaned, name="prosody-orphan", daemon=True).start()
        if not closed and not live:
            return
