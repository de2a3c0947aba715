"""Key-ordered work against its bound: handlers that wait 5 ms, 10,000 keys, max_concurrency 32.

A topic of --messages (50,000) records over 10,000 keys is read by
Prosody at its default configuration (pipeline mode with deduplication
in Cassandra, max_concurrency 32), and in best-effort mode (no
deduplication) for comparison, each handler ``await asyncio.sleep(0.005)``. No more than 32
handlers run at once and a key's records run one after another, so the
rate cannot pass 32 / 5 ms = 6,400 messages/s: the nominal bound. Each
round also runs the machine's own ceiling, "the sleeps alone": 32 asyncio
tasks doing nothing but those sleeps one after another for two seconds,
with no Kafka and no Prosody. The rate is from the first handler's start
to the last one's end; the mean sleep is what each handler's 5 ms sleep
took, which the event loop's timer resolution stretches.

    build/bench-venv/bin/python bindings/python/bench/ordered_bench.py
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid

from prosody import Context, EventHandler, Message, ProsodyClient, Timer

KAFKA = os.environ.get("PROSODY_TEST_KAFKA", "localhost:9094")
CASSANDRA = os.environ.get("PROSODY_TEST_CASSANDRA", "localhost:9042")


async def sleeps_alone(concurrency: int, handler: float) -> float:
    """The rate of concurrency tasks sleeping handler seconds one after another, started a little apart."""
    count = 0
    end = time.perf_counter() + 2.0

    async def sleeper() -> None:
        nonlocal count
        while time.perf_counter() < end:
            await asyncio.sleep(handler)
            count += 1

    start = time.perf_counter()
    tasks = []
    for _ in range(concurrency):
        tasks.append(asyncio.create_task(sleeper()))
        await asyncio.sleep(handler / concurrency)
    await asyncio.gather(*tasks)
    return count / (time.perf_counter() - start)


class Sleeper(EventHandler):
    def __init__(self, target: int, handler: float) -> None:
        self.target = target
        self.handler = handler
        self.count = 0
        self.slept = 0.0
        self.first = 0.0
        self.last = 0.0
        self.done = asyncio.Event()

    async def on_message(self, context: Context, message: Message) -> None:
        t0 = time.perf_counter()
        if not self.first:
            self.first = t0
        await asyncio.sleep(self.handler)
        t1 = time.perf_counter()
        self.slept += t1 - t0
        self.count += 1
        if self.count >= self.target:
            self.last = t1
            self.done.set()

    async def on_timer(self, context: Context, timer: Timer) -> None:
        pass


async def run_prosody(topic: str, messages: int, concurrency: int, handler: float,
                      mode: str | None = None) -> tuple[float, float]:
    """Rate and mean sleep of one Prosody run over the whole topic, at the default mode or the one given."""
    sleeper = Sleeper(messages, handler)
    client = ProsodyClient(bootstrap_servers=KAFKA, group_id=f"bench-ordered-{uuid.uuid4().hex}",
                           subscribed_topics=topic, probe_port=None, telemetry_enabled=False,
                           cassandra_nodes=CASSANDRA, cassandra_keyspace="prosody_bench",
                           max_concurrency=concurrency, **({"mode": mode} if mode else {}))
    await client.subscribe(sleeper)
    await asyncio.wait_for(sleeper.done.wait(), timeout=600)
    await client.unsubscribe()
    return (messages - 1) / (sleeper.last - sleeper.first), sleeper.slept / sleeper.count


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--max-concurrency", type=int, default=32)
    parser.add_argument("--handler-ms", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--topic", help="read this topic (already holding --messages) instead of a new one")
    parser.add_argument("--json", help="also write the results to this file as JSON")
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench import prefill, write_report

    from prosody import AdminClient

    handler = args.handler_ms / 1000
    bound = args.max_concurrency / handler
    admin = AdminClient(bootstrap_servers=KAFKA)
    topic = args.topic
    if topic is None:
        topic = f"bench-ordered-{uuid.uuid4().hex[:10]}"
        await admin.create_topic(topic, partition_count=8)
        prefill(topic, args.messages, args.keys, 200)
    print(f"ordered: {args.messages} messages over {args.keys} keys, {args.handler_ms:g} ms handlers, "
          f"max_concurrency {args.max_concurrency}: bound {bound:,.0f} msg/s", flush=True)
    metrics: dict[str, dict[str, list[float]]] = {
        "sleeps-alone": {"rate": [], "of_bound": [], "mean_sleep_ms": []},
        "prosody": {"rate": [], "of_bound": [], "of_sleeps_bound": [], "mean_sleep_ms": []},
        "prosody-besteffort": {"rate": [], "of_bound": [], "of_sleeps_bound": [], "mean_sleep_ms": []},
    }
    modes = [("prosody", None), ("prosody-besteffort", "best-effort")]
    try:
        for round_no in range(args.rounds):
            alone = await sleeps_alone(args.max_concurrency, handler)
            metrics["sleeps-alone"]["rate"].append(alone)
            metrics["sleeps-alone"]["of_bound"].append(alone / bound)
            metrics["sleeps-alone"]["mean_sleep_ms"].append(args.max_concurrency / alone * 1000)
            line = f"round {round_no + 1} the sleeps alone {alone:,.0f}/s ({alone / bound:.2f} of the bound)"
            # Rotate which mode goes first, so neither always reads right after the sleeps.
            for name, mode in modes[round_no % 2:] + modes[:round_no % 2]:
                rate, mean = await run_prosody(topic, args.messages, args.max_concurrency, handler, mode)
                m = metrics[name]
                m["rate"].append(rate)
                m["of_bound"].append(rate / bound)
                m["of_sleeps_bound"].append(rate / (args.max_concurrency / mean))
                m["mean_sleep_ms"].append(mean * 1000)
                line += (f"; {name} {rate:,.0f} msg/s ({rate / bound:.2f} of the bound; the sleeps took "
                         f"{mean * 1000:.3f} ms on average, {rate / (args.max_concurrency / mean):.2f} of the bound "
                         f"they allow)")
            print(line, flush=True)
        for name, ms in metrics.items():
            print(f"median  {name:18s} {statistics.median(ms['rate']):>8,.0f} msg/s "
                  f"({statistics.median(ms['of_bound']):.2f} of the bound)")
        if args.json:
            params: dict[str, object] = {"messages": args.messages, "keys": args.keys,
                                         "max_concurrency": args.max_concurrency, "handler_ms": args.handler_ms,
                                         "bound": bound, "rounds": args.rounds}
            write_report(args.json, "bindings/python/bench/ordered_bench.py", "sleeps-alone", params, metrics)
    finally:
        if args.topic is None:
            await admin.delete_topic(topic)


if __name__ == "__main__":
    asyncio.run(main())
