"""ProsodyClient and AdminClient over libprosody.

The asynchronous methods start their work when called and return an
``asyncio.Future``, so ``client.subscribe(handler)`` subscribes even when the
result is not awaited (as in the documentation's examples); awaiting works
as usual. They must be called with a running event loop.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Literal, TypeVar

from . import _native, _otel
from ._config import client_config_json, duration
from ._dispatch import Dispatcher, watch_loop
from .handler import EventHandler, ProsodyHandler

__all__ = ["ProsodyClient", "AdminClient"]

T = TypeVar("T")
ConsumerState = Literal["unconfigured", "configured", "running"]
_STATES: dict[int, ConsumerState] = {0: "unconfigured", 1: "configured", 2: "running"}


def _after_fork(owner: str) -> RuntimeError:
    return RuntimeError(
        f"{owner} cannot be used after fork. Create a new client in the child process."
    )


def _text(method: str, name: str, value: Any) -> bytes:
    """A str argument as UTF-8; any other type is a TypeError naming the argument."""
    if not isinstance(value, str):
        raise TypeError(f"{method}: {name} must be a str, got {type(value).__name__}")
    try:
        return value.encode()
    except UnicodeEncodeError as e:  # lone surrogates
        raise ValueError(f"{method}: {name} is not valid Unicode text: {e}") from None


def _json_text(payload: Any) -> bytes:
    """The payload as JSON; NaN, infinities and unserializable values are refused, saying so."""
    try:
        return json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    except ValueError as e:
        raise ValueError(f"send: payload cannot be represented as JSON ({e}): JSON has no NaN or infinity") from None
    except TypeError as e:
        raise TypeError(f"send: payload cannot be represented as JSON: {e}") from None


def _registered_collections(doc: str) -> dict[str, tuple[str, str]]:
    """The keyed-state collections the core accepted: name -> (kind, payload)."""
    configs = json.loads(doc).get("state_collections")
    out: dict[str, tuple[str, str]] = {}
    if isinstance(configs, list):
        for c in configs:
            if isinstance(c, dict) and isinstance(c.get("name"), str):
                out[c["name"]] = (str(c.get("kind")), str(c.get("payload")))
    return out


def _is_async(fn: Any) -> bool:
    """Whether calling fn gives a coroutine: async def, also behind decorators that keep it so."""
    return inspect.iscoroutinefunction(fn)


def _done_future(value: T) -> asyncio.Future[T]:
    fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    fut.set_result(value)
    return fut


def _failed_future(exc: BaseException) -> asyncio.Future[Any]:
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    fut.set_exception(exc)
    return fut


def _start(owner: object, call: Any, bad_argument: type[Exception] = RuntimeError) -> asyncio.Future[None]:
    """Runs an ABI call that completes through _prosody_on_done; returns its future.

    The future keeps ``owner`` (the client whose handle the call uses) alive
    until it is done: ``await AdminClient().create_topic(...)`` holds no other
    reference, and the client's finaliser would release the handle while the
    call runs. A call the library refuses at once for a bad argument fails
    with ``bad_argument``; other refusals with RuntimeError.
    """
    loop = asyncio.get_running_loop()
    _native.load()
    fut: asyncio.Future[None] = loop.create_future()

    def keep(_: asyncio.Future[None], _owner: object = owner) -> None:
        pass  # holding _owner was its job; done callbacks go when it runs

    fut.add_done_callback(keep)
    _native.begin(loop, fut, call, bad_argument)
    return fut


class ProsodyClient:
    """A Kafka client: send JSON events, and subscribe a handler to consume them.

    Every option is a keyword argument (see the documentation); options left
    out come from their ``PROSODY_*`` environment variables, then defaults.
    A bad value raises ValueError naming the option; an unknown keyword gives
    a warning that names it.
    """

    def __init__(self, **config: Any) -> None:
        self._handle = 0
        self._pid = os.getpid()
        self._dispatcher: Dispatcher | None = None
        self._subscribing = False
        # What repr shows: identifying options only, never credentials.
        self._shown = {name: config.get(name) for name in ("mode", "group_id", "subscribed_topics", "bootstrap_servers")}
        ffi, lib = _native.load()
        doc = client_config_json(config)
        out = ffi.new("uint64_t *")
        err = ffi.new("char **")
        status = lib.prosody_client_new(doc.encode(), out, err)
        if status != _native.OK:
            exc = ValueError if status == _native.ERR_CONFIG else RuntimeError
            raise _native.status_error(status, _native.take_error(err), exc)
        self._handle = int(out[0])
        self._collections = _registered_collections(doc)
        fd = ffi.new("int *")
        status = lib.prosody_client_event_fd(self._handle, fd, err)
        if status != _native.OK:
            raise _native.status_error(status, _native.take_error(err))
        self._fd = int(fd[0])
        # When the core records spans of its own, it has applied message_spans /
        # timer_spans and hands each handler its span: the handler's span is
        # that span's child. Otherwise the package relates the handler's span
        # to the record's context itself.
        recording = ffi.new("int *")
        core_spans = lib.prosody_tracing_recording(recording, err) == _native.OK and bool(recording[0])
        self._message_follows = not core_spans and _otel.message_spans_follow(config.get("message_spans"))
        self._timer_follows = not core_spans and _otel.timer_spans_follow(config.get("timer_spans"))

    # ---- guards ----

    def _check_fork(self) -> None:
        """First in every public call: in a forked child nothing else may run (no loop, no library)."""
        if os.getpid() != self._pid:
            raise _after_fork(type(self).__name__)

    def _check(self) -> Any:
        self._check_fork()
        if not self._handle:
            raise RuntimeError(f"{type(self).__name__} is closed")
        return _native.load()[1]

    # ---- producing ----

    def send(self, topic: str, key: str, payload: Any) -> asyncio.Future[None]:
        """Sends ``payload`` as JSON under ``key``; resolves when the broker acknowledged it.

        The caller's current OpenTelemetry context travels in the record's
        headers. Fails with RuntimeError, also when ``send_timeout`` expires. A
        topic or key that is not a ``str`` raises TypeError; a topic name Kafka
        refuses, or a payload JSON cannot hold, ValueError; each names the argument.
        """
        self._check_fork()
        topic_b, key_b = _text("send", "topic", topic), _text("send", "key", key)
        data = _json_text(payload)
        try:
            self._check()
        except RuntimeError as e:
            return _failed_future(e)
        ffi = _native.ffi
        trace = ffi.NULL
        keep: list[Any] = []
        if _otel.AVAILABLE:
            carrier = _otel.inject()
            if carrier:
                trace = ffi.new("prosody_trace_context *")
                trace.size = ffi.sizeof("prosody_trace_context")
                for field in ("traceparent", "tracestate", "baggage"):
                    value = carrier.get(field)
                    if value:
                        raw = value.encode()
                        c_value = ffi.new("char[]", raw)
                        keep.append(c_value)
                        setattr(trace, field, c_value)
                        setattr(trace, field + "_len", len(raw))
        handle = self._handle
        return _start(
            self,
            lambda lib, ud, err: lib.prosody_client_send(
                handle, topic_b, len(topic_b), key_b, len(key_b), data, len(data), trace,
                lib._prosody_on_done, ud, err
            ),
            bad_argument=ValueError,
        )

    # ---- consuming ----

    def subscribe(self, handler: EventHandler[Any]) -> asyncio.Future[None]:
        """Starts consuming with ``handler``; its calls run on the current event loop."""
        self._check_fork()
        if not isinstance(handler, EventHandler):
            raise TypeError("handler must be a subclass of EventHandler")
        for name in ("on_message", "on_timer"):
            if not _is_async(getattr(handler, name, None)):
                raise TypeError(
                    f"subscribe: {type(handler).__name__}.{name} must be a coroutine function: "
                    f"define it with `async def {name}(self, context, ...)`"
                )
        try:
            self._check()
        except RuntimeError as e:
            return _failed_future(e)
        if self._dispatcher is not None and self._dispatcher.orphaned():
            # The loop that subscribed has closed, and the consumer was stopped for it.
            self._dispatcher = None
        if self._dispatcher is not None or self._subscribing:
            return _failed_future(RuntimeError("the client is already subscribed: unsubscribe first"))
        loop = asyncio.get_running_loop()
        wrapped = ProsodyHandler(
            handler,
            message_spans_follow=self._message_follows,
            timer_spans_follow=self._timer_follows,
        )
        dispatcher = Dispatcher(self._handle, loop, wrapped, self._fd, self._collections)
        ffi = _native.ffi
        config = ffi.new("prosody_handler_config *")  # notify NULL: we watch the event fd
        config.size = ffi.sizeof("prosody_handler_config")
        handle = self._handle
        self._subscribing = True
        dispatcher.start()
        fut = _start(
            self,
            lambda lib, ud, err: lib.prosody_client_subscribe(handle, config, lib._prosody_on_done, ud, err)
        )

        def subscribed(f: asyncio.Future[None]) -> None:
            self._subscribing = False
            if f.cancelled() or f.exception() is not None:
                dispatcher.stop()
            else:
                self._dispatcher = dispatcher
                watch_loop(dispatcher)

        fut.add_done_callback(subscribed)
        return fut

    def unsubscribe(self) -> asyncio.Future[None]:
        """Stops consuming gracefully: in-flight handlers finish, offsets are committed.

        Handlers still running when the shutdown budget has run out are cancelled.
        """
        self._check_fork()
        try:
            self._check()
        except RuntimeError as e:
            return _failed_future(e)
        dispatcher = self._dispatcher
        if dispatcher is not None and dispatcher.orphaned():
            # The loop that subscribed closed; the consumer is being stopped for it already.
            self._dispatcher = None
            return asyncio.wrap_future(dispatcher.orphan_unsubscribed())
        handle = self._handle
        fut = _start(
            self,
            lambda lib, ud, err: lib.prosody_client_unsubscribe(handle, lib._prosody_on_done, ud, err)
        )

        def unsubscribed(f: asyncio.Future[None]) -> None:
            # The reader stays until the core has the last completion and cancellation notice.
            if self._dispatcher is not None and not f.cancelled() and f.exception() is None:
                self._dispatcher.stop()
                self._dispatcher.abort()  # handlers that outlived the shutdown budget
                self._dispatcher = None

        fut.add_done_callback(unsubscribed)
        return fut

    def consumer_state(self) -> asyncio.Future[ConsumerState]:
        """'unconfigured', 'configured' or 'running'."""
        self._check_fork()
        try:
            return _done_future(self._consumer_state())
        except RuntimeError as e:
            return _failed_future(e)

    def _consumer_state(self) -> ConsumerState:
        lib = self._check()
        ffi = _native.ffi
        state, err = ffi.new("int *"), ffi.new("char **")
        status = lib.prosody_client_consumer_state(self._handle, state, err)
        if status == _native.ERR_CONFIG:
            raise RuntimeError(f"consumer configuration failed: {_native.take_error(err)}")
        if status != _native.OK:
            raise _native.status_error(status, _native.take_error(err))
        return _STATES[int(state[0])]

    def assigned_partition_count(self) -> asyncio.Future[int]:
        """How many partitions the consumer owns (0 unless subscribed)."""
        self._check_fork()
        try:
            lib = self._check()
            ffi = _native.ffi
            count, err = ffi.new("uint32_t *"), ffi.new("char **")
            status = lib.prosody_client_assigned_partition_count(self._handle, count, err)
            if status != _native.OK:
                raise _native.status_error(status, _native.take_error(err))
            return _done_future(int(count[0]))
        except RuntimeError as e:
            return _failed_future(e)

    def is_stalled(self) -> asyncio.Future[bool]:
        """True when a partition made no progress for ``stall_threshold``."""
        self._check_fork()
        try:
            lib = self._check()
            ffi = _native.ffi
            flag, err = ffi.new("int *"), ffi.new("char **")
            status = lib.prosody_client_is_stalled(self._handle, flag, err)
            if status != _native.OK:
                raise _native.status_error(status, _native.take_error(err))
            return _done_future(bool(flag[0]))
        except RuntimeError as e:
            return _failed_future(e)

    @property
    def source_system(self) -> str:
        """The source-system header put on sent records (source_system, else group_id)."""
        lib = self._check()
        ffi = _native.ffi
        out, err = ffi.new("char **"), ffi.new("char **")
        status = lib.prosody_client_source_system(self._handle, out, err)
        if status != _native.OK:
            raise _native.status_error(status, _native.take_error(err))
        try:
            return str(ffi.string(out[0]).decode())
        finally:
            lib.prosody_free(out[0])

    def __repr__(self) -> str:
        shown = getattr(self, "_shown", {})
        if not getattr(self, "_handle", 0):
            state = "closed"
        elif os.getpid() != self._pid:
            state = "unusable after fork"
        else:
            try:
                state = self._consumer_state()
            except RuntimeError as e:
                state = f"unavailable: {e}"
        # Identifying options only (as given; None when left to the
        # environment or the default): never credentials.
        fields = ", ".join(f"{name}={shown.get(name)!r}" for name in ("mode", "group_id", "subscribed_topics", "bootstrap_servers"))
        return f"ProsodyClient({fields}, consumer_state={state!r})"

    __str__ = __repr__

    # ---- lifetime ----

    def _release(self) -> None:
        """Releases the library client now (also done when the object is collected)."""
        handle, self._handle = self._handle, 0
        if not handle or os.getpid() != self._pid:
            return  # in a forked child the Go runtime must not be entered
        if self._dispatcher is not None:
            self._dispatcher.abort()
            self._dispatcher = None
        ffi, lib = _native.ffi, _native.lib
        lib.prosody_client_release(handle, ffi.NULL, ffi.NULL, ffi.NULL)

    def __del__(self) -> None:
        try:
            self._release()
        except Exception:
            pass


class AdminClient:
    """Creates and deletes topics (for tests and tooling; production topics belong in GitOps)."""

    def __init__(
        self,
        *,
        bootstrap_servers: str | Sequence[str] | None = None,
        mock: bool | None = None,
        security_protocol: str | None = None,
        sasl_mechanism: str | None = None,
        sasl_username: str | None = None,
        sasl_password: str | None = None,
        sasl_oauthbearer_token_file: str | None = None,
        ssl_ca_location: str | None = None,
        ssl_certificate_location: str | None = None,
        ssl_key_location: str | None = None,
        ssl_server_name: str | None = None,
        enable_ssl_certificate_verification: bool | None = None,
    ) -> None:
        """``mock=True`` (or PROSODY_MOCK) manages the in-memory cluster of mock mode.

        The security options are the client's (README, Security), for a
        cluster that takes TLS or SASL clients only.
        """
        self._handle = 0
        self._pid = os.getpid()
        ffi, lib = _native.load()
        doc = client_config_json(
            {
                "bootstrap_servers": bootstrap_servers,
                "mock": mock,
                "security_protocol": security_protocol,
                "sasl_mechanism": sasl_mechanism,
                "sasl_username": sasl_username,
                "sasl_password": sasl_password,
                "sasl_oauthbearer_token_file": sasl_oauthbearer_token_file,
                "ssl_ca_location": ssl_ca_location,
                "ssl_certificate_location": ssl_certificate_location,
                "ssl_key_location": ssl_key_location,
                "ssl_server_name": ssl_server_name,
                "enable_ssl_certificate_verification": enable_ssl_certificate_verification,
            },
            owner="AdminClient",
        )
        out, err = ffi.new("uint64_t *"), ffi.new("char **")
        status = lib.prosody_admin_new(doc.encode(), out, err)
        if status != _native.OK:
            exc = ValueError if status == _native.ERR_CONFIG else RuntimeError
            raise _native.status_error(status, _native.take_error(err), exc)
        self._handle = int(out[0])

    def _check(self) -> None:
        if os.getpid() != self._pid:
            raise _after_fork(type(self).__name__)
        if not self._handle:
            raise RuntimeError("AdminClient is closed")

    def create_topic(
        self,
        name: str,
        *,
        partition_count: int | None = None,
        replication_factor: int | None = None,
        cleanup_policy: str | None = None,
        retention: timedelta | float | None = None,
    ) -> asyncio.Future[None]:
        """Creates a topic (an existing one is not an error); unset values use PROSODY_TOPIC_* or the broker."""
        if os.getpid() != self._pid:
            raise _after_fork(type(self).__name__)
        _text("create_topic", "name", name)
        try:
            self._check()
        except RuntimeError as e:
            return _failed_future(e)
        spec: dict[str, Any] = {"name": name}
        for field, value in (
            ("partition_count", partition_count),
            ("replication_factor", replication_factor),
            ("cleanup_policy", cleanup_policy),
            ("retention", None if retention is None else duration(retention)),
        ):
            if value is not None:
                spec[field] = value
        doc = json.dumps(spec).encode()
        handle = self._handle
        return _start(
            self,
            lambda lib, ud, err: lib.prosody_admin_create_topic(handle, doc, lib._prosody_on_done, ud, err)
        )

    def delete_topic(self, name: str) -> asyncio.Future[None]:
        """Deletes a topic."""
        if os.getpid() != self._pid:
            raise _after_fork(type(self).__name__)
        name_b = _text("delete_topic", "name", name)
        try:
            self._check()
        except RuntimeError as e:
            return _failed_future(e)
        handle = self._handle
        return _start(
            self,
            lambda lib, ud, err: lib.prosody_admin_delete_topic(
                handle, name_b, len(name_b), lib._prosody_on_done, ud, err
            ),
            bad_argument=ValueError,
        )

    def __del__(self) -> None:
        handle, self._handle = getattr(self, "_handle", 0), 0
        if handle and os.getpid() == self._pid and _native.lib is not None:
            try:
                _native.lib.prosody_admin_release(handle, _native.ffi.NULL)
            except Exception:
                pass
