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

__all__ = ["client_config_json", "duration", "CLIENT_OPTIONS"]

_DURATION = "duration"
_LIST = "list"
_PLAIN = "plain"
_COLLECTIONS = "collections"

CLIENT_OPTIONS: dict[str, str] = {
    "bootstrap_servers": _LIST,
    "mock": _PLAIN,
    "source_system": _PLAIN,
    "send_timeout": _DURATION,
    "group_id": _PLAIN,
    "idempotence_cache_size": _PLAIN,
    "idempotence_version": _PLAIN,
    "idempotence_ttl": _DURATION,
    "subscribed_topics": _LIST,
    "allowed_events": _LIST,
    "max_concurrency": _PLAIN,
    "max_uncommitted": _PLAIN,
    "stall_threshold": _DURATION,
    "shutdown_timeout": _DURATION,
    "poll_interval": _DURATION,
    "commit_interval": _DURATION,
    "mode": _PLAIN,
    "retry_base": _DURATION,
    "max_retries": _PLAIN,
    "max_retry_delay": _DURATION,
    "failure_topic": _PLAIN,
    "probe_port": _PLAIN,
    "slab_size": _DURATION,
    "cassandra_nodes": _LIST,
    "cassandra_keyspace": _PLAIN,
    "cassandra_datacenter": _PLAIN,
    "cassandra_rack": _PLAIN,
    "cassandra_user": _PLAIN,
    "cassandra_password": _PLAIN,
    "cassandra_retention": _DURATION,
    "scheduler_failure_weight": _PLAIN,
    "scheduler_max_wait": _DURATION,
    "scheduler_wait_weight": _PLAIN,
    "scheduler_cache_size": _PLAIN,
    "monopolization_enabled": _PLAIN,
    "monopolization_threshold": _PLAIN,
    "monopolization_window": _DURATION,
    "monopolization_cache_size": _PLAIN,
    "defer_enabled": _PLAIN,
    "defer_base": _DURATION,
    "defer_max_delay": _DURATION,
    "defer_failure_threshold": _PLAIN,
    "defer_failure_window": _DURATION,
    "defer_cache_size": _PLAIN,
    "defer_store_cache_size": _PLAIN,
    "defer_seek_timeout": _DURATION,
    "defer_discard_threshold": _PLAIN,
    "timeout": _DURATION,
    "telemetry_topic": _PLAIN,
    "telemetry_enabled": _PLAIN,
    "message_spans": _PLAIN,
    "timer_spans": _PLAIN,
    "state_collections": _COLLECTIONS,
    "state_cache_dir": _PLAIN,
    "state_cache_size_bytes": _PLAIN,
    "state_recovery_delay": _DURATION,
}

# Options where an explicit None is a value, not "unset".
_NONE_IS_VALUE = {"probe_port"}


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
    for name, value in options.items():
        kind = CLIENT_OPTIONS.get(name)
        if kind is None:
            warnings.warn(f"{owner}: unknown option {name!r} is ignored", UserWarning, stacklevel=3)
            continue
        if value is None:
            if name in _NONE_IS_VALUE:
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
