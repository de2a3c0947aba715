"""Keyword options → the JSON object prosody_client_new reads.

Only options the caller gave (and not None) are sent, so the core applies the
PROSODY_* environment fallback and the defaults, and validates everything; its
messages name the option. Python only converts types: durations from float
seconds or timedelta, lists from str or a sequence of str.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from . import _native

__all__ = ["client_config_json", "duration", "client_options"]

_DURATION = "duration"
_LIST = "list"
_PLAIN = "plain"
_COLLECTIONS = "collections"

# The option table comes from the library's option schema
# (prosody_config_schema): names, types and which options take None as a
# value are the core's, stated once. Python only maps the core's types to
# the conversions below.
_SCHEMA_TYPES = {"duration": _DURATION, "list": _LIST, "collections": _COLLECTIONS}


class _Schema:
    options: dict[str, str] | None = None
    none_is_value: frozenset[str] = frozenset()


def _load_schema() -> None:
    ffi, lib = _native.load()
    out, err = ffi.new("char **"), ffi.new("char **")
    status = lib.prosody_config_schema(out, err)
    if status != _native.OK:
        raise _native.status_error(status, _native.take_error(err))
    try:
        doc = json.loads(ffi.string(out[0]).decode())
    finally:
        lib.prosody_free(out[0])
    entries = [o for o in doc["options"] if not o.get("env_only")]
    _Schema.options = {o["name"]: _SCHEMA_TYPES.get(o["type"], _PLAIN) for o in entries}
    _Schema.none_is_value = frozenset(o["name"] for o in entries if o.get("null_is_value"))


def client_options() -> dict[str, str]:
    """Every option name of ProsodyClient and how its value is converted."""
    if _Schema.options is None:
        _load_schema()
    assert _Schema.options is not None
    return _Schema.options


def duration(value: Any) -> Any:
    """A duration for the core: float seconds from timedelta or a number; strings pass through."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, float) and not math.isfinite(value):
        # JSON has no NaN or infinity; as text the core rejects it naming the option.
        return str(value)
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _list(value: Any) -> Any:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        return value
    return list(value)


def _collections(value: Any) -> Any:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        return value  # the core says what it expects
    configs = []
    for i, definition in enumerate(value):
        config = definition.to_config()
        if not isinstance(config, Mapping):
            raise ValueError(f"state_collections[{i}]: to_config() must return a dict")
        configs.append({k: _plain(v) for k, v in config.items()})
    return configs


_CONVERT = {_DURATION: duration, _LIST: _list, _PLAIN: _plain, _COLLECTIONS: _collections}


def client_config_json(options: Mapping[str, Any], *, owner: str = "ProsodyClient") -> str:
    """Builds the configuration document; warns about (and drops) unknown keywords."""
    doc: dict[str, Any] = {}
    table = client_options()
    for name, value in options.items():
        kind = table.get(name)
        if kind is None:
            warnings.warn(f"{owner}: unknown option {name!r} is ignored", UserWarning, stacklevel=3)
            continue
        if value is None:
            if name in _Schema.none_is_value:
                doc[name] = None
            continue
        if isinstance(value, bool) and kind == _DURATION:
            doc[name] = str(value).lower()  # not a number of seconds: let the core say so
            continue
        doc[name] = _CONVERT[kind](value)
    try:
        return json.dumps(doc, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{owner}: an option value cannot be represented: {e}") from None
