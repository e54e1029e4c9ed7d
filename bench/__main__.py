"""Throughput of the engine and memory held by waiting conversations.

Runs on a temporary SQLite database with the scripted model and the console
adapter writing to memory, so it measures threadbot itself (store, hub, engine,
outbox), not a model or a platform:

1. ``runs``: N conversations, each mention -> plan -> approval -> two read-only
   tool calls -> answer; reports conversations per second and milliseconds per
   conversation (wall time, whole story).
2. ``waiting``: M conversations left waiting for plan approval; reports the Python
   heap growth per waiting conversation (tracemalloc) and checks that no task is
   left per waiting conversation (DESIGN.md: a run waiting on a person holds no
   memory).

Usage: ``python -m bench [--runs N] [--waiting M]``.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import tempfile
import time
import tracemalloc
from pathlib import Path

from adapters.console import ConsoleAdapter
from bot.app import build
from bot.settings import Settings
from conversations.events import Author, MessagePosted, PlatformRef, ReactionChanged
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn

ALICE = Author(id="bench:alice", name="alice")


def story(n: int) -> list[ScriptedTurn]:
    turns: list[ScriptedTurn] = []
    for _ in range(n):
        turns += [
            ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["look", "answer"]})]),
            ScriptedTurn(calls=[ScriptedCall("list_files", {}), ScriptedCall("list_files", {})]),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "done"})]),
        ]
    return turns


async def mention(app, key: str) -> None:  # type: ignore[no-untyped-def]
    ref = PlatformRef(platform="console", channel="bench", message=key, user=ALICE.id)
    await app.hub.handle(
        MessagePosted(delivery_key=key, ref=ref, author=ALICE, text="go", mentions_bot=True)
    )


async def bench_runs(root: Path, count: int) -> tuple[float, float]:
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{root / 'runs.db'}",
        workspace_root=root / "ws",
        progress_interval=0,
        console_state=root / "runs-console.jsonl",
    )
    app = await build(settings, model=ScriptedModel(story(count)))
    app.add_sender(ConsoleAdapter(input=io.StringIO(""), output=io.StringIO()))
    await app.start()
    started = time.perf_counter()
    for n in range(count):  # one after another: the model script is in order
        await mention(app, f"r{n}")
        await app.hub.settled()
        plan_id = await _plan_message(app)
        thread = PlatformRef(platform="console", channel="bench", thread=f"r{n}", message=plan_id)
        approve = "white_check_mark"
        await app.hub.handle(
            ReactionChanged(delivery_key=f"a{n}", ref=thread, author=ALICE, emoji=approve)
        )
        await app.hub.settled()
    elapsed = time.perf_counter() - started
    await app.close()
    return count / elapsed, elapsed / count * 1000


async def _plan_message(app) -> str | None:  # type: ignore[no-untyped-def]
    from sqlalchemy import text

    async with app.store.engine.connect() as conn:
        query = text(
            "select platform_message_id from outbox where request_id is not null "
            "order by id desc limit 1"
        )
        return (await conn.execute(query)).scalar_one_or_none()


async def bench_waiting(root: Path, count: int) -> tuple[float, int]:
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{root / 'waiting.db'}",
        workspace_root=root / "ws2",
        progress_interval=0,
        console_state=root / "waiting-console.jsonl",
    )
    turns = [ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["x"]})])] * (count + 1)
    app = await build(settings, model=ScriptedModel(turns))
    app.add_sender(ConsoleAdapter(input=io.StringIO(""), output=io.StringIO()))
    await app.start()
    await mention(app, "warmup")
    await app.hub.settled()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for n in range(count):
        await mention(app, f"w{n}")
        await app.hub.settled()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    growth = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    tasks = len(asyncio.all_tasks())
    await app.close()
    return growth / count, tasks


def main() -> None:
    """Run both benchmarks and print one line each."""
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--waiting", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rate, per = asyncio.run(bench_runs(Path(tmp), args.runs))
        print(f"runs: {args.runs} whole stories, {rate:.1f} conversations/s, {per:.1f} ms each")
        per_waiting, tasks = asyncio.run(bench_waiting(Path(tmp), args.waiting))
        print(
            f"waiting: {args.waiting} conversations waiting for approval, "
            f"{per_waiting / 1024:.1f} KiB of Python heap each, {tasks} asyncio tasks alive"
        )


if __name__ == "__main__":
    main()
