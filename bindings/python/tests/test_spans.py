"""The core's spans, exported to the test Jaeger, with Python handlers
nested under them: produce -> consume -> schedule -> timer fire, in both
span relations."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from conftest import unique

JAEGER_OTLP = os.environ.get("PROSODY_TEST_JAEGER_OTLP", "http://localhost:4318")
JAEGER_QUERY = os.environ.get("PROSODY_TEST_JAEGER_QUERY", "http://localhost:16686")


def jaeger_spans(service: str) -> dict[str, dict[str, Any]]:
    url = f"{JAEGER_QUERY}/api/traces?limit=100&service={urllib.parse.quote(service)}"
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            body = json.load(resp)
    except OSError as e:
        pytest.fail(f"Jaeger's query API at {JAEGER_QUERY} is not usable ({e}); run `make services-up`")
    return {s["operationName"]: s for t in body.get("data") or [] for s in t["spans"]}


def refers(span: dict[str, Any], other: dict[str, Any], ref_type: str) -> bool:
    return any(r["refType"] == ref_type and r["spanID"] == other["spanID"] and r["traceID"] == other["traceID"]
               for r in span.get("references") or [])


@pytest.mark.parametrize("relation", ["child", "follows_from"])
async def test_core_spans_in_jaeger_with_python_handlers(relation: str) -> None:
    service = unique("prosody-py")
    env = dict(os.environ, OTEL_EXPORTER_OTLP_ENDPOINT=JAEGER_OTLP, OTEL_SERVICE_NAME=service,
               PROSODY_MESSAGE_SPANS=relation, PROSODY_TIMER_SPANS=relation)
    child = await asyncio.create_subprocess_exec(
        sys.executable, str(Path(__file__).with_name("spans_child.py")), unique("py-spans"), unique("g"),
        env=env, stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(child.communicate(), 180)
    assert child.returncode == 0, "the child failed (its stderr is above)"
    python = {s["name"]: s for s in json.loads(out.decode().strip().splitlines()[-1])}
    assert {"request", "on_message", "on_timer"} <= set(python), python

    core: dict[str, dict[str, Any]] = {}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while not {"send", "receive", "trigger"} <= set(core):
        if loop.time() > deadline:
            pytest.fail(f"the core's spans are not in Jaeger: {sorted(core)}")
        await asyncio.sleep(0.2)
        core = jaeger_spans(service)
    send, receive, trigger = core["send"], core["receive"], core["trigger"]
    # The send span is the child of the application's span it was sent in.
    assert send["references"][0]["spanID"] == python["request"]["span_id"]
    if relation == "child":
        assert refers(receive, send, "CHILD_OF") and refers(trigger, receive, "CHILD_OF")
    else:
        assert receive["traceID"] != send["traceID"] and refers(receive, send, "FOLLOWS_FROM")
        assert trigger["traceID"] != receive["traceID"] and refers(trigger, receive, "FOLLOWS_FROM")
    # The Python handlers' spans nest under the core's.
    assert python["on_message"]["parent_span_id"] == receive["spanID"]
    assert python["on_message"]["trace_id"] == receive["traceID"]
    assert python["on_timer"]["parent_span_id"] == trigger["spanID"]
    tags = {t["key"]: t["value"] for t in receive["tags"]}
    assert tags["key"] == "k1" and tags["offset"] == 0 and tags["partition"] == 0
