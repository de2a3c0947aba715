"""No-op handler throughput: Prosody vs confluent-kafka's consume(n) loop vs aiokafka's getmany loop.

All of them read the same pre-filled topic on the real broker, each with a
fresh consumer group from the earliest offset, in one run, for several rounds in rotating order (medians compared). Every consumer
does the same per-message work a handler needs: decode the key and parse the
JSON payload. Prosody runs a no-op ``async def on_message`` at its default
configuration (pipeline mode, max_concurrency 32, max_uncommitted 64), or
tuned with --tuned. Outside mock mode the default configuration
deduplicates through Cassandra's deduplication table (one lookup and one
write per message); the reader ``prosody-nodedup`` is the default
configuration with ``idempotence_cache_size=0``, which leaves that out and
so measures what the package itself costs. The reader ``original`` (``--only original``) is the
same Prosody reader run by this script in a child process under the
original, Rust-based prosody-events 0.4.0 (``scripts/original-venv``; both
import as ``prosody``), on the same topic; it reads only the first
``--original-messages`` (2,000) of them, since it handles about a hundred
messages a second here.

    build/bench-venv/bin/python bindings/python/bench/bench.py --messages 200000

Needs confluent-kafka and aiokafka (scripts/bench installs them into build/bench-venv) and Kafka at
PROSODY_TEST_KAFKA (default localhost:9094).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import uuid


from prosody import Context, EventHandler, Message, ProsodyClient, Timer

KAFKA = os.environ.get("PROSODY_TEST_KAFKA", "localhost:9094")
VERBOSE = False
MAX_UNCOMMITTED = 4096


def prefill(topic: str, messages: int, keys: int, size: int, compression: str = "none") -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": KAFKA, "linger.ms": 20, "batch.num.messages": 10000,
                         "enable.idempotence": True, "compression.type": compression})
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


def thread_cpu() -> dict[int, tuple[str, float]]:
    """CPU seconds of each thread of this process (name, user + system), from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, tuple[str, float]] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / tick)
    return out


def print_thread_cpu(before: dict[int, tuple[str, float]], events: int) -> None:
    main_tid = threading.get_native_id()
    after = thread_cpu()
    main = after[main_tid][1] - before.get(main_tid, ("", 0.0))[1]
    rest = sum(cpu - before.get(tid, ("", 0.0))[1] for tid, (_, cpu) in after.items() if tid != main_tid)
    print(f"  cpu per event: loop thread {main / events * 1e6:.2f} µs, other threads {rest / events * 1e6:.2f} µs")


async def print_progress(handler: NoOp) -> None:
    """Prints the events handled in each half second (a stall shows as a dip)."""
    last = 0
    while True:
        await asyncio.sleep(0.5)
        print(f"    +{handler.count - last}", end="", flush=True)
        last = handler.count


def run_original(python: str, topic: str, messages: int, tuned: bool) -> float:
    """The Prosody reader of this script under the original package, in a child process.

    It keeps its timers and deduplication ids in a keyspace of its own: the
    original's migrations differ from this package's and refuse a keyspace
    that this package's migrated.
    """
    cmd = [python, os.path.abspath(__file__), "--child", "--topic", topic, "--messages", str(messages),
           "--keyspace", "prosody_bench_original"]
    if tuned:
        cmd.append("--tuned")
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return float(json.loads(out.strip().splitlines()[-1])["rate"])


