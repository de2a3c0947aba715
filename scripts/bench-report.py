"""Plots and tables of docs/benchmarks.md, from the result file of scripts/bench.

    build/plots-venv/bin/python scripts/bench-report.py [docs/bench/results.json]

Writes one PNG per benchmark into the result file's folder (docs/bench/)
and replaces each generated table of docs/benchmarks.md: the lines between
``<!-- bench-table:ID -->`` and ``<!-- /bench-table -->``, where ID is a
benchmark's id, ``machine`` or ``summary``. Everything else in the page is
left as it is, so its explanations stay written by hand while its figures
always come from the result file. Needs matplotlib (scripts/bench installs
it into build/plots-venv).
"""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

PAGE = "docs/benchmarks.md"

# How each reader is named on the page.
NAMES = {
    "sarama": "raw sarama",
    "prosody": "Prosody",
    "nodedup": "Prosody, deduplication off",
    "bare": "Prosody, no deferral/timers/telemetry layers",
    "traced": "Prosody, spans recorded",
    "observed": "Prosody, telemetry emitter + metrics",
    "failing": "Prosody, 1 % of keys failing",
    "prosody-nodedup": "Prosody, deduplication off",
    "prosody-besteffort": "Prosody, best-effort mode (no deduplication)",
    "go": "Go engine",
    "c-abi": "C ABI, polling",
    "c-direct": "C ABI, on_event",
    "confluent": "confluent-kafka",
    "aiokafka": "aiokafka",
    "original": "original prosody-events 0.4.0 (first messages only)",
    "python-original": "original prosody-events 0.4.0",
    "kafkajs": "kafkajs",
    "prosody-state": "Prosody, keyed-state handler",
    "no-op": "Prosody, no-op handler",
    "state": "Prosody, keyed-state handler",
    "managers": "timer managers",
    "python": "Python",
    "node": "Node",
    "fair": "fair scheduler",
    "fifo": "first come first served",
    "fair-precise": "fair scheduler, precise timers (tuned: client.WithPreciseTimers, 200 µs)",
    "sleeps-alone": "the sleeps alone, no engine",
    "plaintext": "plaintext",
    "scram-sha-512": "SASL_SSL, SCRAM-SHA-512",
    "mutual-tls": "mutual TLS",
}

# Names that differ in one benchmark.
# The readers of the Python and Node key-ordered benchmarks.
ORDERED_NAMES = {"prosody": "Prosody, default configuration", "sleeps-alone": "the sleeps alone, no Prosody",
                 "prosody-besteffort": "Prosody, best-effort mode (tuned: no deduplication)"}

NAMES_IN = {
    "timers-mixed": {"go": "Go"},
    "engine": {"prosody": "Prosody, default configuration"},
    "python": {"prosody": "Prosody, default configuration"},
    "node": {"prosody": "Prosody, default configuration", "confluent": "@confluentinc/kafka-javascript"},
    "node-read": {"prosody": "Prosody, default configuration"},
    "deferral": {"prosody": "Prosody, no key failing"},
    "node-state": {"prosody": "Prosody, no-op handler"},
    "python-ordered": ORDERED_NAMES,
    "node-ordered": ORDERED_NAMES,
    "python-rss": {"prosody": "Prosody, default configuration", "original": "original prosody-events 0.4.0",
                   "prosody-mu1024": "Prosody, max_uncommitted 1024"},
}
NAMES_IN["python-rss-lz4"] = NAMES_IN["python-rss"]


def name(bench: str, reader: str) -> str:
    return NAMES_IN.get(bench, {}).get(reader, NAMES.get(reader, reader))


# The peak-memory benchmark's table, for either topic.
RSS_LAYOUT = {
    "columns": [("peak_rss_mib", "peak RSS MiB", "mib"), ("ratio:peak_rss_mib", "× the original", "ratio"),
                ("handled", "messages handled in the run", "int")],
    "plot": (["peak_rss_mib"], "peak resident set, MiB", False),
}

