"""``python -m tests.timer_bot run``: :mod:`tests.clocked_bot`'s bot, noting the timers it
finds due.

Test-only, for the durable waits of issue 29 (docs/architecture.md, "Workflows", its
"Time"): the bot on the wall clock read from a file (:func:`tests.clocked_bot.clocked_build`:
its sweeper reads the file; the engine's run context, which sets a wait's ``expires_at``,
keeps the real wall clock, as do leases and claims), with the store's ``due_requests``
wrapped so that each process says which requests it found expired and, several at once,
finds them together. Read from the environment as :mod:`tests.clocked_bot` reads it
(``CLOCKED_BOT_CLOCK``, ``CLOCKED_BOT_SWEEP``, ``CLOCKED_BOT_SWEPT``), and:

- in the ``CLOCKED_BOT_SWEPT`` folder each process appends, to ``<instance>.due``, one
  line per request it found expired at a sweep: the sweep's time and the request's id
  (:func:`due`), before it hands the request to its hub to expire;
- ``CLOCKED_BOT_TOGETHER``: how many processes read the due requests together: at each
  new time of the clock, each waits after its read until that many have read (a marker
  file each), so every one of them finds a timer that came due and tries to fire it,
  and only the request's compare-and-set lets one through.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import bot.serve
from bot.app import App
from bot.cli import main
from conversations.store import DueRequest
from tests.clocked_bot import clocked_build


def due(folder: Path, instance: str) -> list[tuple[datetime, str]]:
    """The requests ``instance`` found expired, each with the time of the sweep that found
    it, oldest first."""
    found = folder / f"{instance}.due"
    if not found.is_file():
        return []
    lines = [line.split() for line in found.read_text().splitlines() if line]
    return [(datetime.fromisoformat(at), request) for at, request in lines]


def _read_at(folder: Path, name: str, stem: str) -> int:
    """Mark that ``name`` read the due requests at ``stem``; how many processes did so far."""
    (folder / f"due-{stem}.{name}.read").touch()
    return len(list(folder.glob(f"due-{stem}.*.read")))


async def _together(folder: Path, name: str, at: datetime, count: int) -> None:
    """Mark that ``name`` read at ``at``; return once ``count`` processes did (or after a
    minute: a process that died must not hold the others for good)."""
    stem = at.isoformat().replace(":", "-")
    for _ in range(1200):
        if await asyncio.to_thread(_read_at, folder, name, stem) >= count:
            return
        await asyncio.sleep(0.05)


async def timer_build(settings: Any, **given: Any) -> App:
    """:func:`tests.clocked_bot.clocked_build`, its due requests read together and noted
    (see the module docstring)."""
    app = await clocked_build(settings, **given)
    folder = Path(os.environ["CLOCKED_BOT_SWEPT"])
    name = settings.instance or str(os.getpid())
    together = int(os.environ.get("CLOCKED_BOT_TOGETHER", "1"))
    requests = app.store.requests  # the sweeper's own (the same object)
    due_requests = requests.due_requests

    async def noted(now: datetime) -> list[DueRequest]:
        found = await due_requests(now)
        await _together(folder, name, now, together)
        expired = [one for one in found if one.expired]
        if expired:
            with (folder / f"{name}.due").open("a", encoding="utf-8") as out:
                out.writelines(f"{now.isoformat()} {one.request_id}\n" for one in expired)
        return found

    requests.due_requests = noted  # type: ignore[method-assign]
    return app


if __name__ == "__main__":
    bot.serve.build = timer_build  # type: ignore[assignment]
    sys.exit(main())
