"""Construction, option conversion and validation errors."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from datetime import timedelta

import pytest

import prosody
from prosody import ProsodyClient

from conftest import Recorder, mock_client, stop


def test_options_of_every_type_are_accepted() -> None:
    client = mock_client(
        group_id="g", subscribed_topics=["a", "b"], allowed_events="user.,account.",
        send_timeout=timedelta(seconds=2), stall_threshold=60.0, shutdown_timeout=5,
        poll_interval=0.05, commit_interval=timedelta(milliseconds=500), mode="best-effort",
        retry_base=0.01, max_retries=2, max_retry_delay=timedelta(minutes=1), max_concurrency=8,
        max_uncommitted=16, idempotence_cache_size=0, idempotence_ttl=timedelta(days=7),
        idempotence_version="2", slab_size=3600.0, cassandra_retention=timedelta(days=365),
        message_spans="follows_from", timer_spans="child", timeout=10.0, telemetry_enabled=False,
        defer_base=1.0, defer_max_delay=86400.0, defer_failure_threshold=0.9,
        monopolization_threshold=0.9, monopolization_window=300.0, scheduler_wait_weight=200.0,
        cassandra_keyspace="ks", state_recovery_delay=timedelta(seconds=30),
    )
    client._release()


@pytest.mark.parametrize(
    "options, option_name",
    [
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"message_spans": "sideways"}, "message_spans"),
        ({"timer_spans": "sideways"}, "timer_spans"),
        ({"mode": "fastest"}, "mode"),
        ({"idempotence_cache_size": -1}, "idempotence_cache_size"),
        ({"idempotence_ttl": 1.0}, "idempotence_ttl"),
        ({"send_timeout": "soon"}, "send_timeout"),
        ({"state_recovery_delay": 0}, "state_recovery_delay"),
        ({"state_recovery_delay": 2.5}, "state_recovery_delay"),
        ({"state_recovery_delay": float("nan")}, "state_recovery_delay"),
        ({"state_cache_dir": ""}, "state_cache_dir"),
        ({"state_cache_size_bytes": True}, "state_cache_size_bytes"),
        ({"probe_port": 70000}, "probe_port"),
    ],
)
def test_bad_values_raise_value_error_naming_the_option(options: dict[str, object], option_name: str) -> None:
    with pytest.raises(ValueError) as info:
        mock_client(**options)
    assert str(info.value).startswith(f"{option_name}: "), str(info.value)


def test_state_collection_errors_come_from_the_core() -> None:
    with pytest.raises(ValueError) as info:
        mock_client(state_collections=[prosody.value("x"), prosody.map("x")])
    assert str(info.value) == 'state_collections[1].name: duplicate collection name "x"'

    class NotADict:
        def to_config(self) -> object:
            return 3

    with pytest.raises(ValueError, match=r"^state_collections\[0\]: to_config\(\) must return a dict$"):
        mock_client(state_collections=[NotADict()])


def test_unknown_keyword_warns_and_construction_continues() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = mock_client(group_id="g", max_concurency=3)
    assert any("max_concurency" in str(w.message) for w in caught)
    assert client.source_system == "g"
    client._release()


def test_environment_changes_after_load_are_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    # The library is loaded by now (earlier tests made clients); variables set
    # afterwards in this process still count, and so does their removal.
    mock_client()._release()
    monkeypatch.setenv("PROSODY_MAX_CONCURRENCY", "lots")
    with pytest.raises(ValueError, match="PROSODY_MAX_CONCURRENCY"):
        mock_client()
    monkeypatch.setenv("PROSODY_MAX_CONCURRENCY", "4")
    monkeypatch.setenv("PROSODY_SOURCE_SYSTEM", "set-late")
    client = mock_client()
    assert client.source_system == "set-late"
    client._release()
    monkeypatch.delenv("PROSODY_SOURCE_SYSTEM")
    client = mock_client(group_id="g-late")
    assert client.source_system == "g-late"
    client._release()


def test_environment_fallback_and_explicit_precedence() -> None:
    # In a fresh process, where the variables exist before the library loads.
    code = (
        "import warnings, prosody\n"
        "c = prosody.ProsodyClient(mock=True, probe_port=None)\n"
        "print(c.source_system)\n"
        "c = prosody.ProsodyClient(mock=True, probe_port=None, source_system='explicit')\n"
        "print(c.source_system)\n"
        "try:\n"
        "    prosody.ProsodyClient(mock=True, probe_port=None, max_retries=-1)\n"
        "except ValueError as e:\n"
        "    print('error:', e)\n"
    )
    env = dict(os.environ, PROSODY_GROUP_ID="from-env", PROSODY_SOURCE_SYSTEM="env-source",
               PROSODY_BOOTSTRAP_SERVERS="mock:9092", PROSODY_MAX_CONCURRENCY="zero")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    lines = out.stdout.splitlines()
    assert out.returncode != 0 and lines == [], (out.stdout, out.stderr)
    # A bad variable fails construction with a message naming the variable.
    assert "PROSODY_MAX_CONCURRENCY" in out.stderr and "ValueError" in out.stderr
    env["PROSODY_MAX_CONCURRENCY"] = "4"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[:2] == ["env-source", "explicit"]
    assert out.stdout.splitlines()[2].startswith("error: max_retries: ")


def test_source_system_defaults_to_group_id() -> None:
    client = mock_client(group_id="my-group")
    assert client.source_system == "my-group"
    client._release()


async def test_consumer_states_and_repr() -> None:
    client = mock_client(group_id="g", subscribed_topics="t")
    assert await client.consumer_state() == "configured"
    assert "configured" in repr(client) and "configured" in str(client)
    assert await client.assigned_partition_count() == 0
    assert await client.is_stalled() is False
    client._release()
    producer = mock_client()
    assert await producer.consumer_state() == "unconfigured"
    with pytest.raises(RuntimeError):
        await producer.subscribe(Recorder())
    producer._release()


async def test_subscribe_needs_an_event_handler() -> None:
    client = mock_client(group_id="g", subscribed_topics="t")
    with pytest.raises(TypeError, match="^handler must be a subclass of EventHandler$"):
        client.subscribe(object())  # type: ignore[arg-type]
    await stop(client)


def test_a_bad_client_error_is_not_a_value_error_when_it_is_not_config() -> None:
    # An empty bootstrap list is a configuration error: ValueError.
    with pytest.raises(ValueError, match="bootstrap_servers"):
        ProsodyClient(bootstrap_servers=[], mock=True)
