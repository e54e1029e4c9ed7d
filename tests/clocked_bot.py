"""``python -m tests.clocked_bot run``: ``threadbot run`` on a wall clock a test sets.

Test-only: the bot's own start (:func:`bot.cli.main`) with :func:`bot.app.build` given
a wall clock read from a file, so several processes share one clock that the test
moves (their sweepers, hence their schedules, see the same time; leases and claims
keep the real clock, as the store's own). Read from the environment, none of them a
setting (``THREADBOT_*`` names are refused as unknown settings):

- ``CLOCKED_BOT_CLOCK``: the file holding the time, one ISO 8601 line with its offset
  (:func:`set_clock` writes it whole, by a rename);
- ``CLOCKED_BOT_SWEEP``: seconds between two sweeps (the bot's own is 30);
- ``CLOCKED_BOT_SWEPT``: a folder where each process appends, to ``<instance>.swept``,
  the time of each sweep of its schedules once it is done, so a test waits until
  every process has swept at the time it set (never for a fixed while); and to
  ``<instance>.fired``, each time it tried to start and the conversation it started
  (``-``: the time was recorded by another);
- ``CLOCKED_BOT_TOGETHER``: how many processes read the schedules' last times together:
  at each new time of the clock, each waits after its read until that many have read
  (a marker file each), so every one of them tries to start a time that is due, and
  only the store's key lets one through (without it, the first to write makes the
  others pass the time over, and the key is seldom put to the test).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import bot.serve
from bot.app import App, build
from bot.cli import main
from conversations.schedules import Fired


def set_clock(path: Path, moment: datetime) -> None:
    """Set the clock in ``path`` to ``moment`` (timezone-aware), in one rename."""
    written = path.with_suffix(".new")
    written.write_text(moment.isoformat() + "\n", encoding="utf-8")
    written.replace(path)


def swept(folder: Path, instance: str) -> list[datetime]:
    """The times ``instance`` swept its schedules at, oldest first."""
    found = folder / f"{instance}.swept"
    if not found.is_file():
        return []
    return [datetime.fromisoformat(line) for line in found.read_text().split()]


def file_clock(path: Path) -> Callable[[], datetime]:
    """A wall clock that reads ``path`` (see :func:`set_clock`) at each call."""
    return lambda: datetime.fromisoformat(path.read_text(encoding="utf-8").strip())


def fired(folder: Path, instance: str) -> list[tuple[datetime, str | None]]:
    """The times ``instance`` tried to start, each with the conversation it started
    (None: another instance had recorded the time)."""
    found = folder / f"{instance}.fired"
    if not found.is_file():
        return []
    tried = [line.split() for line in found.read_text().splitlines() if line]
    return [(datetime.fromisoformat(due), None if cid == "-" else cid) for due, cid in tried]


def _read_at(folder: Path, name: str, stem: str) -> int:
    """Mark that ``name`` read at ``stem``; how many processes did so far."""
    (folder / f"{stem}.{name}.read").touch()
    return len(list(folder.glob(f"{stem}.*.read")))


async def _together(folder: Path, name: str, at: datetime, count: int) -> None:
    """Mark that ``name`` read at ``at``; return once ``count`` processes did (or after
    a minute: a process that died must not hold the others for good)."""
    stem = at.isoformat().replace(":", "-")
    for _ in range(1200):
        if await asyncio.to_thread(_read_at, folder, name, stem) >= count:
            return
        await asyncio.sleep(0.05)


async def clocked_build(settings: Any, **given: Any) -> App:
    """:func:`bot.app.build` on the file's clock, sweeping as often as the test asks,
    its processes reading together and noting each sweep (see the module docstring)."""
    clock = file_clock(Path(os.environ["CLOCKED_BOT_CLOCK"]))
    app = await build(settings, **{**given, "wall_clock": clock})
    app.sweeper.interval = float(os.environ.get("CLOCKED_BOT_SWEEP", "0.2"))
    scheduler = app.sweeper.scheduler
    folder = Path(os.environ["CLOCKED_BOT_SWEPT"])
    name = settings.instance or str(os.getpid())
    together = int(os.environ.get("CLOCKED_BOT_TOGETHER", "1"))
    schedules = app.store.schedules  # the scheduler's own (the same object)
    last_due = schedules.last_due
    sweeping: list[datetime] = []  # the time of the sweep under way

    async def read_together(names: Any) -> dict[str, datetime]:
        last = await last_due(names)
        await _together(folder, name, sweeping[-1], together)
        return last

    schedules.last_due = read_together  # type: ignore[method-assign]
    if scheduler is not None:
        sweep = scheduler.sweep

        async def noting(now: datetime, since: datetime) -> list[Fired]:
            sweeping[:] = [now]
            done = await sweep(now, since)
            with (folder / f"{name}.fired").open("a", encoding="utf-8") as out:
                for one in done:
                    if one.outcome == "started":
                        out.write(f"{one.due.isoformat()} {one.conversation_id or '-'}\n")
            with (folder / f"{name}.swept").open("a", encoding="utf-8") as out:
                out.write(now.isoformat() + "\n")
            return done

        scheduler.sweep = noting  # type: ignore[method-assign]
    return app


if __name__ == "__main__":
    bot.serve.build = clocked_build  # type: ignore[assignment]
    sys.exit(main())