# The key-ordered workload's table, the same for Python and Node.
ORDERED_LAYOUT = {
    "columns": [("rate", "msg/s", "rate"), ("of_bound", "of the nominal bound", "ratio"),
                ("of_sleeps_bound", "of the bound its sleeps allow", "ratio"), ("mean_sleep_ms", "mean 5 ms sleep took, ms", "ms")],
    "plot": (["rate"], "messages/s", False),
}


# Per benchmark: the table's columns (metric, heading, kind) where kind is
# how the value prints; "ratio:METRIC" is the reader's median over the
# baseline's. The first column's rounds are listed too. "plot" names the
# metrics drawn, the axis label, and whether the axis is logarithmic.
LAYOUT: dict[str, dict[str, Any]] = {
    "engine": {
        "columns": [("rate", "msg/s", "rate"), ("ratio:rate", "× sarama", "ratio"),
                    ("rate_from_first", "msg/s from its first message", "rate"),
                    ("cpu_us_per_msg", "CPU µs/msg", "us"), ("bytes_per_msg", "allocated B/msg", "int")],
        "plot": (["rate"], "messages/s", False),
    },
    "deferral": {
        "columns": [("healthy_rate", "healthy keys, msg/s", "rate"), ("ratio:healthy_rate", "× no failures", "ratio"),
                    ("last_deferred_s", "last deferred message handled after", "s"),
                    ("cpu_us_per_msg", "CPU µs/msg", "us")],
        "plot": (["healthy_rate"], "healthy keys' messages/s", False),
    },
    "dedup-cassandra": {
        "columns": [("rate", "msg/s", "rate"), ("ratio:rate", "× deduplication off", "ratio"),
                    ("cpu_us_per_msg", "consumer CPU µs/msg", "us"), ("bytes_per_msg", "allocated B/msg", "int")],
        "plot": (["rate"], "messages/s", False),
    },
    "bench-c": {
        "columns": [("rate", "events/s", "rate"), ("ratio:rate", "× Go engine", "ratio")],
        "plot": (["rate"], "events/s", False),
    },
    "python": {
        "columns": [("rate", "msg/s", "rate"), ("ratio:rate", "× confluent-kafka", "ratio")],
        "plot": (["rate"], "messages/s", False),
    },
    "python-state": {
        "columns": [("rate", "msg/s", "rate"), ("ratio:rate", "× no-op", "ratio"),
                    ("handler_p50_ms", "handler p50 ms", "ms"), ("handler_p99_ms", "handler p99 ms", "ms")],
        "plot": (["rate"], "messages/s", True),
    },
    # The Python and Node key-ordered benchmarks report alike.
    "python-ordered": ORDERED_LAYOUT,
    "node-ordered": ORDERED_LAYOUT,
    # The memory benchmark on an uncompressed and an LZ4 topic report alike.
    "python-rss": RSS_LAYOUT,
    "python-rss-lz4": RSS_LAYOUT,
    "node": {
        "columns": [("rate", "msg/s", "rate"), ("ratio:rate", "× kafkajs", "ratio"),
                    ("js_busy", "JS thread busy", "percent"), ("cpu_us_per_msg", "process CPU µs/msg", "us")],
        "plot": (["rate"], "messages/s", False),
    },
    "node-read": {
        "columns": [("rate", "msg/s", "rate"), ("ratio:rate", "× kafkajs", "ratio"),
                    ("js_busy", "JS thread busy", "percent"), ("cpu_us_per_msg", "process CPU µs/msg", "us")],
        "plot": (["rate"], "messages/s", False),
    },
    "node-state": {
        "columns": [("rate", "msg/s", "rate"), ("ratio:rate", "× no-op", "ratio"),
                    ("handler_p50_ms", "handler p50 ms", "ms"), ("handler_p99_ms", "handler p99 ms", "ms")],
        "plot": (["rate"], "messages/s", True),
    },
    "timers": {
        "columns": [("schedules_per_s", "schedules/s", "rate"), ("late_p50_ms", "late p50 ms", "ms"),
                    ("late_p99_ms", "late p99 ms", "ms"), ("late_max_ms", "late max ms", "ms"),
                    ("early", "early", "int"), ("unfired", "unfired", "int")],
        "plot": (["late_p50_ms", "late_p99_ms", "late_max_ms"], "lateness after the due second, ms", False),
    },
    "timers-mixed": {
        "columns": [("schedule_p50_ms", "schedule p50 ms", "ms"), ("schedule_p99_ms", "schedule p99 ms", "ms"),
                    ("late_p50_ms", "late p50 ms", "ms"), ("late_p99_ms", "late p99 ms", "ms"),
                    ("late_max_ms", "late max ms", "ms"), ("early", "fired early", "int"),
                    ("unfired", "unfired", "int"), ("schedules_per_s", "schedules/s", "rate")],
        "plot": (["schedule_p99_ms", "late_p50_ms", "late_p99_ms"], "milliseconds (log scale)", True),
    },
    "sched-fairness": {
        "who": "scheduler",
        "columns": [("fresh_p99_ms", "fresh keys p99 ms", "ms"), ("ratio:fresh_p99_ms", "p99 × FIFO", "ratio"),
                    ("fresh_p50_ms", "fresh keys p50 ms", "ms"), ("produced_p99_ms", "fresh p99 from production ms", "ms"),
                    ("failing_p50_ms", "failing keys p50 ms", "ms"), ("failing_p99_ms", "failing keys p99 ms", "ms")],
        "plot": (["fresh_p50_ms", "fresh_p99_ms", "failing_p99_ms"], "wait before the first attempt, ms (log scale)", True),
    },
    "sched-ordered": {
        "who": "scheduler",
        "columns": [("rate", "msg/s", "rate"), ("of_bound", "of the nominal bound", "ratio"),
                    ("of_sleeps_bound", "of the bound its sleeps allow", "ratio"), ("mean_sleep_ms", "mean 5 ms sleep took, ms", "ms"),
                    ("fetch_start_p50_ms", "fetch to handler start p50 ms", "ms"),
                    ("fetch_start_p99_ms", "fetch to handler start p99 ms", "ms"),
                    ("cpu_us_per_msg", "CPU µs/msg", "us")],
        "plot": (["rate"], "messages/s", False),
    },
    "tls": {
        "who": "listener",
        "columns": [("consume", "consume msg/s", "rate"), ("ratio:consume", "× plaintext", "ratio"),
                    ("produce", "produce msg/s", "rate"), ("ratio:produce", "× plaintext", "ratio")],
        "plot": (["consume", "produce"], "messages/s", False),
    },
}

