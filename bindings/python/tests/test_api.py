"""Module layout, types and error classification (no library needed)."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

import prosody
from prosody import (
    EventHandler,
    EventHandlerError,
    Message,
    NullValueError,
    PermanentError,
    PermanentStateError,
    StateError,
    Timer,
    TransientError,
    TransientStateError,
    permanent,
    transient,
)


def test_every_documented_name_is_exported() -> None:
    names = """ProsodyClient AdminClient Context EventHandler ProsodyHandler Message Timer
    EventHandlerError PermanentError TransientError permanent transient StateError
    PermanentStateError TransientStateError NullValueError Direction value map deque
    message_value message_map message_deque ValueDefinition MapDefinition DequeDefinition
    MessageValueDefinition MessageMapDefinition MessageDequeDefinition ValueState MapState
    DequeState""".split()
    missing = [n for n in names if not hasattr(prosody, n)]
    assert missing == []


@pytest.mark.parametrize(
    "module, names",
    [
        ("prosody.prosody", ["ProsodyClient", "AdminClient"]),
        ("prosody.context", ["Context"]),
        ("prosody.errors", ["EventHandlerError", "TransientError", "PermanentError", "StateError",
                            "PermanentStateError", "TransientStateError", "NullValueError",
                            "transient", "permanent", "create_error_decorator"]),
        ("prosody.handler", ["EventHandler", "ProsodyHandler"]),
        ("prosody.message", ["Message", "JSONValue"]),
        ("prosody.timer", ["Timer"]),
        ("prosody.state", ["Direction", "value", "ValueState", "MapState", "DequeState", "_StateScan"]),
    ],
)
def test_module_layout(module: str, names: list[str]) -> None:
    mod = importlib.import_module(module)
    assert [n for n in names if not hasattr(mod, n)] == []


def test_typing_files_ship_with_the_package() -> None:
    from importlib.resources import files

    pkg = files("prosody")
    for name in ["py.typed", "__init__.pyi", "context.pyi", "errors.pyi", "handler.pyi",
                 "prosody.pyi", "state.pyi"]:
        assert pkg.joinpath(name).is_file(), name


def test_import_does_not_load_the_library_and_quiets_poll_logger() -> None:
    code = (
        "import sys, logging, prosody\n"
        "assert 'prosody._prosody_cffi' not in sys.modules, 'library loaded at import'\n"
        "assert not prosody._native.loaded()\n"
        "assert logging.getLogger('prosody.consumer.poll').level == logging.ERROR\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_event_handler_is_abstract_and_generic() -> None:
    class OnlyMessage(EventHandler):
        async def on_message(self, context, message):  # type: ignore[no-untyped-def]
            pass

    with pytest.raises(TypeError):
        OnlyMessage()  # type: ignore[abstract]
    assert EventHandler[dict] is not None  # type: ignore[type-arg]
    assert Message[dict] is not None  # type: ignore[type-arg]


def test_message_and_timer_are_frozen_dataclasses() -> None:
    ts = datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    m = Message("t", 1, 42, ts, "k", {"a": 1})
    assert (m.topic, m.partition, m.offset, m.timestamp, m.key, m.payload) == ("t", 1, 42, ts, "k", {"a": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.key = "other"  # type: ignore[misc]
    t = Timer("k", ts)
    assert (t.key, t.time) == ("k", ts)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.key = "x"  # type: ignore[misc]


def test_error_hierarchy() -> None:
    assert issubclass(TransientError, EventHandlerError) and TransientError.is_permanent is False
    assert issubclass(PermanentError, EventHandlerError) and PermanentError.is_permanent is True
    assert PermanentStateError.__mro__[1:3] == (StateError, PermanentError)
    assert TransientStateError.__mro__[1:3] == (StateError, TransientError)
    assert NullValueError.__bases__ == (TransientStateError, ValueError)
    assert StateError.__slots__ == ()
    assert "is_permanent" in EventHandlerError.__abstractmethods__


async def test_decorators_classify_and_chain() -> None:
    @permanent(TypeError)
    async def bad_async(x: int) -> int:
        """doc"""
        raise TypeError(f"bad {x}")

    @transient(KeyError)
    def bad_sync() -> None:
        raise KeyError("missing")

    @permanent(TypeError)
    async def other() -> None:
        raise ValueError("not listed")

    with pytest.raises(PermanentError) as info:
        await bad_async(3)
    assert str(info.value) == "bad 3" and isinstance(info.value.__cause__, TypeError)
    assert bad_async.__name__ == "bad_async" and bad_async.__doc__ == "doc"
    assert asyncio.iscoroutinefunction(bad_async)
    with pytest.raises(TransientError) as tinfo:
        bad_sync()
    assert isinstance(tinfo.value.__cause__, KeyError)
    with pytest.raises(ValueError):
        await other()


def test_state_definitions() -> None:
    d = prosody.value("counter", ttl=timedelta(days=30))
    assert d.to_config() == {
        "name": "counter", "kind": "value", "payload": "json", "ttl_seconds": 2592000,
        "read_uncommitted": None, "keyset_limit": None, "capacity": None,
    }
    q = prosody.message_deque("pending", capacity=100, ttl=86400)
    assert q.to_config()["kind"] == "deque" and q.to_config()["payload"] == "message"
    assert q.to_config()["capacity"] == 100
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.name = "x"  # type: ignore[misc]
    assert prosody.Direction.BACKWARD.value == "backward"
