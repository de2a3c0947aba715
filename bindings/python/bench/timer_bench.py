"""The Python reader of the mixed timer benchmark (``prosody-timer-bench -mixed``).

The Go driver fills a topic with JSON messages ``{"seq": <int>, ...}`` under
string keys, then starts each reader as a process with the same flags and
parses the last line of its stdout as JSON. This reader runs unchanged under
this project's package and under the original, Rust-based
``prosody-events==0.4.0`` (both import as ``prosody``; see
``scripts/original-venv``); it reports itself as ``python`` or
``python-original``.

    build/python-venv/bin/python bindings/python/bench/timer_bench.py \\
        --bootstrap localhost:9094 --topic T --group G \\
        --cassandra localhost:9042 --keyspace KS \\
        --messages 2000 --lead 1 --spread 10 --timeout 120

The consumer has the library's default configuration except the bootstrap
server, group, topic, Cassandra node and keyspace (both packages create the
keyspace when it is absent) and the probe server, which is disabled
(``probe_port=None``; both packages read that as "off").

Each message handler takes the wall clock at entry, schedules a timer for
``floor(now) + lead + 1 + seq % spread`` (whole seconds, UTC) and records
how long ``await context.schedule(...)`` took (monotonic clock); a failing
call is counted, not raised. Each timer handler records how late it fired
against the time the library reports, and whether that (key, time) fired
before. Messages redelivered (same partition and offset) are counted once
but scheduled again.

The run stops once N distinct messages were handled and every distinct
(key, time) that was scheduled successfully has fired, or ``--timeout``
seconds after the start. Several messages of one key handled within the
same second schedule the same (key, time), which the library keeps as one
timer, so ``fired`` counts distinct timers, and so does ``scheduled``; the
count of successful calls goes into ``schedules_per_s``.
Then the reader unsubscribes and prints one JSON line, last on stdout;
everything else goes to stderr. Exit status 0 when the line was printed
(a timeout too: stderr says so), 2 when the consumer could not start.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import logging
import math
import sys
import threading
import time
from datetime import datetime, timezone
from importlib import metadata
from typing import Any

from prosody import Context, EventHandler, Message, ProsodyClient, Timer

log = logging.getLogger("timer_bench")


def package_flavor() -> tuple[str, str]:
    """("python" | "python-original", version): which ``prosody`` was imported.

    This project's package has the pure-Python dispatcher module
    ``prosody._dispatch`` over cffi; the original's ``prosody.prosody`` is a
    compiled (Rust, PyO3) extension module. Both distributions are named
    ``prosody-events``.
    """
    try:
        version = metadata.version("prosody-events")
    except metadata.PackageNotFoundError:
        version = "unknown"
    if importlib.util.find_spec("prosody._dispatch") is not None:
        return "python", version
    return "python-original", version


def nearest_rank(values: list[float]) -> dict[str, float]:
    """p50, p99 and max of ``values`` (nearest rank on the sorted list); zeros when empty."""
    if not values:
        return {"p50": 0.0, "p99": 0.0, "max": 0.0}
    s = sorted(values)

    def rank(p: float) -> float:
        return s[max(0, math.ceil(p * len(s)) - 1)]

    return {"p50": round(rank(0.50), 3), "p99": round(rank(0.99), 3), "max": round(s[-1], 3)}


class Tally:
    """What the handlers record. Guarded by a lock: both packages call the
    handlers on the subscribing loop's thread, but the original's docs say a
    handler "may be called from different threads", so nothing here relies on
    that."""

    def __init__(self, want: int, loop: asyncio.AbstractEventLoop) -> None:
        self.lock = threading.Lock()
        self.want = want
        self.loop = loop
        self.done = asyncio.Event()
        self.loop_thread = threading.get_ident()
        self.seen: set[tuple[int, int]] = set()
        self.scheduled_ok = 0
        self.schedule_errors = 0
        self.schedule_ms: list[float] = []
        self.timers: set[tuple[str, int]] = set()  # distinct (key, second) scheduled successfully
        self.fired: set[tuple[str, int]] = set()
        self.pending = 0  # in timers, not yet in fired
        self.duplicates = 0
        self.early = 0
        self.late_ms: list[float] = []
        self.first_start = 0.0
        self.last_end = 0.0
        self.first_schedule = 0.0
        self.last_schedule = 0.0
        self.first_error: str | None = None
        self.foreign_thread = False

    def check_locked(self) -> None:
        if len(self.seen) >= self.want and self.pending == 0 and not self.done.is_set():
            if threading.get_ident() == self.loop_thread:
                self.done.set()
            else:
                self.foreign_thread = True
                self.loop.call_soon_threadsafe(self.done.set)

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            span = self.last_schedule - self.first_schedule
            return {
                "messages": len(self.seen),
                "scheduled": len(self.timers),
                "schedule_errors": self.schedule_errors,
                "fired": len(self.fired),
                "duplicates": self.duplicates,
                "early": self.early,
                "schedule_ms": nearest_rank(self.schedule_ms),
                "late_ms": nearest_rank(self.late_ms),
                "schedules_per_s": round(self.scheduled_ok / span, 3) if span > 0 else 0.0,
                "handling_s": round(self.last_end - self.first_start, 3) if self.first_start else 0.0,
                # Not in the JSON line (stderr only).
                "_timers": len(self.timers),
                "_pending": self.pending,
            }


class Reader(EventHandler):
    def __init__(self, tally: Tally, lead: int, spread: int, work: float) -> None:
        self.tally = tally
        self.lead = lead
        self.spread = spread
        self.work = work

    async def on_message(self, context: Context, message: Message) -> None:
        start = time.perf_counter()
        now = time.time()
        payload = message.payload
        seq = payload.get("seq") if isinstance(payload, dict) else None
        seq_n = seq if isinstance(seq, int) else 0
        due_s = math.floor(now) + self.lead + 1 + seq_n % self.spread
        due = datetime.fromtimestamp(due_s, timezone.utc)
        error: BaseException | None = None
        t0 = time.perf_counter()
        try:
            await context.schedule(due)
        except Exception as exc:  # counted, never raised: the message succeeds
            error = exc
        t1 = time.perf_counter()
        if self.work > 0:
            await asyncio.sleep(self.work)
        tally = self.tally
        with tally.lock:
            if not tally.first_start:
                tally.first_start = start
                tally.first_schedule = t0
            tally.first_start = min(tally.first_start, start)
            tally.first_schedule = min(tally.first_schedule, t0)
            tally.last_end = max(tally.last_end, t1)
            tally.last_schedule = max(tally.last_schedule, t1)
            if error is None:
                tally.scheduled_ok += 1
                tally.schedule_ms.append((t1 - t0) * 1000.0)
                pair = (message.key, due_s)
                if pair not in tally.timers:
                    tally.timers.add(pair)
                    if pair not in tally.fired:
                        tally.pending += 1
            else:
                tally.schedule_errors += 1
                if tally.first_error is None:
                    tally.first_error = f"{type(error).__name__}: {error}"
            tally.seen.add((message.partition, message.offset))
            tally.check_locked()

    async def on_timer(self, context: Context, timer: Timer) -> None:
        fire = time.time()
        at = timer.time.timestamp()
        late = (fire - at) * 1000.0
        pair = (timer.key, int(round(at)))
        tally = self.tally
        with tally.lock:
            if pair in tally.fired:
                tally.duplicates += 1
                return
            tally.fired.add(pair)
            tally.late_ms.append(late)
            if late < 0:
                tally.early += 1
            if pair in tally.timers:
                tally.pending -= 1
            tally.check_locked()


async def progress(tally: Tally, started: float) -> None:
    while True:
        await asyncio.sleep(5)
        with tally.lock:
            print(f"[timer_bench] {time.monotonic() - started:6.1f}s messages {len(tally.seen)} "
                  f"scheduled {tally.scheduled_ok} errors {tally.schedule_errors} timers {len(tally.timers)} "
                  f"fired {len(tally.fired)} pending {tally.pending}", file=sys.stderr, flush=True)


async def run(args: argparse.Namespace, started: float) -> int:
    name, version = package_flavor()
    print(f"[timer_bench] reader {name} (prosody-events {version}, Python {sys.version.split()[0]})",
          file=sys.stderr, flush=True)
    loop = asyncio.get_running_loop()
    tally = Tally(args.messages, loop)
    try:
        client = ProsodyClient(
            bootstrap_servers=args.bootstrap,
            group_id=args.group,
            subscribed_topics=args.topic,
            cassandra_nodes=args.cassandra,
            cassandra_keyspace=args.keyspace,
            probe_port=None,
        )
        await client.subscribe(Reader(tally, args.lead, args.spread, args.work / 1000.0))
    except Exception as exc:
        print(f"[timer_bench] could not start the consumer: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print(f"[timer_bench] subscribed after {time.monotonic() - started:.2f}s", file=sys.stderr, flush=True)
    ticker = asyncio.ensure_future(progress(tally, started))
    remaining = args.timeout - (time.monotonic() - started)
    timed_out = False
    try:
        await asyncio.wait_for(tally.done.wait(), timeout=max(0.0, remaining))
    except asyncio.TimeoutError:
        timed_out = True
    result = tally.snapshot()
    ticker.cancel()
    stop = time.monotonic()
    try:
        await client.unsubscribe()
    except Exception as exc:
        print(f"[timer_bench] unsubscribe failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    print(f"[timer_bench] {'TIMED OUT' if timed_out else 'complete'} after {stop - started:.2f}s; "
          f"unsubscribed in {time.monotonic() - stop:.2f}s; distinct timers {result['_timers']}, "
          f"unfired {result['_pending']}"
          + (f"; first schedule error: {tally.first_error}" if tally.first_error else "")
          + ("; handlers ran off the loop thread" if tally.foreign_thread else ""),
          file=sys.stderr, flush=True)
    line = {"reader": name, **{k: v for k, v in result.items() if not k.startswith("_")}}
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()
    return 0


def main() -> int:
    started = time.monotonic()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True, help="Kafka bootstrap server HOST:PORT")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--cassandra", required=True, help="Cassandra node HOST:PORT")
    parser.add_argument("--keyspace", required=True)
    parser.add_argument("--messages", type=int, required=True, help="messages on the topic")
    parser.add_argument("--lead", type=int, default=1)
    parser.add_argument("--spread", type=int, default=10)
    parser.add_argument("--work", type=float, default=0, help="ms each message handler then sleeps (I/O it waits for)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds from the start")
    args = parser.parse_args()
    if args.spread < 1:
        parser.error("--spread must be at least 1")
    # Library log records (warnings and up) go to stderr, never stdout.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    return asyncio.run(run(args, started))


if __name__ == "__main__":
    sys.exit(main())
