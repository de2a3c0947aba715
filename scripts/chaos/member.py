"""The fault harness's Python member (see internal/chaos/member for the Go one).

Configured by the PROSODY_* variables the harness sets; appends one JSON
line per handled event, failed attempt and fired timer to CHAOS_LOG, each
with a single write(2) on an O_APPEND descriptor, so a SIGKILL loses
nothing already recorded. SIGTERM unsubscribes cleanly.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from datetime import datetime, timezone
from typing import Any

from prosody import Context, EventHandler, Message, ProsodyClient, Timer, value

COUNT = value("count")
NAME = os.environ["CHAOS_MEMBER"]
PID = os.getpid()
FD = os.open(os.environ["CHAOS_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
# A payload's fault hits its first attempt in this process only.
tried: set[str] = set()


def append(rec: dict[str, Any]) -> None:
    os.write(FD, (json.dumps(rec, separators=(",", ":")) + "\n").encode())


class Handler(EventHandler):
    async def on_message(self, context: Context, message: Message) -> None:
        p = message.payload
        base = {"m": NAME, "pid": PID, "tp": message.topic, "p": message.partition, "o": message.offset,
                "key": message.key, "seq": p["seq"], "id": p["id"]}
        fault = p.get("fault")
        if fault and p["id"] not in tried:
            tried.add(p["id"])
            append({"k": "failed", "t": time.time_ns(), "why": fault, **base})
            if fault == "hang":
                # The handler timeout cancels this task.
                await asyncio.sleep(60)
            raise RuntimeError(f"chaos: injected {fault}")
        try:
            if p.get("timer"):
                await context.schedule(datetime.fromtimestamp(p["timer"], timezone.utc))
            count = context.state(COUNT)
            n = (await count.get() or 0) + 1
            await count.set(n)
            if context.should_cancel():
                raise RuntimeError("chaos: cancelled")
        except BaseException as e:
            # Every failed attempt is on record: the checker excuses a
            # commit past an unhandled event only while its key has one.
            append({"k": "failed", "t": time.time_ns(), "why": type(e).__name__, **base})
            raise
        append({"k": "handled", "t": time.time_ns(), "c": n, **base})

    async def on_timer(self, context: Context, timer: Timer) -> None:
        append({"k": "fired", "m": NAME, "pid": PID, "t": time.time_ns(), "p": 0, "o": 0,
                "key": timer.key, "at": int(timer.time.timestamp())})


async def main() -> None:
    client = ProsodyClient(state_collections=[COUNT], probe_port=None)
    client.subscribe(Handler())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await client.unsubscribe()


if __name__ == "__main__":
    asyncio.run(main())