def upper_median(xs: list[float]) -> float:
    """The median as the Go benchmarks' benchkit.Median takes it (the upper one for an even count)."""
    s = sorted(xs)
    return s[len(s) // 2]


def write_report(path: str, benchmark: str, baseline: str, params: dict[str, object],
                 metrics: dict[str, dict[str, list[float]]], unit: str = "msg/s") -> None:
    """Writes the results in the shape of the Go programs' -json files (internal/benchkit.Report)."""
    readers = []
    for name, ms in metrics.items():
        readers.append({"name": name, "metrics": {m: {"rounds": v, "median": upper_median(v)} for m, v in ms.items() if v}})
    base = next((r for r in readers if r["name"] == baseline), None)
    if base is not None:
        for r in readers:
            ratios = {m: v["median"] / base["metrics"][m]["median"] for m, v in r["metrics"].items()
                      if m in base["metrics"] and base["metrics"][m]["median"]}
            if ratios:
                r["ratios"] = ratios
    report = {"benchmark": benchmark, "unit": unit, "baseline": baseline, "params": params, "readers": readers}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")


async def run_prosody(topic: str, messages: int, max_concurrency: int, tuned: bool, nodedup: bool = False,
                      keyspace: str = "prosody_bench") -> float:
    handler = NoOp(messages)
    options: dict[str, object] = {"cassandra_keyspace": keyspace}
    if nodedup:
        options["idempotence_cache_size"] = 0
    if tuned:
        options.update({"mode": "best-effort", "max_concurrency": max_concurrency,
                        "max_uncommitted": MAX_UNCOMMITTED, "idempotence_cache_size": 0})
    client = ProsodyClient(bootstrap_servers=KAFKA, group_id=f"bench-prosody-{uuid.uuid4().hex}",
                           subscribed_topics=topic, probe_port=None, telemetry_enabled=False,
                           cassandra_nodes=os.environ.get("PROSODY_TEST_CASSANDRA", "localhost:9042"),
                           **options)
    before = thread_cpu()
    await client.subscribe(handler)
    progress = asyncio.create_task(print_progress(handler)) if VERBOSE else None
    await asyncio.wait_for(handler.done.wait(), timeout=600)
    if progress is not None:
        progress.cancel()
    rate = handler.count / (time.perf_counter() - handler.first)
    if VERBOSE:
        print_thread_cpu(before, handler.count)
    await client.unsubscribe()
    return rate


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--tuned", action="store_true",
                        help="run Prosody tuned (best-effort mode, --max-concurrency, --max-uncommitted, no id cache) "
                             "instead of at its default configuration")
    parser.add_argument("--max-uncommitted", type=int, default=4096, help="with --tuned")
    parser.add_argument("--max-concurrency", type=int, default=256, help="with --tuned")
    parser.add_argument("--topic", help="read this topic (already filled with at least --messages) instead of a new one")
    parser.add_argument("--keep", action="store_true", help="keep the new topic for later --topic runs")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each runs every reader once")
    parser.add_argument("--only", choices=["prosody", "prosody-nodedup", "confluent", "aiokafka", "original"],
                        action="append")
    parser.add_argument("--keyspace", default="prosody_bench", help="Cassandra keyspace of the Prosody readers")
    parser.add_argument("--original-python", default="build/original-venv/bin/python",
                        help="a Python whose prosody is prosody-events 0.4.0 (scripts/original-venv), for --only original")
    parser.add_argument("--original-messages", type=int, default=2000,
                        help="how many of the topic's messages the original reads (it is much slower)")
    parser.add_argument("--json", help="also write the results to this file as JSON")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--nodedup", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("-v", "--verbose", action="store_true", help="print the Prosody runs' CPU per event by thread")
    parser.add_argument("--profile", action="store_true", help="pyinstrument profile of the Prosody run")
    args = parser.parse_args()
    global VERBOSE, MAX_UNCOMMITTED
    VERBOSE, MAX_UNCOMMITTED = args.verbose, args.max_uncommitted
    which = args.only or ["confluent", "aiokafka", "prosody"]
    if args.child:
        # The original reader's process: one Prosody run, one JSON line.
        rate = await run_prosody(args.topic, args.messages, args.max_concurrency, args.tuned, nodedup=args.nodedup,
                                 keyspace=args.keyspace)
        print(json.dumps({"rate": rate}), flush=True)
        return

    from prosody import AdminClient

    admin = AdminClient(bootstrap_servers=KAFKA)
    topic = args.topic or f"bench-py-{uuid.uuid4().hex[:10]}"
    if not args.topic:
        await admin.create_topic(topic, partition_count=args.partitions, replication_factor=1)
    try:
        if not args.topic:
            t0 = time.perf_counter()
            prefill(topic, args.messages, args.keys, args.size)
            print(f"prefilled {topic} with {args.messages} messages (~{args.size} B, {args.keys} keys, "
                  f"{args.partitions} partitions) in {time.perf_counter() - t0:.1f}s", flush=True)
        results: dict[str, list[float]] = {name: [] for name in which}
        for round_no in range(args.rounds):
            # Each round rotates the order: whichever reader runs first meets a colder broker.
            shift = round_no % len(which)
            for name in which[shift:] + which[:shift]:
                if name == "confluent":
                    rate = run_confluent(topic, args.messages)
                elif name == "original":
                    rate = run_original(args.original_python, topic, min(args.messages, args.original_messages),
                                        args.tuned)
                elif name == "prosody-nodedup":
                    rate = await run_prosody(topic, args.messages, args.max_concurrency, args.tuned, nodedup=True,
                                             keyspace=args.keyspace)
                elif name == "aiokafka":
                    rate = await run_aiokafka(topic, args.messages)
                elif args.profile:
                    from pyinstrument import Profiler

                    with Profiler(async_mode="disabled") as profiler:
                        rate = await run_prosody(topic, args.messages, args.max_concurrency, args.tuned,
                                                 keyspace=args.keyspace)
                    profiler.print(show_all=False)
                else:
                    rate = await run_prosody(topic, args.messages, args.max_concurrency, args.tuned,
                                             keyspace=args.keyspace)
                results[name].append(rate)
                print(f"round {round_no + 1} {name:10s} {rate:>10,.0f} msg/s", flush=True)
        medians = {name: statistics.median(rates) for name, rates in results.items()}
        for name, rate in medians.items():
            print(f"median  {name:10s} {rate:>10,.0f} msg/s")
        base = medians.get("confluent")
        if base:
            for name, rate in medians.items():
                print(f"{name:10s} {rate / base:5.2f}x confluent-kafka")
        if args.json:
            params: dict[str, object] = {"messages": args.messages, "partitions": args.partitions, "keys": args.keys,
                                         "size": args.size, "rounds": args.rounds, "tuned": args.tuned,
                                         "original_messages": min(args.messages, args.original_messages),
                                         "python": sys.version.split()[0]}
            write_report(args.json, "bindings/python/bench/bench.py", "confluent", params,
                         {name: {"rate": rates} for name, rates in results.items()})
    finally:
        if not args.topic and not args.keep:
            await admin.delete_topic(topic)


if __name__ == "__main__":
    asyncio.run(main())
