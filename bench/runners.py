"""Benchmark 10: 1,000 conversations at a configured concurrency, on each runner and store.

**Figure.** ``conversations`` mentions (``job N``) sent at once to real ``threadbot
run`` processes in Slack HTTP mode (:func:`tests.instances.instances`: the Slack fake,
the Anthropic fake answering each request after ``delay_ms``, the processes behind a
round-robin proxy), each conversation 4 model turns: three read-only ``list_files``
calls (no plan or approval needed), then the answer ``done N``. At most
``concurrency`` runs go at once (``cluster_max_runs``: every process on the database
counts). Time is from just before the first mention to the last answer posted in
its thread, in s; every answer must arrive. Three setups, each its own figure:

- ``sqlite``: one process on a SQLite file, the local runner;
- ``postgresql``: two processes on one PostgreSQL database, the local runner;
- ``ray``: one process on PostgreSQL with ``runner = "ray"`` and two actors on a local
  Ray cluster (started by the process; its start is outside the timing).

A setup whose part is missing (no PostgreSQL server, Ray not installed) is reported
skipped with the reason.

**Floor.** The ideal for the configured concurrency, measured: ``conversations``
asyncio tasks behind a semaphore of ``concurrency``, each sleeping ``delay_ms`` four
times (no store, no platform, no process). With 1,000 conversations at 100 at once
and 50 ms turns it is about 2 s.

**Rounds.** ``rounds`` rounds, each with fresh processes and a fresh database, the
floor and the setup alternating (:func:`bench._verdict.in_turn`). Target: at most
:data:`TARGET` times the ideal, every answer arrived.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bench._postgres import Server, find_server, fresh_databases
from bench._report import Figure, Result
from bench._verdict import Target, in_turn
from tests.fakes.anthropic_server import Scripted, tool_use
from tests.instances import Instances, instances, is_answer, job_number

TARGET = 3.0
"""Times the ideal a setup may take (a team's choice; see the README's table)."""
TURNS = 4
SETUPS = ("sqlite", "postgresql", "ray")


def turns_model(body: dict[str, Any]) -> Scripted:
    """The fake model's answer: ``list_files`` three times, then ``done N``."""
    n = job_number(body)
    asked = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
    if asked < TURNS - 1:
        return [tool_use(f"toolu_list_{n}_{asked}", "list_files", {"path": "."})]
    return [tool_use(f"toolu_finish_{n}", "finish", {"answer": f"done {n}"})]


async def run(
    root: Path,
    *,
    conversations: int = 1000,
    rounds: int = 3,
    delay_ms: int = 50,
    concurrency: int = 100,
    ray: int = 1,
    patience: float = 900.0,
) -> Result:
    """Measure every setup for ``rounds`` rounds beside the measured ideal; the Ray setup
    only when ``ray`` is 1 (a smoke run leaves it out: its cluster takes half a minute
    to start, and the Ray tests run a cluster of their own)."""
    started = time.perf_counter()
    delay = delay_ms / 1000
    server = await find_server()
    figures: list[Figure] = []
    skipped: list[str] = []
    for setup in SETUPS if ray else SETUPS[:-1]:
        why = _missing(setup, server)
        if why:
            skipped.append(f"{setup}: {why}")
            continue
        seconds: list[float] = []
        ideal: list[float] = []
        arrived: list[int] = []
        for number in range(rounds):
            for name in in_turn(number, "floor", "bot"):
                if name == "floor":
                    ideal.append(await _ideal(conversations, concurrency, delay))
                    continue
                where = root / f"runners-{setup}-{number}"
                pg = server if isinstance(server, Server) and setup != "sqlite" else None
                async with _world(where, setup, pg, delay, concurrency) as world:
                    took, count = await _burst(world, conversations, patience)
                seconds.append(took)
                arrived.append(count)
        missing = sum(conversations - n for n in arrived)
        figures.append(
            Figure(
                key=f"runners_{setup}_s",
                label=f"{conversations} conversations of {TURNS} turns, {concurrency} at "
                f"once: {_described(setup)}",
                unit="s",
                rounds=seconds,
                floor_rounds=ideal,
                floor_label=f"the ideal: {concurrency} at once, {TURNS} x {delay_ms} ms each",
                target=Target(TARGET),
                unmet=f"{missing} answers did not arrive within {patience:g} s" if missing else "",
                notes=["answers arrived by round: " + ", ".join(f"{n}" for n in arrived)],
            )
        )
    return Result(
        number=10,
        title=f"Runs at a configured concurrency, by runner and store ({delay_ms} ms model)",
        sizes=f"{conversations} conversations x {rounds} rounds per setup",
        figures=figures,
        seconds=time.perf_counter() - started,
        skipped="; ".join(skipped) if skipped and not figures else "",
        notes=[f"skipped {s}" for s in skipped] if figures else [],
    )


