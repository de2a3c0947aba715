"""Run by test_spans.py in a process of its own (the core sets up its span
exporter once per process, from the environment of the first client):
produce -> consume -> schedule -> timer fire with Python handlers, the
core's spans exported to Jaeger over OTLP, the Python spans kept in memory
and printed as JSON for the test to compare with Jaeger's."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import datetime, timedelta, timezone

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

from prosody import AdminClient, Context, EventHandler, Message, ProsodyClient, Timer  # noqa: E402

KAFKA = os.environ.get("PROSODY_TEST_KAFKA", "localhost:9094")
CASSANDRA = os.environ.get("PROSODY_TEST_CASSANDRA", "localhost:9042")


async def main(topic: str, group: str) -> None:
    fired = asyncio.Event()

    class Handler(EventHandler):
        async def on_message(self, context: Context, message: Message) -> None:
            await context.schedule(datetime.now(timezone.utc) + timedelta(seconds=1))

        async def on_timer(self, context: Context, timer: Timer) -> None:
            fired.set()

    admin = AdminClient(bootstrap_servers=KAFKA)
    await admin.create_topic(topic, partition_count=1, replication_factor=1)
    common = {"bootstrap_servers": KAFKA, "probe_port": None, "telemetry_enabled": False, "cassandra_nodes": CASSANDRA}
    consumer = ProsodyClient(group_id=group, subscribed_topics=topic, cassandra_keyspace="prosody_py_spans", **common)
    sender = ProsodyClient(source_system="py-spans-sender", **common)
    await consumer.subscribe(Handler())
    with trace.get_tracer("app").start_as_current_span("request"):
        await sender.send(topic, "k1", {"id": "e1"})
    await asyncio.wait_for(fired.wait(), 90)
    await consumer.unsubscribe()
    consumer._release()
    sender._release()  # the last client: the core's spans are flushed
    await admin.delete_topic(topic)
    out = []
    for s in exporter.get_finished_spans():
        ctx, parent = s.get_span_context(), s.parent
        out.append({"name": s.name, "trace_id": format(ctx.trace_id, "032x"), "span_id": format(ctx.span_id, "016x"),
                    "parent_span_id": format(parent.span_id, "016x") if parent else ""})
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
