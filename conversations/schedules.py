"""Scheduled runs: which times of each schedule are due, and starting each once.

A schedule (:class:`Schedule`: a cron expression in a timezone, a channel, a request and
its owner) starts one conversation in its channel at each of its times
(docs/architecture.md, "Scheduled runs"). The sweeper (:mod:`conversations.sweeper`)
calls :meth:`Scheduler.sweep` at each sweep, with its clock's now and the start of the
window it treats as "due now": no task sleeps per schedule.

For each schedule, from the newest time recorded in the store
(:meth:`conversations.store.schedules.Schedules.last_due`):

- the times in the window (after ``since``, up to now) are due: each is started;
- the newest time after the last recorded one but at or before ``since`` is a time
  missed while no instance ran (or could): its schedule's ``missed`` policy says
  whether it runs once now (``run_once``) or is recorded ``skipped`` (``skip``); the
  older ones are passed over either way;
- a schedule with no record was first seen now: its times before ``since`` are no
  backlog; its last one is recorded ``seen``, and only what comes after it counts.

A time is started by recording it in the store in the same write that opens its
conversation (:meth:`~conversations.store.schedules.Schedules.start`): with several
instances on one database each sweeps, and the one whose record goes in first
starts it; the others find it recorded and start nothing. Times are cron times in
the schedule's timezone (croniter, https://github.com/pallets-eco/croniter), stored
in UTC.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from conversations.events import START_TEXT_CHARS, PlatformRef
from conversations.store.schedules import Outcome, Schedules
from core.vocabulary.people import Person

log = logging.getLogger(__name__)

Missed = Literal["run_once", "skip"]
"""What a time missed while no instance ran does: run once at the next sweep, or not."""

CRON_FIELDS = 5
"""A schedule's cron expression has five fields: minute, hour, day of month, month, day
of week (or one of ``@hourly``, ``@daily``, ``@weekly``, ``@monthly``, ``@yearly``)."""


def cron_problem(expression: str) -> str | None:
    """Why ``expression`` is not a schedule's cron expression, or None when it is."""
    try:
        fields = len(croniter(expression).expressions)
    except (CroniterError, ValueError, TypeError) as exc:
        return f"{expression!r} is not a cron expression: {exc}"
    if fields != CRON_FIELDS:
        return (
            f"{expression!r} has {fields} fields; a schedule's has 5: "
            "minute hour day-of-month month day-of-week (e.g. '0 9 * * 1-5')"
        )
    try:
        croniter(expression, datetime(2000, 1, 1, tzinfo=UTC)).get_next(datetime)
    except (CroniterError, ValueError) as exc:  # 30 February: a time that never comes
        return f"{expression!r} never comes: {exc}"
    return None