def _described(setup: str) -> str:
    return {
        "sqlite": "SQLite, one process",
        "postgresql": "PostgreSQL, two processes",
        "ray": "PostgreSQL, Ray with two actors",
    }[setup]


def _missing(setup: str, server: Server | str) -> str | None:
    """Why ``setup`` cannot run here, or None."""
    if setup != "sqlite" and not isinstance(server, Server):
        return server
    if setup == "ray" and importlib.util.find_spec("ray") is None:
        return "Ray is not installed (pip install 'threadbot[ray]')"
    return None


async def _ideal(conversations: int, concurrency: int, delay: float) -> float:
    """The measured ideal: every conversation's turns behind a semaphore, in s."""
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            for _ in range(TURNS):
                await asyncio.sleep(delay)

    begun = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(conversations)))
    return time.perf_counter() - begun


@contextlib.asynccontextmanager
async def _world(
    root: Path, setup: str, server: Server | None, delay: float, concurrency: int
) -> AsyncIterator[Instances]:
    """The processes of ``setup`` on a fresh database, ready for mentions."""
    await asyncio.to_thread(root.mkdir, parents=True, exist_ok=True)
    limits = {"CLUSTER_MAX_RUNS": str(concurrency)}
    async with contextlib.AsyncExitStack() as stack:
        database = None
        if server is not None:
            names = await stack.enter_async_context(fresh_databases(server, setup))
            database = server.database_url(names[setup])
        count = 2 if setup == "postgresql" else 1
        if setup == "ray":
            limits |= {"RUNNER": "ray", "RAY_ACTORS": "2"}
        world = await stack.enter_async_context(
            instances(
                root,
                turns_model,
                database=database,
                count=count,
                post_delay=0.0,
                model_delay=delay,
                **limits,
            )
        )
        yield world


async def _burst(world: Instances, conversations: int, patience: float) -> tuple[float, int]:
    """Mention ``job 1``... at once; seconds until the last answer was posted (the Slack
    fake's arrival time of its ``chat.postMessage``), and how many answers arrived."""
    sent = time.monotonic()
    threads = await asyncio.gather(
        *(world.channel.mention(world.front, f"job {n}") for n in range(1, conversations + 1))
    )
    job_of = {thread: n for n, thread in enumerate(threads, start=1)}
    answered: dict[int, float] = {}
    seen = 0
    deadline = sent + patience
    while len(answered) < conversations and time.monotonic() < deadline:
        calls = world.api.calls
        for call in calls[seen:]:  # only the calls that came since the last look
            n = job_of.get(str(call.args.get("thread_ts") or ""))
            said = str(call.args.get("text") or "")
            if call.method == "chat.postMessage" and call.ok and n and is_answer(said, n):
                answered.setdefault(n, call.time)
        seen = len(calls)
        await asyncio.sleep(0.05)
    if len(answered) < conversations:
        return patience, len(answered)
    return max(answered.values()) - sent, conversations
