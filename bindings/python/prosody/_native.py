"""Loading libprosody lazily, the fork guard, and the callbacks from library threads.

``import prosody`` does not load the library: the Go runtime starts when the
shared library is loaded and does not survive ``fork()``. It is loaded on
first use (the first client), and the pid is recorded then; in a process
forked after that, every use raises a clear RuntimeError instead of hanging.

Completion callbacks (send, subscribe, timers, keyed state, admin, ...) run on library
threads. One trampoline serves them all: ``user_data`` is a small integer
key into ``_pending``, and the result is handed to the owning event loop with
``call_soon_threadsafe``. Events themselves never take this path: they are
polled in batches on the loop (see _dispatch.py).
"""

from __future__ import annotations

import asyncio
import atexit
import importlib
import itertools
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["load", "loaded", "register", "unregister", "begin", "take_error", "status_error"]

# Status codes of include/prosody.h.
OK = 0
ERR_INVALID_ARGUMENT = 1
ERR_INVALID_HANDLE = 2
ERR_CONFIG = 3
ERR_STATE = 4
ERR_TRANSIENT = 5
ERR_PERMANENT = 6
ERR_TERMINAL = 7
ERR_CANCELLED = 8
ERR_CLOSED = 9
ERR_AFTER_FORK = 10
ERR_INTERNAL = 11
ERR_NULL_VALUE = 12

_STATUS_NAMES = {
    OK: "PROSODY_OK",
    ERR_INVALID_ARGUMENT: "PROSODY_ERR_INVALID_ARGUMENT",
    ERR_INVALID_HANDLE: "PROSODY_ERR_INVALID_HANDLE",
    ERR_CONFIG: "PROSODY_ERR_CONFIG",
    ERR_STATE: "PROSODY_ERR_STATE",
    ERR_TRANSIENT: "PROSODY_ERR_TRANSIENT",
    ERR_PERMANENT: "PROSODY_ERR_PERMANENT",
    ERR_TERMINAL: "PROSODY_ERR_TERMINAL",
    ERR_CANCELLED: "PROSODY_ERR_CANCELLED",
    ERR_CLOSED: "PROSODY_ERR_CLOSED",
    ERR_AFTER_FORK: "PROSODY_ERR_AFTER_FORK",
    ERR_INTERNAL: "PROSODY_ERR_INTERNAL",
    ERR_NULL_VALUE: "PROSODY_ERR_NULL_VALUE",
}

LIBRARY_AFTER_FORK = (
    "prosody cannot be used after fork: libprosody was loaded before this process was "
    "forked, and its Go runtime does not survive fork(). Create clients in the child "
    "only, without using prosody in the parent before forking."
)

_LOG_LEVELS = {1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}

ffi: Any = None
lib: Any = None
_loaded_pid = 0
_load_lock = threading.Lock()

# A settle function runs on the owning loop with (status, result, message).
Settle = Callable[[int, Any, "str | None"], None]
# Loop None: the settle function runs on the library thread itself.
_pending: dict[int, tuple[asyncio.AbstractEventLoop | None, Settle]] = {}
_ids = itertools.count(1)


def loaded() -> bool:
    """Whether libprosody is loaded in this process (or in the parent it was forked from)."""
    return lib is not None


def load() -> tuple[Any, Any]:
    """Returns (ffi, lib), loading libprosody on first use."""
    if lib is not None:
        if os.getpid() != _loaded_pid:
            raise RuntimeError(LIBRARY_AFTER_FORK)
        return ffi, lib
    with _load_lock:
        if lib is None:
            _load()
    return ffi, lib