METRIC_LABELS = {
    "late_p50_ms": "late p50", "late_p99_ms": "late p99", "late_max_ms": "late max",
    "schedule_p99_ms": "schedule p99", "fresh_p50_ms": "fresh keys p50", "fresh_p99_ms": "fresh keys p99",
    "failing_p99_ms": "failing keys p99", "consume": "consume", "produce": "produce",
}


def fmt(value: float | None, kind: str) -> str:
    if value is None:
        return "–"
    if kind == "rate":
        return f"{value:,.0f}"
    if kind == "ratio":
        return f"{value:.2f}" if value >= 0.01 else f"{value:.2g}"
    if kind == "us":
        return f"{value:.2f}"
    if kind == "ms":
        return f"{value:.1f}" if abs(value) < 100 else f"{value:,.0f}"
    if kind == "s":
        return f"{value:.0f} s"
    if kind == "mib":
        return f"{value:,.1f}"
    if kind == "percent":
        return f"{value * 100:.0f} %"
    return f"{value:,.0f}"


def metric(reader: dict[str, Any], name: str) -> float | None:
    if name.startswith("ratio:"):
        return reader.get("ratios", {}).get(name[6:])
    m = reader["metrics"].get(name)
    return None if m is None else m["median"]


def rounds(reader: dict[str, Any], name: str, kind: str) -> str:
    m = reader["metrics"].get(name)
    if m is None or len(m["rounds"]) < 2:
        return ""
    if kind == "rate":
        return ", ".join(f"{v / 1000:,.0f}k" if v >= 10000 else f"{v:,.0f}" for v in m["rounds"])
    return ", ".join(fmt(v, kind) for v in m["rounds"])


def target_value(t: dict[str, Any]) -> str:
    v = t["value"]
    if t.get("ratio"):
        return f"{v:.2f}×"
    if t["metric"].endswith("_ms"):
        return f"{v:,.0f} ms"
    return f"{v:.2f}"


