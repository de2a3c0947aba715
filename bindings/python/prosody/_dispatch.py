"""Event delivery for one subscription: batches in, batches out, all on the loop thread.

The client's eventfd is watched with ``loop.add_reader``. When it is
readable, ``_drain`` takes ready events with ``prosody_client_poll`` into a
preallocated array until a poll returns fewer than asked, and starts one task
per event. Finished events are buffered and completed with one
``prosody_events_complete`` per loop iteration. No Python code runs on a
library thread for events, and the core never hands out a key's next event
before the previous one is completed, so per-key order needs nothing here.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timezone
from json import loads
from typing import Any

from . import _native
from .context import Context
from .handler import ProsodyHandler, ShutdownSignal
from .message import Message
from .timer import Timer

__all__ = ["Dispatcher"]

_log = logging.getLogger("prosody.dispatch")

POLL_CAPACITY = 256

_EVENT_MESSAGE = 1
_EVENT_TIMER = 2
_EVENT_CANCELLED = 3
_OUTCOME_OK = 0
_OUTCOME_TRANSIENT = 1
_OUTCOME_PERMANENT = 2

_UTC = timezone.utc
_fromtimestamp = datetime.fromtimestamp
_NO_CARRIER: dict[str, str] = {}


class Dispatcher:
    """Runs a client's events on the loop that subscribed."""

    __slots__ = (
        "loop", "_client", "_handler", "_fd", "_ffi", "_lib", "_buf", "_count",
        "_cbuf", "_inflight", "_done", "_flush_pending", "_shutdown", "_topics",
        "_create_task", "_watching",
    )

    def __init__(self, client: int, loop: asyncio.AbstractEventLoop, handler: ProsodyHandler, fd: int) -> None:
        ffi, lib = _native.load()
        self.loop = loop
        self._client = client
        self._handler = handler
        self._fd = fd
        self._ffi = ffi
        self._lib = lib
        # Reused for every poll and every batch completion: no per-batch cdata.
        self._buf = ffi.new("prosody_event[]", POLL_CAPACITY)
        self._count = ffi.new("size_t *")
        self._cbuf = ffi.new("prosody_completion[]", POLL_CAPACITY)
        self._inflight: dict[int, Context] = {}
        self._done: list[tuple[int, int, bytes | None]] = []
        self._flush_pending = False
        self._shutdown = ShutdownSignal()
        self._topics: dict[bytes, str] = {}
        self._create_task = loop.create_task
        self._watching = False

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
        unpack = ffi.unpack
        buffer = ffi.buffer
        buf, count = self._buf, self._count
        inflight = self._inflight
        topics = self._topics
        handler = self._handler
        shutdown = self._shutdown
        create_task = self._create_task
        run = self._run
        while True:
            status = poll(self._client, buf, POLL_CAPACITY, count, ffi.NULL)
            if status != _native.OK:
                # The client was released or the process forked: nothing more will come.
                _log.debug("prosody_client_poll: %s", _native.status_name(status))
                self.stop()
                return
            n = count[0]
            for i in range(n):
                ev = buf[i]
                event = ev.event
                kind = ev.kind
                if kind == _EVENT_CANCELLED:
                    ctx = inflight.get(event)
                    if ctx is not None:
                        ctx._cancel()
                    continue
                raw_topic = unpack(ev.topic, ev.topic_len)
                topic = topics.get(raw_topic)
                if topic is None:
                    topic = topics[raw_topic] = raw_topic.decode()
                key = unpack(ev.key, ev.key_len).decode()
                carrier = _NO_CARRIER
                if ev.traceparent_len or ev.baggage_len:
                    carrier = _carrier(ffi, ev)
                ctx = Context(self, event)
                try:
                    if kind == _EVENT_MESSAGE:
                        # Copied out: the event's bytes are borrowed until it is completed.
                        payload = loads(buffer(ev.payload, ev.payload_len)[:])
                        message = Message(
                            topic, ev.partition, ev.offset,
                            _fromtimestamp(ev.timestamp_ms / 1000, _UTC), key, payload,
                        )
                        call = handler.on_message(ctx, message, carrier, shutdown)
                    else:
                        timer = Timer(key, _fromtimestamp(ev.time_ms / 1000, _UTC))
                        call = handler.on_timer(ctx, timer, carrier, shutdown)
                except Exception as e:  # an undecodable payload: the core validated it, so rare
                    ctx._done = True
                    self._finish(event, _OUTCOME_PERMANENT, f"{type(e).__name__}: {e}".encode())
                    continue
                inflight[event] = ctx
                ctx._task = create_task(run(event, ctx, call))
            if n < POLL_CAPACITY:
                return

    async def _run(self, event: int, ctx: Context, call: Any) -> None:
        outcome = _OUTCOME_OK
        text: bytes | None = None
        try:
            await call
        except asyncio.CancelledError:
            outcome, text = _OUTCOME_TRANSIENT, b"the handler was cancelled"
        except Exception as e:
            outcome = _OUTCOME_PERMANENT if getattr(e, "is_permanent", False) else _OUTCOME_TRANSIENT
            text = f"{type(e).__name__}: {e}".encode("utf-8", "replace")
        except BaseException:  # KeyboardInterrupt, SystemExit: report, then let them through
            ctx._done = True
            del self._inflight[event]
            self._finish(event, _OUTCOME_TRANSIENT, b"the handler was interrupted")
            raise
        ctx._done = True
        del self._inflight[event]
        self._finish(event, outcome, text)

    def _finish(self, event: int, outcome: int, text: bytes | None) -> None:
        self._done.append((event, outcome, text))
        if not self._flush_pending:
            self._flush_pending = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        done, self._done = self._done, []
        n = len(done)
        if n == 0:
            return
        ffi = self._ffi
        items = self._cbuf if n <= POLL_CAPACITY else ffi.new("prosody_completion[]", n)
        keep = []  # failure texts must live until the call returns
        null = ffi.NULL
        for i in range(n):
            event, outcome, text = done[i]
            item = items[i]
            item.event = event
            item.outcome = outcome
            if text is None:
                item.message = null
            else:
                c_text = ffi.new("char[]", text)
                keep.append(c_text)
                item.message = c_text
        status = self._lib.prosody_events_complete(items, n, null)
        if status != _native.OK:
            # An event the library already failed (client released): nothing to do.
            _log.debug("prosody_events_complete: %s", _native.status_name(status))


def _carrier(ffi: Any, ev: Any) -> dict[str, str]:
    carrier = {}
    if ev.traceparent_len:
        carrier["traceparent"] = ffi.unpack(ev.traceparent, ev.traceparent_len).decode()
        if ev.tracestate_len:
            carrier["tracestate"] = ffi.unpack(ev.tracestate, ev.tracestate_len).decode()
    if ev.baggage_len:
        carrier["baggage"] = ffi.unpack(ev.baggage, ev.baggage_len).decode()
    return carrier