def _load() -> None:
    global ffi, lib, _loaded_pid
    mod = importlib.import_module("prosody._prosody_cffi")
    _ffi, _lib = mod.ffi, mod.lib
    # cffi is untyped; give the decorator a type so the trampolines stay checked.
    extern: Callable[..., Callable[[Callable[..., None]], Callable[..., None]]] = _ffi.def_extern

    @extern(name="_prosody_on_done")
    def _on_done(user_data: Any, status: int, message: Any) -> None:
        entry = _pending.pop(int(_ffi.cast("uintptr_t", user_data)), None)
        if entry is None:
            return
        text = _ffi.string(message).decode("utf-8", "replace") if message else None
        _deliver(entry, status, None, text)

    @extern(name="_prosody_on_times")
    def _on_times(user_data: Any, status: int, times_ms: Any, count: int, message: Any) -> None:
        entry = _pending.pop(int(_ffi.cast("uintptr_t", user_data)), None)
        if entry is None:
            return
        times = [times_ms[i] for i in range(count)] if count else []
        text = _ffi.string(message).decode("utf-8", "replace") if message else None
        _deliver(entry, status, times, text)

    @extern(name="_prosody_on_state")
    def _on_state(user_data: Any, status: int, items: Any, n: int, number: int, message: Any) -> None:
        entry = _pending.pop(int(_ffi.cast("uintptr_t", user_data)), None)
        if entry is None:
            return
        copied = state_items(_ffi, items, n) if n else []
        text = _ffi.string(message).decode("utf-8", "replace") if message else None
        _deliver(entry, status, (copied, int(number)), text)

    @extern(name="_prosody_on_log")
    def _on_log(user_data: Any, record: Any) -> None:
        try:
            level = _LOG_LEVELS.get(record.level, logging.INFO)
            name = _ffi.string(record.target).decode("utf-8", "replace") or "prosody"
            logger = logging.getLogger(name)
            if not logger.isEnabledFor(level):
                return
            text = _ffi.string(record.message).decode("utf-8", "replace")
            attrs = _ffi.string(record.attributes).decode("utf-8", "replace")
            rec = logger.makeRecord(
                name, level, "(prosody)", 0, "%s %s" if attrs else "%s",
                (text, attrs) if attrs else (text,), None,
                extra={"prosody_attributes": attrs},
            )
            rec.created = record.time_ms / 1000.0
            logger.handle(rec)
        except Exception:  # never let a logging failure reach the library thread
            pass

    status = _lib.prosody_set_log_callback(_lib._prosody_on_log, _ffi.NULL, _ffi.NULL)
    if status != OK:
        raise status_error(status, "prosody_set_log_callback failed")
    ffi, lib, _loaded_pid = _ffi, _lib, os.getpid()
    atexit.register(_at_exit)


# One item a prosody_state_fn reported, copied: the key and the value as
# bytes, each None when absent (NULL).
StateItem = tuple[bytes | None, bytes | None]


def state_items(_ffi: Any, items: Any, n: int) -> list[StateItem]:
    """Copies the items a prosody_state_fn reported (valid only during the call)."""
    out: list[StateItem] = []
    for i in range(n):
        item = items[i]
        key = _ffi.unpack(item.key, item.key_len) if item.key else None
        value = _ffi.buffer(item.value, item.value_len)[:] if item.value else None
        out.append((key, value))
    return out


def _deliver(
    entry: tuple[asyncio.AbstractEventLoop | None, Settle], status: int, result: Any, text: str | None
) -> None:
    loop, settle = entry
    if loop is None:
        settle(status, result, text)
        return
    try:
        loop.call_soon_threadsafe(settle, status, result, text)
    except RuntimeError:  # the loop was closed meanwhile: nobody waits any more
        pass


def _at_exit() -> None:
    # Python must not be called from library threads while the interpreter
    # finalizes: restore the library's own stderr logging.
    if lib is not None and os.getpid() == _loaded_pid:
        lib.prosody_set_log_callback(ffi.NULL, ffi.NULL, ffi.NULL)
    _pending.clear()


def register(loop: asyncio.AbstractEventLoop | None, settle: Settle) -> tuple[int, Any]:
    """Registers a pending operation; returns its id and the user_data pointer for C."""
    key = next(_ids)
    _pending[key] = (loop, settle)
    return key, ffi.cast("void *", key)


def begin(loop: asyncio.AbstractEventLoop | None, fut: Any, call: Any,
          bad_argument: type[Exception] = RuntimeError) -> None:
    """Runs an ABI call that completes through _prosody_on_done and settles ``fut`` with its outcome.

    ``fut`` is an asyncio future of ``loop``, or (loop None) a
    concurrent.futures.Future settled on the library thread. A call the
    library refuses at once fails ``fut`` then: with ``bad_argument`` for a
    bad argument, else RuntimeError.
    """

    def settle(status: int, _result: Any, message: str | None) -> None:
        if fut.done():
            return
        if status == OK:
            fut.set_result(None)
        else:
            fut.set_exception(status_error(status, message))

    key, ud = register(loop, settle)
    err = ffi.new("char **")
    status = call(lib, ud, err)
    if status != OK:
        unregister(key)
        exc = bad_argument if status == ERR_INVALID_ARGUMENT else RuntimeError
        fut.set_exception(status_error(status, take_error(err), exc))


def unregister(key: int) -> None:
    """Forgets an operation whose C call failed at once (its callback never runs)."""
    _pending.pop(key, None)


def take_error(err: Any) -> str | None:
    """Reads and frees the library-owned message in ``*err``."""
    ptr = err[0]
    if not ptr:
        return None
    try:
        return str(ffi.string(ptr).decode("utf-8", "replace"))
    finally:
        lib.prosody_free(ptr)
        err[0] = ffi.NULL


def status_error(status: int, message: str | None, exc: type[Exception] = RuntimeError) -> Exception:
    """The exception for a failed call: ``exc`` with the library's message."""
    if status == ERR_AFTER_FORK:
        return RuntimeError(message or LIBRARY_AFTER_FORK)
    text = message or _STATUS_NAMES.get(status, f"status {status}")
    return exc(text)


def status_name(status: int) -> str:
    return _STATUS_NAMES.get(status, f"PROSODY_ERR_UNKNOWN({status})")
