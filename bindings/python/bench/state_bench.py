"""Keyed state in a handler: a count per key read and incremented on every message.

Prosody at its default configuration reads the same pre-filled topic on the
real broker twice per round, each time with a fresh consumer group from the
earliest offset: once with a no-op ``async def on_message``, and once with a
handler that reads and increments one value per message (``context.state``).
The state lives in Cassandra. Rounds rotate the order, and medians are
reported: messages per second, the handler's p50 and p99 latency, and the
rate of the state run relative to the no-op run.

    build/python-venv/bin/python bindings/python/bench/state_bench.py --messages 20000

Needs Kafka at PROSODY_TEST_KAFKA (default localhost:9094), Cassandra at
PROSODY_TEST_CASSANDRA (default localhost:9042), and confluent-kafka to
fill the topic.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(__file__))

from bench import KAFKA, prefill, write_report  # noqa: E402

from prosody import AdminClient, Context, EventHandler, Message, ProsodyClient, Timer, ValueDefinition, value  # noqa: E402

CASSANDRA = os.environ.get("PROSODY_TEST_CASSANDRA", "localhost:9042")
COUNT: ValueDefinition[int] = value("count", ttl=86400)


class Counting(EventHandler):
    """Counts messages; with_state, also increments the key's count in keyed state."""

    def __init__(self, target: int, with_state: bool) -> None:
        self.count = 0
        self.first = 0.0
        self.target = target
        self.with_state = with_state
        self.latencies: list[float] = []
        self.done = asyncio.Event()

    async def on_message(self, context: Context, message: Message) -> None:
        start = time.perf_counter()
        if not self.count:
            self.first = start
        if self.with_state:
            count = context.state(COUNT)
            await count.set((await count.get() or 0) + 1)
        self.latencies.append(time.perf_counter() - start)
        self.count += 1
        if self.count >= self.target:
            self.done.set()

    async def on_timer(self, context: Context, timer: Timer) -> None:
        pass


async def run(topic: str, messages: int, with_state: bool) -> tuple[float, float, float]:
    handler = Counting(messages, with_state)
    client = ProsodyClient(bootstrap_servers=KAFKA, group_id=f"bench-state-{uuid.uuid4().hex}",
                           subscribed_topics=topic, probe_port=None, telemetry_enabled=False,
                           cassandra_nodes=CASSANDRA, cassandra_keyspace="prosody_bench", state_collections=[COUNT])
    await client.subscribe(handler)
    await asyncio.wait_for(handler.done.wait(), timeout=900)
    rate = handler.count / (time.perf_counter() - handler.first)
    await client.unsubscribe()
    lat = sorted(handler.latencies)
    return rate, lat[len(lat) // 2], lat[int(len(lat) * 0.99)]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="also write the results to this file as JSON")
    args = parser.parse_args()

    admin = AdminClient(bootstrap_servers=KAFKA)
    topic = f"bench-state-py-{uuid.uuid4().hex[:10]}"
    await admin.create_topic(topic, partition_count=args.partitions, replication_factor=1)
    try:
        prefill(topic, args.messages, args.keys, args.size)
        results: dict[str, list[tuple[float, float, float]]] = {"no-op": [], "state": []}
        order = ["no-op", "state"]
        for round_no in range(args.rounds):
            shift = round_no % 2
            for name in order[shift:] + order[:shift]:
                r = await run(topic, args.messages, name == "state")
                results[name].append(r)
                print(f"round {round_no + 1} {name:6s} {r[0]:>9,.0f} msg/s  handler p50 {r[1] * 1e3:6.2f} ms  "
                      f"p99 {r[2] * 1e3:6.2f} ms", flush=True)
        med = {name: tuple(statistics.median(x[i] for x in rs) for i in range(3)) for name, rs in results.items()}
        for name, (rate, p50, p99) in med.items():
            print(f"median  {name:6s} {rate:>9,.0f} msg/s  handler p50 {p50 * 1e3:6.2f} ms  p99 {p99 * 1e3:6.2f} ms")
        print(f"state / no-op: {med['state'][0] / med['no-op'][0]:.2f}x")
        if args.json:
            write_report(args.json, "bindings/python/bench/state_bench.py", "no-op",
                         {"messages": args.messages, "partitions": args.partitions, "keys": args.keys,
                          "size": args.size, "rounds": args.rounds},
                         {name: {"rate": [r[0] for r in rs], "handler_p50_ms": [r[1] * 1e3 for r in rs],
                                 "handler_p99_ms": [r[2] * 1e3 for r in rs]} for name, rs in results.items()})
    finally:
        await admin.delete_topic(topic)


if __name__ == "__main__":
    asyncio.run(main())
