"""``python -m bench`` (``make bench``): the benchmarks, each figure beside its floor.

Usage::

    python -m bench [--only 1,4] [--quick] [--json FILE]

``--quick`` runs every benchmark at a tiny size (a smoke run: the figures mean
nothing); ``--json`` writes every figure to ``FILE``, with its rounds, its floor's
rounds, the per-round ratios and the verdict. Each benchmark runs in its own
event loop on its own temporary SQLite files; benchmarks 8 and 9 on PostgreSQL,
in databases they create on the server :mod:`bench._postgres` finds and drop
after (without a server they are reported skipped, with the reason); benchmark 11
on SQLite and, when a server answers, on PostgreSQL too. What each
measures, and its floor, is in its module's docstring. Every figure is judged the
same way (:mod:`bench._verdict`): its floor measured in the same run, rounds alternating,
the verdict on the median of the per-round ratios, printed with their spread.
The last line says how long the whole run took and the load average before and
after (a loaded machine moves the figures: the spread shows by how much).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import (
    cache_prefix,
    inspector_list,
    long_conversation,
    many_conversations,
    mention_latency,
    postgres_statements,
    postgres_tool_calls,
    runners,
    statements,
    tool_calls,
    waiting,
)
from bench._report import Result, fmt, render, shown, spread

Benchmark = Callable[..., Coroutine[Any, Any, Result]]

BENCHMARKS: dict[int, Benchmark] = {
    1: mention_latency.run,
    2: tool_calls.run,
    3: long_conversation.run,
    4: many_conversations.run,
    5: statements.run,
    6: waiting.run,
    7: cache_prefix.run,
    8: postgres_tool_calls.run,
    9: postgres_statements.run,
    10: runners.run,
    11: inspector_list.run,
}

SPAN = f"{min(BENCHMARKS)}-{max(BENCHMARKS)}"

ON_POSTGRES = frozenset({8, 9})
"""The benchmarks that need a PostgreSQL server (``bench._postgres``); skipped without."""

ALSO_POSTGRES = frozenset({11})
"""The benchmarks that measure on SQLite and, when a server answers, on PostgreSQL too
(without one, their PostgreSQL figures are left out with a note saying why)."""

SIZES: dict[int, dict[str, int]] = {
    1: {"events": 300, "rounds": 5},
    2: {"calls": 250, "rounds": 5},
    3: {"calls": 500, "rounds": 3, "window": 50},
    4: {"conversations": 1000, "rounds": 3, "delay_ms": 50},
    5: {"rounds": 3},
    6: {
        "many": 2000,
        "few": 20,
        "heap_sample": 500,
        "heap_rounds": 3,
        "approvals": 10,
        "rounds": 5,
    },
    7: {"turns": 30},
    8: {"calls": 250, "rounds": 5},
    9: {"rounds": 3},
    10: {"conversations": 1000, "rounds": 3, "delay_ms": 50, "concurrency": 100, "ray": 1},
    11: {"conversations": 10_000, "requests": 20, "rounds": 5},
}
"""The issue's sizes (at least 300 mentions, 500 tool calls in one conversation, 1,000
conversations of 4 turns with a 50 ms model, 20 and 2,000 waiting, 10,000 conversations
in the store under the inspector's list)."""

QUICK: dict[int, dict[str, int]] = {
    1: {"events": 4, "rounds": 2},
    2: {"calls": 8, "rounds": 2},
    3: {"calls": 12, "rounds": 1, "window": 4},
    4: {"conversations": 4, "rounds": 1, "delay_ms": 5},
    5: {"rounds": 1},
    6: {"many": 16, "few": 3, "heap_sample": 3, "heap_rounds": 2, "approvals": 2, "rounds": 2},
    7: {"turns": 3},
    8: {"calls": 8, "rounds": 2},
    9: {"rounds": 1},
    10: {"conversations": 4, "rounds": 1, "delay_ms": 5, "concurrency": 2, "ray": 0},
    11: {"conversations": 30, "requests": 2, "rounds": 1},
}
"""Tiny sizes for a smoke run (``--quick``, and the test that keeps the benchmarks alive)."""


def machine() -> str:
    """CPU count, CPU model, Python version and the date (UTC), on one line."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import os

    cpus = os.cpu_count() or 0
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    return f"{cpus} CPUs ({model}), Python {platform.python_version()}, {today}"


def say(line: str) -> None:
    """Print ``line`` at once (``make bench`` output is often piped)."""
    print(line, flush=True)


def run_all(
    numbers: list[int],
    *,
    quick: bool = False,
    out: Callable[[str], None] = say,
) -> list[Result]:
    """Run the benchmarks ``numbers`` in order, printing each result as it comes."""
    results = []
    with tempfile.TemporaryDirectory(prefix="threadbot-bench-") as tmp:
        for number in numbers:
            sizes = (QUICK if quick else SIZES)[number]
            root = Path(tmp) / str(number)
            result = asyncio.run(BENCHMARKS[number](root, **sizes))
            render(result, out)
            results.append(result)
    return results


def summary(results: list[Result], out: Callable[[str], None] = print) -> None:
    """One line per figure: its value and floor (medians of the rounds), the median it is
    judged on (of the per-round ratios, or of the values), the spread of those, the
    target and whether it is met."""
    out("")
    out("figure | value | floor | judged on (median) | spread | target | met")
    for result in results:
        if result.skipped:
            out(f"{result.number}. {result.title} | skipped: {result.skipped}")
        for f in result.figures:
            verdict = f.verdict
            met = {True: "yes", False: "NO", None: "-"}[f.met]
            floor = fmt(f.floor, f.unit) if f.floor is not None else "-"
            target = f.target.words(f.better, f.unit) if f.target else "-"
            out(
                f"{result.number}. {f.label} | {fmt(f.value, f.unit)} | {floor} | "
                f"{shown(f, verdict.median)} | {spread(f)} | {target} | {met}"
            )


def _load() -> str:
    import os

    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _took(seconds: float) -> str:
    """``seconds`` as ``1,170 s (19 min 30 s)``."""
    minutes, rest = divmod(round(seconds), 60)
    return f"{seconds:,.0f} s ({minutes} min {rest} s)" if minutes else f"{seconds:.0f} s"


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run the benchmarks, print the figures; 0 when every one ran."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help=f"comma-separated benchmark numbers ({SPAN})")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args(argv)
    numbers = [int(n) for n in args.only.split(",") if n.strip()] or sorted(BENCHMARKS)
    unknown = [n for n in numbers if n not in BENCHMARKS]
    if unknown:
        parser.error(f"no benchmark {unknown}; there are {SPAN}")
    print(f"threadbot benchmarks on {machine()}; load average {_load()}", flush=True)
    started = time.perf_counter()
    results = run_all(numbers, quick=args.quick)
    total = time.perf_counter() - started
    summary(results)
    print(f"\nall benchmarks took {_took(total)}; load average now {_load()}", flush=True)
    if args.json is not None:
        report = {
            "machine": machine(),
            "seconds": total,
            "quick": args.quick,
            "results": [r.as_dict() for r in results],
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
