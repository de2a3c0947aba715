"""Against the test broker's secure listeners (SASL_SSL with SCRAM, mutual TLS).

scripts/services describes them in listeners.json (PROSODY_TEST_KAFKA_TLS,
or the default run directory); a broker started without them skips these
tests, saying how to get them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from prosody import AdminClient, Context, Message

from conftest import Recorder, eventually, kafka_client, stop, unique


def _run_dir() -> Path:
    return Path(os.environ.get("PROSODY_SERVICES_RUN") or Path(tempfile.gettempdir()) / "prosody-services")


def _cassandra_tls() -> dict[str, Any]:
    """Timers over TLS with a login (the cassandra-auth node), else over TLS, when the services describe them."""
    for name in ("cassandra-auth", "cassandra"):
        path = _run_dir() / name / "tls" / "tls.json"
        if path.exists():
            c = json.loads(path.read_text())
            opts = {"cassandra_nodes": c["cql"], "cassandra_ssl_enabled": True, "cassandra_ssl_ca_location": c["ca"]}
            if c.get("user"):
                opts.update(cassandra_user=c["user"], cassandra_password=c["password"])
            return opts
    return {}


def _listeners() -> dict[str, str]:
    path = os.environ.get("PROSODY_TEST_KAFKA_TLS") or str(_run_dir() / "kafka" / "tls" / "listeners.json")
    if not os.path.exists(path):
        pytest.skip(f"the Kafka SASL_SSL/SSL listeners are not configured (no {path}): "
                    "restart Kafka with `scripts/services stop kafka && scripts/services start kafka`")
    with open(path) as f:
        data: dict[str, str] = json.load(f)
    return data


def _scram(s: dict[str, str], password: str) -> dict[str, Any]:
    return {"bootstrap_servers": s["sasl_ssl"], "security_protocol": "sasl_ssl",
            "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": s["sasl_username"],
            "sasl_password": password, "ssl_ca_location": s["ca"]}


def _mtls(s: dict[str, str]) -> dict[str, Any]:
    return {"bootstrap_servers": s["ssl"], "security_protocol": "ssl", "ssl_ca_location": s["ca"],
            "ssl_certificate_location": s["client_certificate"], "ssl_key_location": s["client_key"]}


@pytest.mark.parametrize("how", ["scram-sha-512", "mutual-tls"])
async def test_secure_round_trip(how: str, caplog: pytest.LogCaptureFixture) -> None:
    s = _listeners()
    security = _scram(s, s["sasl_password"]) if how == "scram-sha-512" else _mtls(s)
    topic = unique("py-secure")
    admin = AdminClient(**security)
    await asyncio.wait_for(admin.create_topic(topic, partition_count=2, replication_factor=1), 30)

    seen: list[str] = []

    async def on_message(ctx: Context, m: Message) -> None:
        seen.append(m.key)
        await ctx.schedule(datetime.now(timezone.utc) + timedelta(seconds=1))

    handler = Recorder(on_message=on_message)
    caplog.set_level(logging.DEBUG)
    consumer = kafka_client(group_id=unique("g"), subscribed_topics=topic, **security, **_cassandra_tls())
    producer = kafka_client(source_system=unique("src"), send_timeout=30.0, **security)
    await asyncio.wait_for(consumer.subscribe(handler), 60)
    for i in range(10):
        await producer.send(topic, f"k{i}", {"i": i})
    await eventually(lambda: len(set(seen)) == 10, timeout=60, what="10 messages over " + how)
    await eventually(lambda: len({t.key for t in handler.timers}) == 10, timeout=60, what="10 timers")
    await stop(consumer)
    producer._release()
    await admin.delete_topic(topic)
    emitted = caplog.text + repr(consumer) + repr(producer)
    assert s["sasl_password"] not in emitted


async def test_wrong_password_fails_fast_and_is_not_shown() -> None:
    s = _listeners()
    wrong = "py-Wrong-Pa55word-" + unique("x")
    producer = kafka_client(source_system=unique("src"), send_timeout=60.0, **_scram(s, wrong))
    start = time.monotonic()
    with pytest.raises(Exception) as info:
        await asyncio.wait_for(producer.send(unique("t"), "k", {}), 60)
    took = time.monotonic() - start
    message = str(info.value)
    assert "sasl_username / sasl_password" in message and "SCRAM-SHA-512" in message, message
    assert wrong not in message and took < 20, (took, message)
    producer._release()
    with pytest.raises(ValueError) as bad:
        kafka_client(sasl_password=wrong)
    assert "sasl_password: needs security_protocol" in str(bad.value) and wrong not in str(bad.value)
