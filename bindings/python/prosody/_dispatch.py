"""Event delivery for one subscription: batches in, batches out, all on the loop thread.

The client's eventfd is watched with ``loop.add_reader``. When it is
readable, ``_drain`` takes ready events with ``prosody_client_poll`` into a
preallocated array until a poll returns fewer than asked. Each batch is
copied by one C call (``prosody_py_pack``, compiled into the cffi module)
into rows of integers and one bytes object, so Python reads no cffi fields
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
from struct import Struct
from typing import Any

from . import _native, _otel
from ._task import OUTCOME_OK, OUTCOME_PERMANENT, HandlerTask
from .context import Context
from .handler import EventHandler, ProsodyHandler, ShutdownSignal
from .message import Message
from .timer import Timer

__all__ = ["Dispatcher"]

_log = logging.getLogger("prosody.dispatch")

POLL_CAPACITY = 256
ARENA_SIZE = 256 * 1024  # a batch that needs more gets an arena of its own

_EVENT_MESSAGE = 1
_EVENT_TIMER = 2
_EVENT_CANCELLED = 3

# One prosody_py_row (build_ffi.py): event, kind, partition, offset,
# timestamp_ms, time_ms, then offsets into the batch's bytes: topic start and
# end, key start and end (the payload starts there), payload end (traceparent
# starts there), traceparent end, tracestate end, baggage end.
_ROW = Struct("=Q13q")
Row = tuple[int, int, int, int, int, int, int, int, int, int, int, int, int, int]

_UTC = timezone.utc
_fromtimestamp = datetime.fromtimestamp
# json.loads(text) is this scanner plus checks for whitespace around the
# document; documents with such whitespace (or not UTF-8, or invalid) take
# json.loads on the bytes, which gives the same result or the same error.
_scan_json: Callable[[str, int], tuple[Any, int]] = getattr(JSONDecoder(), "scan_once")
# A Message built as its dataclass __init__ would, at half the cost.
_new_object = object.__new__
_set_topic, _set_partition, _set_offset, _set_timestamp, _set_key, _set_payload = (
    getattr(Message, name).__set__
    for name in ("topic", "partition", "offset", "timestamp", "key", "payload")
)


# ProsodyHandler's own methods; a patched ProsodyHandler is always called.
_PLAIN = (ProsodyHandler.on_message, ProsodyHandler.on_timer)


class Dispatcher:
    """Runs a client's events on the loop that subscribed."""

    __slots__ = (
        "loop", "_client", "_handler", "_user", "_fd", "_ffi", "_lib", "_buf", "_count",
        "_rows", "_arena", "_inflight", "_ok", "_failed", "_flush_pending",
        "_shutdown", "_topics", "_watching", "_aborted",
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
        self._rows = ffi.new("prosody_py_row[]", POLL_CAPACITY)
        self._arena = ffi.new("char[]", ARENA_SIZE)
        self._inflight: dict[int, Context] = {}  # events whose handlers are waiting
        self._ok = array("Q")  # events done OK, not yet completed
        self._failed: list[tuple[int, int, bytes | None]] = []
        self._flush_pending = False
        self._shutdown = ShutdownSignal()
        self._topics: dict[bytes, str] = {}
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
        lib = self._lib
        poll = lib.prosody_client_poll
        pack = lib.prosody_py_pack
        buf, count, rows = self._buf, self._count, self._rows
        while True:
            status = poll(self._client, buf, POLL_CAPACITY, count, ffi.NULL)
            if status != _native.OK:
                # The client was released or the process forked: nothing more will come.
                _log.debug("prosody_client_poll: %s", _native.status_name(status))
                self.stop()
                return
            n = count[0]
            if n:
                arena = self._arena
                used = pack(buf, n, rows, arena, ARENA_SIZE)
                if used > ARENA_SIZE:  # large payloads: an arena for this batch only
                    arena = ffi.new("char[]", used)
                    used = pack(buf, n, rows, arena, used)
                self._run_batch(_ROW.iter_unpack(ffi.buffer(rows, n * _ROW.size)), ffi.unpack(arena, used))
            if n < POLL_CAPACITY:
                return

    def _run_batch(self, rows: Iterator[Row], data: bytes) -> None:
        # Completions of this batch's handlers are flushed at its end (before
        # the next poll), not scheduled per loop iteration.
        self._flush_pending = True
        try:
            self._dispatch(rows, data)
        except BaseException:
            # A handler raised KeyboardInterrupt or SystemExit: the rest of the
            # batch (already copied out) runs if the loop goes on.
            rest = list(rows)
            if rest:
                self.loop.call_soon(self._run_batch, iter(rest), data)
            raise
        finally:
            self._flush()

    def _dispatch(self, rows: Iterator[Row], data: bytes) -> None:
        loop = self.loop
        inflight = self._inflight
        topics = self._topics
        handler = self._handler
        user = self._user
        # Whether a call needs ProsodyHandler's span; checked once per batch.
        direct = user is not None and not _otel.sdk_installed()
        shutdown = self._shutdown
        scan = _scan_json
        last_topic = -1
        topic = ""
        last_ts = None
        timestamp = None
        for event, kind, partition, offset, ts_ms, time_ms, t0, t1, k0, k1, p1, tp1, ts1, bg1 in rows:
            if self._aborted:
                return  # the library fails the client's remaining events itself
            if kind == _EVENT_CANCELLED:
                ctx = inflight.get(event)
                if ctx is not None:
                    ctx._cancel()
                continue
            ctx = Context(self, event)
            try:
                if t0 != last_topic:
                    raw = data[t0:t1]
                    topic = topics.get(raw)  # type: ignore[assignment]
                    if topic is None:
                        topic = topics[raw] = raw.decode()
                    last_topic = t0
                key = data[k0:k1].decode()
                if kind == _EVENT_MESSAGE:
                    try:
                        text = data[k1:p1].decode()
                        payload, end = scan(text, 0)
                        if end != len(text):
                            raise ValueError
                    except Exception:
                        payload = loads(data[k1:p1])
                    if ts_ms != last_ts:
                        last_ts = ts_ms
                        timestamp = _fromtimestamp(ts_ms / 1000, _UTC)
                    item: Any = _new_object(Message)
                    _set_topic(item, topic)
                    _set_partition(item, partition)
                    _set_offset(item, offset)
                    _set_timestamp(item, timestamp)
                    _set_key(item, key)
                    _set_payload(item, payload)
                else:
                    item = Timer(key, _fromtimestamp(time_ms / 1000, _UTC))
                carrier: dict[str, str] | None = None
                if tp1 != p1 or bg1 != ts1:
                    carrier = {}
                    if tp1 != p1:
                        carrier["traceparent"] = data[p1:tp1].decode()
                        if ts1 != tp1:
                            carrier["tracestate"] = data[tp1:ts1].decode()
                    if bg1 != ts1:
                        carrier["baggage"] = data[ts1:bg1].decode()
            except Exception as e:  # an undecodable payload: the core validated it, so rare
                ctx._done = True
                self._complete(event, OUTCOME_PERMANENT, f"{type(e).__name__}: {e}".encode(), False)
                continue
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