def target_line(t: dict[str, Any]) -> str:
    if t.get("value") is None:
        return f"- Target: {t['what']}: not measured in this run."
    verdict = "met" if t["met"] else "**not met**"
    return f"- Target: {t['what']}. This run: {target_value(t)}, {verdict}."


def table(entry: dict[str, Any]) -> list[str]:
    if entry["status"] != "ok":
        return [f"*Not measured in this run: {entry.get('error', 'failed')}.*"]
    layout = LAYOUT.get(entry["id"])
    report = entry["report"]
    if layout is None:
        return ["*No table layout for this benchmark.*"]
    cols = [c for c in layout["columns"] if any(metric(r, c[0]) is not None for r in report["readers"])]
    head = [layout.get("who", "reader")] + [c[1] for c in cols]
    first = cols[0]
    show_rounds = any(len(r["metrics"].get(first[0], {}).get("rounds", [])) > 1 for r in report["readers"])
    if show_rounds:
        head.append(f"rounds ({first[1]})")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in report["readers"]:
        row = [name(entry["id"], r["name"])] + [fmt(metric(r, c[0]), c[2]) for c in cols]
        if show_rounds:
            row.append(rounds(r, first[0], first[2]))
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", f"Medians of the rounds. Sizes: {params_text(report.get('params', {}))}. The benchmark took "
              f"{entry['seconds']:.0f} s; the machine's CPU was {entry['cpu']['busy_percent']:.0f} % busy, "
              f"{entry['cpu']['steal_percent']:.0f} % stolen by the hypervisor, {entry['cpu']['idle_percent']:.0f} % idle"
              + load_text(entry) + "."]
    if entry.get("targets"):
        lines.append("")
        lines += [target_line(t) for t in entry["targets"]]
    return lines


def load_text(entry: dict[str, Any]) -> str:
    load = entry.get("load_average")
    if not load or not any(load):
        return ""
    return f"; load average {load[0]:.1f} at its start and {load[1]:.1f} at its end"


def params_text(params: dict[str, Any]) -> str:
    parts = []
    for k, v in params.items():
        if v is False or v is None or v == "" or isinstance(v, (list, dict)) or k in ("python", "node"):
            continue
        label, unit = k.replace("_", " "), ""
        for suffix, u in (("_per_s", "/s"), ("_s", " s"), ("_ms", " ms")):
            if k.endswith(suffix):
                label, unit = k[: -len(suffix)].replace("_", " "), u
                break
        if v is True:
            parts.append(label)
        elif isinstance(v, (int, float)):
            parts.append((f"{label} {v:,.0f}" if float(v).is_integer() else f"{label} {v:,.2f}") + unit)
        else:
            parts.append(f"{label} {v}")
    return ", ".join(parts)


