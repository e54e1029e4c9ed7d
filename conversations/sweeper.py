"""One sweeper for reminders and expiry of pending requests, scheduled runs and pruning.

It reads the store for requests whose reminder or expiry time has come; no task
sleeps per request (docs/architecture.md, "Conversation lifecycle and workflow
position"). Its clock is a parameter, so tests move time forward and call
:meth:`Sweeper.sweep_once`. A reminder is posted once (compare-and-set on
``reminded_at``); an expiry goes through the conversation's queue like any input.

The same sweep starts the scheduled runs that are due (:class:`conversations.schedules.Scheduler`):
the times since the last sweep are due now; one is started by the instance whose record
of it goes in first (docs/architecture.md, "Scheduled runs"). A time before the last
sweep, or more than :data:`SCHEDULE_GRACE` (at least two intervals) ago, was missed:
no instance swept then (none ran, or none could reach the store).

The same sweep prunes, at most once per ``prune_every`` of its clock: outbox rows
settled and deliveries handled longer than ``retention`` ago go, the journal, tool
records and requests stay (:meth:`conversations.store.Retention.prune`); and the
workspaces of conversations that ended longer than ``workspace_retention`` ago
are removed, with their delegations' forks beside them (a running or waiting
conversation's never: its state is read again just before; a conversation started
again later gets a new one).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from pathlib import Path

from conversations.schedules import Fired, Scheduler
from conversations.store import Pruned, Requests, Retention, Threads
from core.context import now
from core.run.engine import Engine
from core.tools.workspaces import forks_of

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]

RETENTION = timedelta(days=7)
"""How long sent outbox rows and handled deliveries are kept by default."""
PRUNE_EVERY = timedelta(hours=1)
"""How often, on the sweeper's clock, pruning runs at most."""
SCHEDULE_GRACE = timedelta(minutes=1)
"""How long after a scheduled time, at least, a sweep still starts it as due now (a
sweep that comes later treats it as missed); two intervals when they are longer."""


def _remove_tree(path: Path) -> bool:
    """Remove ``path`` (a directory) and what is in it, and the forks its delegations made
    beside it (:func:`core.tools.workspaces.forks_of`); True when it was there."""
    for fork in forks_of(path):
        shutil.rmtree(fork, ignore_errors=True)
    if not path.is_dir():
        return False
    shutil.rmtree(path, ignore_errors=True)
    return True


def utc_now() -> datetime:
    """The current time, timezone-aware UTC (:func:`core.context.now`)."""
    return now()


class Sweeper:
    """Posts reminders at half a request's lifetime, expires it at the end, and prunes.

    ``requests`` and ``pruning``: the store's interfaces it reads and prunes through;
    ``retention``: how long settled outbox rows and handled deliveries are kept;
    ``prune_every``: the least time between two prunes; both on ``clock``.
    ``interval``: seconds between two sweeps of :meth:`run`. ``scheduler``: the
    scheduled runs to start as they come due (none: no schedules).
    """

    def __init__(
        self,
        *,
        requests: Requests,
        pruning: Retention,
        engine: Engine,
        expire: Callable[[str, str], Awaitable[None]],
        clock: Clock = utc_now,
        interval: float = 30.0,
        retention: timedelta = RETENTION,
        prune_every: timedelta = PRUNE_EVERY,
        threads: Threads | None = None,
        workspace_retention: timedelta | None = None,
        scheduler: Scheduler | None = None,
    ) -> None:
        self._requests = requests
        self._pruning = pruning
        self._engine = engine
        self._expire = expire
        self._clock = clock
        self.interval = interval
        """Seconds between two sweeps of :meth:`run` (read before each wait)."""
        self.scheduler = scheduler
        self._swept_at: datetime | None = None
        """The clock's time of this sweeper's last sweep that looked at the schedules."""
        self.retention = retention
        self._prune_every = prune_every
        self._pruned_at: datetime | None = None
        self._threads = threads
        self.workspace_retention = workspace_retention
        self._workspaces_swept_to: datetime | None = None
        """Conversations that ended before this had their workspaces removed already."""

    async def run(self) -> None:
        """Sweep every ``interval`` seconds until cancelled."""
        while True:
            try:
                await self.sweep_once()
            except Exception:
                log.exception("sweeping pending requests failed")
            await asyncio.sleep(self.interval)

    async def sweep_once(self) -> int:
        """Handle every due request now, start the scheduled runs due, then prune if it
        is time; returns how many requests were handled. Raises what the store raises
        (a failed prune is tried again ``prune_every`` later; a scheduled time not
        recorded, at the next sweep)."""
        now = self._clock()
        due = await self._requests.due_requests(now)
        for request in due:
            if request.expired:
                await self._expire(request.conversation_id, request.request_id)
            elif await self._requests.mark_reminded(request.request_id, now):
                await self._engine.remind(request.conversation_id, request.request_id)
        await self.start_scheduled(now)
        if self._prune_due(now):
            self._pruned_at = now
            await self.prune(now)
            await self.remove_workspaces(now)
        return len(due)

    async def start_scheduled(self, now: datetime) -> list[Fired]:
        """Start the scheduled runs due at ``now``: the times after this sweeper's last
        sweep (at most :data:`SCHEDULE_GRACE`, or two intervals, ago); what this instance
        did with each time (:meth:`conversations.schedules.Scheduler.sweep`)."""
        if self.scheduler is None:
            return []
        grace = max(SCHEDULE_GRACE, timedelta(seconds=2 * self.interval))
        since = now - grace
        if self._swept_at is not None and self._swept_at > since:
            since = min(self._swept_at, now)
        fired = await self.scheduler.sweep(now, since)
        self._swept_at = now
        return fired

    async def remove_workspaces(self, now: datetime | None = None) -> list[str]:
        """Remove the workspaces of conversations ended ``workspace_retention`` before
        ``now``; returns the ids whose workspace went (none without the setting)."""
        if self._threads is None or self.workspace_retention is None:
            return []
        before = (now or self._clock()) - self.workspace_retention
        ended = await self._threads.ended_between(self._workspaces_swept_to, before)
        removed = []
        for conversation_id, path in ended:
            info = await self._threads.find(conversation_id)
            if info is None or info.status.active:
                continue  # started again meanwhile: its workspace is in use
            if await asyncio.to_thread(_remove_tree, Path(path)):
                removed.append(conversation_id)
        self._workspaces_swept_to = before
        if removed:
            log.info("removed %s workspaces of conversations ended before %s", len(removed), before)
        return removed

    async def prune(self, now: datetime | None = None) -> Pruned:
        """Delete what is older than ``retention`` at ``now`` (default: the clock's now).

        Logs how many rows went; returns the counts.
        """
        pruned = await self._pruning.prune((now or self._clock()) - self.retention)
        if pruned.outbox or pruned.deliveries:
            log.info(
                "pruned %s outbox rows and %s deliveries older than %s",
                pruned.outbox,
                pruned.deliveries,
                self.retention,
            )
        return pruned

    def _prune_due(self, now: datetime) -> bool:
        last = self._pruned_at
        return last is None or not last <= now < last + self._prune_every
