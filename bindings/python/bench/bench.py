"""No-op handler throughput: Prosody vs confluent-kafka's consume(n) loop vs aiokafka's getmany loop.

All three read the same pre-filled topic on the real broker, each with a
fresh consumer group from the earliest offset, in one run. Every consumer
does the same per-message work a handler needs: decode the key and parse the
JSON payload. Prosody runs a no-op ``async def on_message``.

    build/python-venv/bin/python bindings/python/bench/bench.py --messages 200000

Needs confluent-kafka and aiokafka (see BENCHMARKS.md) and Kafka at
PROSODY_TEST_KAFKA (default localhost:9094).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
import uuid


from prosody import AdminClient, Context, EventHandler, Message, ProsodyClient, Timer

KAFKA = os.environ.get("PROSODY_TEST_KAFKA", "localhost:9094")


def prefill(topic: str, messages: int, keys: int, size: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": KAFKA, "linger.ms": 20, "batch.num.messages": 10000,
                         "enable.idempotence": True})
    rng = random.Random(1)
    filler = "x" * max(0, size - 60)
    for i in range(messages):
        key = f"key-{rng.randrange(keys)}"
        value = json.dumps({"id": f"e-{i}", "type": "bench", "seq": i, "data": filler})
        while True:
            try:
                producer.produce(topic, value.encode(), key.encode())
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10000 == 0:
            producer.poll(0)
    producer.flush(60)


def run_confluent(topic: str, messages: int) -> float:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": KAFKA, "group.id": f"bench-ck-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": True})
    consumer.subscribe([topic])
    seen = 0
    start = 0.0
    loads = json.loads
    while seen < messages:
        batch = consumer.consume(1000, timeout=1.0)
        if batch and not start:
            start = time.perf_counter()
        for m in batch:
            if m.error():
                continue
            m.key().decode()
            loads(m.value())
            seen += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return seen / elapsed


async def run_aiokafka(topic: str, messages: int) -> float:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=KAFKA, group_id=f"bench-aio-{uuid.uuid4().hex}",
                                auto_offset_reset="earliest", enable_auto_commit=True)
    await consumer.start()
    seen = 0
    start = 0.0
    loads = json.loads
    try:
        while seen < messages:
            batches = await consumer.getmany(timeout_ms=1000, max_records=1000)
            for records in batches.values():
                if not start:
                    start = time.perf_counter()
                for r in records:
                    r.key.decode()
                    loads(r.value)
                    seen += 1
    finally:
        await consumer.stop()
    return seen / (time.perf_counter() - start)


class NoOp(EventHandler):
    def __init__(self, target: int) -> None:
        self.count = 0
        self.first = 0.0
        self.target = target
        self.done = asyncio.Event()

    async def on_message(self, context: Context, message: Message) -> None:
        if not self.count:
            self.first = time.perf_counter()
        self.count += 1
        if self.count >= self.target:
            self.done.set()

    async def on_timer(self, context: Context, timer: Timer) -> None:
        pass


async def run_prosody(topic: str, messages: int, max_concurrency: int) -> float:
    handler = NoOp(messages)
    client = ProsodyClient(bootstrap_servers=KAFKA, group_id=f"bench-prosody-{uuid.uuid4().hex}",
                           subscribed_topics=topic, probe_port=None, telemetry_enabled=False,
                           mode="best-effort", max_concurrency=max_concurrency,
                           max_uncommitted=4096, idempotence_cache_size=0,
                           cassandra_nodes=os.environ.get("PROSODY_TEST_CASSANDRA", "localhost:9042"))
    await client.subscribe(handler)
    await asyncio.wait_for(handler.done.wait(), timeout=600)
    rate = handler.count / (time.perf_counter() - handler.first)
    await client.unsubscribe()
    return rate


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--max-concurrency", type=int, default=256)
    parser.add_argument("--only", choices=["prosody", "confluent", "aiokafka"], action="append")
    parser.add_argument("--profile", action="store_true", help="pyinstrument profile of the Prosody run")
    args = parser.parse_args()
    which = args.only or ["confluent", "aiokafka", "prosody"]

    topic = f"bench-py-{uuid.uuid4().hex[:10]}"
    admin = AdminClient(bootstrap_servers=KAFKA)
    await admin.create_topic(topic, partition_count=args.partitions, replication_factor=1)
    try:
        t0 = time.perf_counter()
        prefill(topic, args.messages, args.keys, args.size)
        print(f"prefilled {args.messages} messages (~{args.size} B, {args.keys} keys, "
              f"{args.partitions} partitions) in {time.perf_counter() - t0:.1f}s")
        results: dict[str, float] = {}
        for name in which:
            if name == "confluent":
                results[name] = run_confluent(topic, args.messages)
            elif name == "aiokafka":
                results[name] = await run_aiokafka(topic, args.messages)
            elif args.profile:
                from pyinstrument import Profiler

                with Profiler(async_mode="disabled") as profiler:
                    results[name] = await run_prosody(topic, args.messages, args.max_concurrency)
                profiler.print(show_all=False)
            else:
                results[name] = await run_prosody(topic, args.messages, args.max_concurrency)
            print(f"{name:10s} {results[name]:>10,.0f} msg/s", flush=True)
        base = results.get("confluent")
        if base:
            for name, rate in results.items():
                print(f"{name:10s} {rate / base:5.2f}x confluent-kafka")
    finally:
        await admin.delete_topic(topic)


if __name__ == "__main__":
    asyncio.run(main())