def machine_table(res: dict[str, Any]) -> list[str]:
    m = res["machine"]
    svc = res.get("services", {})
    rows = [
        ("CPU", f"{m['cpu_model']}, {m['cores']} cores (virtual machine)"),
        ("memory", f"{m['memory_gib']} GiB"),
        ("system", f"{m['os']}, kernel {m['kernel']}"),
        ("Go / Python / Node", f"{m['go'].replace('go version ', '')} / {m['python']} / {m['node']}"),
        ("Kafka", svc.get("kafka", "") + " (scripts/services, on the same machine)"),
        ("Cassandra", svc.get("cassandra", "") + " (scripts/services, on the same machine)"),
        ("run", f"{res['generated'][:10]}, commit {res['commit']}{' with local changes' if res['dirty'] else ''}, "
                f"`{res['size']}` size, {res['seconds'] / 60:.0f} min"),
        ("CPU over the run", f"busy {res['cpu']['busy_percent']:.0f} %, stolen by the hypervisor "
                             f"{res['cpu']['steal_percent']:.0f} %, idle {res['cpu']['idle_percent']:.0f} %"),
    ]
    return ["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]


def summary_table(res: dict[str, Any]) -> list[str]:
    lines = ["| benchmark | target | this run | |", "|---|---|---|---|"]
    for e in res["benchmarks"]:
        for t in e.get("targets") or []:
            value = "–" if t.get("value") is None else target_value(t)
            verdict = "–" if t.get("met") is None else ("met" if t["met"] else "**not met**")
            lines.append(f"| [{e['id']}](#{e['id']}) | {t['what']} | {value} | {verdict} |")
    return lines


def short(v: float, _pos: object = None) -> str:
    """An axis label that stays narrow: 250k, 1.5M."""
    if abs(v) >= 1e6:
        return f"{v / 1e6:g}M"
    if abs(v) >= 1e3:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def plot(entry: dict[str, Any], folder: str) -> str | None:
    layout = LAYOUT.get(entry["id"])
    if entry["status"] != "ok" or layout is None:
        return None
    metrics, ylabel, log = layout["plot"]
    readers = entry["report"]["readers"]
    readers = [r for r in readers if any(m in r["metrics"] for m in metrics)]
    if not readers:
        return None
    fig, ax = plt.subplots(figsize=(9, 0.8 + 0.55 * len(readers) * max(1, len(metrics) * 0.7)))
    height = 0.8 / len(metrics)
    colors = ["#4C72B0", "#DD8452", "#55A868", "#C44E52"]
    labels = [name(entry["id"], r["name"]) for r in readers]
    for j, m in enumerate(metrics):
        ys = [i + (j - (len(metrics) - 1) / 2) * height for i in range(len(readers))]
        med = [r["metrics"].get(m, {}).get("median", 0) for r in readers]
        ax.barh(ys, med, height=height * 0.9, color=colors[j % len(colors)],
                label=METRIC_LABELS.get(m, m) if len(metrics) > 1 else None)
        for y, r in zip(ys, readers):
            pts = r["metrics"].get(m, {}).get("rounds", [])
            if len(pts) > 1:
                ax.plot(pts, [y] * len(pts), "k.", markersize=4, alpha=0.6)
        for y, v, r in zip(ys, med, readers):
            ratio = r.get("ratios", {}).get(m)
            text = f"{v:,.0f}" if v >= 100 else f"{v:.1f}"
            if ratio is not None and entry["report"].get("baseline") and r["name"] != entry["report"]["baseline"]:
                text += f"  ({ratio:.2f}×)" if ratio >= 0.1 else f"  ({ratio:.2g}×)"
            # Right of the rounds' dots, which may lie beyond the median.
            right = max([v] + r["metrics"].get(m, {}).get("rounds", []))
            ax.text(right, y, "  " + text, va="center", fontsize=8)
    ax.set_yticks(range(len(readers)))
    ax.set_yticklabels(labels)
    ax.invert_yaxis()
    if log:
        # symlog: the original's timers fire early, so lateness can be negative.
        ax.set_xscale("symlog", linthresh=1)
    else:
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(short))
    ax.set_xlabel(ylabel)
    fig.suptitle(textwrap.fill(entry["title"], 90), fontsize=10)
    ax.margins(x=0.3)
    if len(metrics) > 1:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    path = os.path.join(folder, f"{entry['id']}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def replace_tables(page: str, blocks: dict[str, list[str]]) -> str:
    def sub(m: re.Match[str]) -> str:
        ident = m.group(1)
        if ident not in blocks:
            return m.group(0)
        return f"<!-- bench-table:{ident} -->\n" + "\n".join(blocks[ident]) + "\n<!-- /bench-table -->"

    return re.sub(r"<!-- bench-table:([\w-]+) -->\n.*?<!-- /bench-table -->", sub, page, flags=re.S)


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else "docs/bench/results.json"
    with open(path) as f:
        res = json.load(f)
    folder = os.path.dirname(path) or "."
    blocks = {"machine": machine_table(res), "summary": summary_table(res)}
    for e in res["benchmarks"]:
        if isinstance(e.get("report"), str):
            e["report"] = json.loads(e["report"])
        blocks[e["id"]] = table(e)
        out = plot(e, folder)
        if out:
            print(f"bench-report: {out}")
    if os.path.exists(PAGE):
        with open(PAGE) as f:
            page = f.read()
        new = replace_tables(page, blocks)
        if new != page:
            with open(PAGE, "w") as f:
                f.write(new)
            print(f"bench-report: tables of {PAGE} updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
