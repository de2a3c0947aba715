"""Peak memory under a backlog: Prosody against the original prosody-events 0.4.0 and confluent-kafka.

One topic holds a backlog of --messages (1,000,000 by default, ~200-byte
JSON, 8 partitions, 10,000 keys; uncompressed, or LZ4 batches with
--compression lz4). Each reader runs in a fresh process of
its own, with a fresh consumer group from the earliest offset, for
--seconds after it subscribed (or until it has read the whole backlog),
with a no-op handler; the process then reports the messages it handled
and its peak resident set (``ru_maxrss``: every thread, the Go runtime's
heap and librdkafka's queues alike). Rounds rotate the readers' order;
medians are reported.

Readers:

* ``prosody``: the default configuration (deduplication through Cassandra,
  max_uncommitted 64), so the handlers are slower than the fetches and the
  backlog waits in the consumer's buffers for the whole run;
* ``prosody-nodedup``: the same with ``idempotence_cache_size=0``;
* ``prosody-mu1024``: ``prosody`` with ``max_uncommitted=1024``, to show what
  the bound scales with;
* ``original``: the same reader under prosody-events 0.4.0 at its defaults
  (``scripts/original-venv``), in a keyspace of its own;
* ``confluent``: a confluent-kafka ``consume(1000)`` loop at librdkafka's
  defaults, for scale.

    build/bench-venv/bin/python bindings/python/bench/rss_bench.py \\
        --original-python build/original-venv/bin/python
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

KAFKA = os.environ.get("PROSODY_TEST_KAFKA", "localhost:9094")
CASSANDRA = os.environ.get("PROSODY_TEST_CASSANDRA", "localhost:9042")
READERS = ["prosody", "prosody-nodedup", "prosody-mu1024", "original", "confluent"]


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


async def child_prosody(reader: str, topic: str, messages: int, seconds: float) -> None:
    from prosody import Context, EventHandler, Message, ProsodyClient, Timer

    done = asyncio.Event()

    class Count(EventHandler):
        count = 0

        async def on_message(self, context: Context, message: Message) -> None:
            self.count += 1
            if self.count >= messages:
                done.set()

        async def on_timer(self, context: Context, timer: Timer) -> None:
            pass

    options: dict[str, Any] = {"cassandra_keyspace": "prosody_bench"}
    if reader == "prosody-nodedup":
        options["idempotence_cache_size"] = 0
    elif reader == "prosody-mu1024":
        options["max_uncommitted"] = 1024
    elif reader == "original":
        # The original's migrations refuse a keyspace this package migrated.
        options["cassandra_keyspace"] = "prosody_bench_original"
    client = ProsodyClient(bootstrap_servers=KAFKA, group_id=f"bench-rss-{uuid.uuid4().hex}",
                           subscribed_topics=topic, probe_port=None, telemetry_enabled=False,
                           cassandra_nodes=CASSANDRA, **options)
    handler = Count()
    await client.subscribe(handler)
    try:
        await asyncio.wait_for(done.wait(), timeout=seconds)
    except asyncio.TimeoutError:
        pass
    report({"handled": handler.count, "peak_rss_mib": peak_rss_mib()})


def report(result: dict[str, Any]) -> None:
    """Prints a child's result and ends it at once: leaving the group and
    draining are not what is measured, and the group is of this run alone."""
    print(json.dumps(result), flush=True)
    os._exit(0)


def child_confluent(topic: str, messages: int, seconds: float) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": KAFKA, "group.id": f"bench-rss-ck-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": True})
    consumer.subscribe([topic])
    seen = 0
    end = time.monotonic() + seconds
    while seen < messages and time.monotonic() < end:
        for m in consumer.consume(1000, timeout=0.5):
            if not m.error():
                m.key().decode()
                json.loads(m.value())
                seen += 1
    report({"handled": seen, "peak_rss_mib": peak_rss_mib()})


def run_child(python: str, reader: str, topic: str, messages: int, seconds: float) -> dict[str, Any]:
    cmd = [python, os.path.abspath(__file__), "--child", reader, "--topic", topic,
           "--messages", str(messages), "--seconds", str(seconds)]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, timeout=seconds + 120).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=30.0, help="how long each reader runs")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=READERS, action="append")
    parser.add_argument("--original-python", default="build/original-venv/bin/python")
    parser.add_argument("--topic", help="read this topic (already holding --messages) instead of a new one")
    parser.add_argument("--compression", choices=["none", "lz4"], default="none",
                        help="how the new topic's batches are compressed (lz4: as Prosody's producer writes them)")
    parser.add_argument("--json", help="also write the results to this file as JSON")
    parser.add_argument("--child", choices=READERS, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child == "confluent":
        child_confluent(args.topic, args.messages, args.seconds)
    elif args.child:
        asyncio.run(child_prosody(args.child, args.topic, args.messages, args.seconds))

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench import prefill, write_report

    readers = args.only or READERS
    topic = args.topic
    created = False
    if topic is None:
        from confluent_kafka.admin import AdminClient, NewTopic

        topic = f"bench-rss-{uuid.uuid4().hex[:10]}"
        admin = AdminClient({"bootstrap.servers": KAFKA})
        admin.create_topics([NewTopic(topic, num_partitions=8, replication_factor=1)])[topic].result(30)
        created = True
        start = time.perf_counter()
        prefill(topic, args.messages, 10_000, 200, args.compression)
        print(f"prefilled {topic} with {args.messages} messages in {time.perf_counter() - start:.1f}s", flush=True)
    results: dict[str, dict[str, list[float]]] = {r: {"peak_rss_mib": [], "handled": []} for r in readers}
    try:
        for round_no in range(args.rounds):
            order = readers[round_no % len(readers):] + readers[:round_no % len(readers)]
            for reader in order:
                python = args.original_python if reader == "original" else sys.executable
                r = run_child(python, reader, topic, args.messages, args.seconds)
                results[reader]["peak_rss_mib"].append(r["peak_rss_mib"])
                results[reader]["handled"].append(r["handled"])
                print(f"round {round_no + 1} {reader:16s} peak RSS {r['peak_rss_mib']:7.1f} MiB, "
                      f"handled {r['handled']:>9,}", flush=True)
        print("medians:")
        for reader in readers:
            print(f"  {reader:16s} peak RSS {statistics.median(results[reader]['peak_rss_mib']):7.1f} MiB, "
                  f"handled {statistics.median(results[reader]['handled']):>11,.0f}")
        if args.json:
            params: dict[str, object] = {"messages": args.messages, "seconds": args.seconds, "rounds": args.rounds,
                                         "partitions": 8, "keys": 10_000, "size": 200,
                                         "compression": args.compression}
            write_report(args.json, "bindings/python/bench/rss_bench.py", "original", params, results, unit="MiB")
    finally:
        if created:
            from confluent_kafka.admin import AdminClient

            cleanup = AdminClient({"bootstrap.servers": KAFKA})
            cleanup.delete_topics([topic])[topic].result(30)


if __name__ == "__main__":
    main()