def zone_problem(name: str) -> str | None:
    """Why ``name`` is not an IANA timezone (``Europe/Paris``, ``UTC``), or None."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return f"{name!r} is not a timezone; use an IANA name such as 'Europe/Paris' or 'UTC'"
    return None


@dataclass(frozen=True)
class Schedule:
    """One scheduled run: ``name`` (unique), ``cron`` (five fields) in ``timezone`` (IANA),
    ``place`` (the channel: platform, workspace, channel; no thread), ``request`` (the
    text of its first request), ``owner`` (its requester: they approve its plan and may
    stop it), ``workflow`` (asked for with ``workflow=NAME``; None: the channel's),
    ``missed`` (see :data:`Missed`) and ``thread_is_channel`` (the platform's threads
    are channels of their own: :class:`conversations.events.StartThread`).

    Raises ``ValueError`` for a bad cron expression or timezone.
    """

    name: str
    cron: str
    timezone: str
    place: PlatformRef
    owner: Person
    request: str
    workflow: str | None = None
    missed: Missed = "skip"
    thread_is_channel: bool = False

    def __post_init__(self) -> None:
        problem = cron_problem(self.cron) or zone_problem(self.timezone)
        if problem is not None:
            raise ValueError(f"schedule {self.name}: {problem}")

    @property
    def zone(self) -> ZoneInfo:
        """The timezone its cron expression is read in."""
        return ZoneInfo(self.timezone)

    def next_times(self, after: datetime, count: int) -> list[datetime]:
        """Its next ``count`` times strictly after ``after``, in its timezone."""
        times = croniter(self.cron, after.astimezone(self.zone))
        return [times.get_next(datetime) for _ in range(count)]

    def between(self, after: datetime, until: datetime) -> list[datetime]:
        """Its times in ``(after, until]``, oldest first, in its timezone."""
        times = croniter(self.cron, after.astimezone(self.zone))
        found: list[datetime] = []
        while (moment := times.get_next(datetime)) <= until:
            found.append(moment)
        return found

    def latest(self, at: datetime) -> datetime:
        """Its newest time at or before ``at``, in its timezone (cron times are whole
        minutes: the search starts a second past ``at``'s whole second)."""
        start = at.astimezone(self.zone).replace(microsecond=0) + timedelta(seconds=1)
        moment: datetime = croniter(self.cron, start).get_prev(datetime)
        return moment

    def request_text(self) -> str:
        """The first request's text: its request, and ``workflow=NAME`` when it names one."""
        if self.workflow is None:
            return self.request
        return f"{self.request} workflow={self.workflow}"

    def announcement(self) -> str:
        """The scheduled message that starts each run's thread (one message at most
        :data:`~conversations.events.START_TEXT_CHARS` long)."""
        workflow = f" (workflow `{self.workflow}`)" if self.workflow else ""
        head = f"⏰ Scheduled run `{self.name}`{workflow} for {self.owner.name}: "
        room = START_TEXT_CHARS - len(head)
        request = self.request if len(self.request) <= room else self.request[: room - 1] + "…"
        return head + request


Start = Callable[[Schedule, datetime, datetime], Awaitable[str | None]]
"""``start(schedule, due, now)`` starts a schedule's time ``due`` at ``now``: the new
conversation's id, or None when it was recorded before
(:meth:`conversations.hub.Hub.open_scheduled`)."""


@dataclass(frozen=True)
class Fired:
    """What a sweep did with one time of a schedule: ``outcome``, and the conversation it
    started (None when another instance had recorded the time, or for a time skipped
    or seen)."""

    schedule: str
    due: datetime
    outcome: Outcome
    conversation_id: str | None = None


class Scheduler:
    """Starts the due times of ``schedules`` (see the module docstring): records through
    ``store`` as the instance ``instance``, starts a time through ``start``."""

    def __init__(
        self,
        *,
        schedules: Sequence[Schedule],
        store: Schedules,
        start: Start,
        instance: str,
    ) -> None:
        self.schedules = list(schedules)
        self._store = store
        self._start = start
        self._instance = instance

    async def sweep(self, now: datetime, since: datetime) -> list[Fired]:
        """Start what is due at ``now`` (times after ``since`` are due now; those at or
        before it were missed); returns what this instance did. Raises what the store
        raises: a time not recorded yet is looked at again at the next sweep."""
        if not self.schedules:
            return []
        last = await self._store.last_due([s.name for s in self.schedules])
        fired: list[Fired] = []
        for schedule in self.schedules:
            try:
                fired += await self._sweep_one(schedule, last.get(schedule.name), now, since)
            except (CroniterError, ValueError):  # one schedule's times: never the others'
                log.exception("schedule %s: its times could not be worked out", schedule.name)
        return fired

    async def _sweep_one(
        self, schedule: Schedule, last: datetime | None, now: datetime, since: datetime
    ) -> list[Fired]:
        fired: list[Fired] = []
        missed = schedule.latest(since)
        if last is None:
            due = schedule.between(since, now)
            if not due:  # first seen: nothing before it is a backlog
                await self._note(schedule, missed, Outcome.SEEN, now)
        else:
            if missed > last:
                if schedule.missed == "run_once":
                    fired.append(await self._started(schedule, missed, now))
                elif await self._note(schedule, missed, Outcome.SKIPPED, now):
                    log.info("schedule %s: skipped its time %s (missed)", schedule.name, missed)
                    fired.append(Fired(schedule.name, missed, Outcome.SKIPPED))
            due = schedule.between(max(since, last), now)
        for moment in due:
            fired.append(await self._started(schedule, moment, now))
        return fired

    async def _note(
        self, schedule: Schedule, due: datetime, outcome: Outcome, now: datetime
    ) -> bool:
        return await self._store.note(schedule.name, due, outcome, by=self._instance, at=now)

    async def _started(self, schedule: Schedule, due: datetime, now: datetime) -> Fired:
        conversation_id = await self._start(schedule, due, now)
        if conversation_id is not None:
            log.info(
                "schedule %s: started conversation %s for %s", schedule.name, conversation_id, due
            )
        return Fired(schedule.name, due, Outcome.STARTED, conversation_id)
