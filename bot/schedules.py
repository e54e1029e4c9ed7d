"""Scheduled runs in the settings: ``[[schedules]]`` tables of ``threadbot.toml``.

Each table is one schedule (docs/architecture.md, "Scheduled runs")::

    [[schedules]]
    name = "morning-tests"          # unique; names its times in the store
    cron = "0 9 * * 1-5"            # minute hour day-of-month month day-of-week
    timezone = "Europe/Paris"       # IANA name; UTC by default
    platform = "slack"              # needed only when the bot runs on several
    team = "T0123ABCD"              # the Slack team or Discord guild of the channel
    channel = "C0456EFGH"
    workflow = "validate-fix"       # asked for with workflow=NAME; the channel's by default
    request = "Run the test suite and tell us what fails."
    owner = "U0ALICE001"            # its requester: approves its plan, may stop it
    missed = "run_once"             # or "skip" (the default)

:class:`ScheduleEntry` reads and checks one (a bad cron expression, an unknown
timezone, a place or owner that is no id of its platform, a missing key: a settings
error, exit 2); :func:`check_schedules` checks them together (names unique, each on a
platform the bot runs); :meth:`ScheduleEntry.schedule` gives what the sweeper starts
(:class:`conversations.schedules.Schedule`). :func:`report` is ``threadbot schedules``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from adapters.console.translate import author_for
from bot.layer_tables import place_problem
from conversations.access import SLACK_USER, SNOWFLAKE
from conversations.events import PlatformRef
from conversations.schedules import Schedule, cron_problem, zone_problem
from core.vocabulary.people import Person

Platform = Literal["slack", "discord", "console"]

CONSOLE_CHANNEL = "console"
"""The console's one channel (``adapters/console/translate.py``)."""

NEXT_TIMES = 3
"""Times ``threadbot schedules`` lists for each schedule."""


class ScheduleEntry(BaseModel):
    """One ``[[schedules]]`` table (see the module docstring). ``platform`` None: the one
    platform the bot runs (:func:`check_schedules` sets it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
    cron: str
    timezone: str = "UTC"
    platform: Platform | None = None
    team: str = ""
    channel: str
    workflow: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+$")] | None = None
    request: Annotated[str, Field(min_length=1, max_length=20_000)]
    owner: Annotated[str, Field(pattern=r"^[^\s:/]+$")]
    missed: Literal["run_once", "skip"] = "skip"

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str) -> str:
        problem = cron_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        problem = zone_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _place(self) -> ScheduleEntry:
        """The team, channel and owner are ids of the platform (when it is given)."""
        problem = self.place_problem()
        if problem is not None:
            raise ValueError(problem)
        return self

    def place_problem(self) -> str | None:
        """Why the team, channel or owner cannot be on ``platform``; None when they can
        (or the platform is not known yet)."""
        match self.platform:
            case None:
                return None
            case "console":
                if self.channel != CONSOLE_CHANNEL:
                    return f"the console has one channel, {CONSOLE_CHANNEL!r}"
                return None
            case "slack" | "discord":
                if not self.team:
                    kind = "Slack team id" if self.platform == "slack" else "Discord guild id"
                    return f"team is required on {self.platform}: the channel's {kind}"
                problem = place_problem(self.platform, self.team, self.channel)
                if problem is not None:
                    return problem.replace("--team", "team").replace("--channel", "channel")
                user = SLACK_USER if self.platform == "slack" else SNOWFLAKE
                if not user.fullmatch(self.owner):
                    return f"owner {self.owner!r} is not a {self.platform} user id"
                return None

    def owner_person(self) -> Person:
        """The owner as the platform's events name them: on Slack and Discord by a mention
        of their id (``<@U0123>``, shown as their name); in the console by name, its id
        ``console:<name>`` (``adapters/console/translate.py`` ``author_for``)."""
        if self.platform == "console":
            author = author_for(self.owner)
            return Person(id=author.id, name=author.name)
        return Person(id=self.owner, name=f"<@{self.owner}>")

    def schedule(self) -> Schedule:
        """What the sweeper starts. Raises ``ValueError`` before :func:`check_schedules`
        gave it a platform."""
        if self.platform is None:
            raise ValueError(f"schedule {self.name} has no platform")
        return Schedule(
            name=self.name,
            cron=self.cron,
            timezone=self.timezone,
            place=PlatformRef(platform=self.platform, workspace=self.team, channel=self.channel),
            owner=self.owner_person(),
            request=self.request,
            workflow=self.workflow,
            missed=self.missed,
            thread_is_channel=self.platform == "discord",
        )


def check_schedules(
    entries: Sequence[ScheduleEntry], running: Sequence[str]
) -> list[ScheduleEntry]:
    """``entries`` each with its platform: the one in ``running`` (the platforms with
    credentials; the console when none) when it names none. Raises ``ValueError`` naming
    the entry (``schedules[1].name: ...``) for a name used twice, a platform not given
    where the bot runs several, or one the bot does not run."""
    seen: dict[str, int] = {}
    checked: list[ScheduleEntry] = []
    for index, entry in enumerate(entries):
        where = f"schedules[{index}]"
        if entry.name in seen:
            raise ValueError(
                f"{where}.name: {entry.name!r} is the name of schedules[{seen[entry.name]}] too"
            )
        seen[entry.name] = index
        platform = entry.platform
        if platform is None:
            if len(running) != 1:
                raise ValueError(
                    f"{where}.platform: say which platform ({' or '.join(running)}): "
                    "the bot runs on several"
                )
            entry = entry.model_copy(update={"platform": running[0]})
            problem = entry.place_problem()
            if problem is not None:
                raise ValueError(f"{where}: {problem}")
        elif platform not in running:
            raise ValueError(
                f"{where}.platform: the bot does not run on {platform} "
                f"(it runs on {', '.join(running)})"
            )
        checked.append(entry)
    return checked


def on_console(schedules: Sequence[Schedule], session: str) -> list[Schedule]:
    """``schedules`` with the console's ones placed in its session (the ``workspace`` of
    every console ref: ``adapters/console/runner.py``)."""
    return [
        dataclasses.replace(s, place=s.place.model_copy(update={"workspace": session}))
        if s.place.platform == "console"
        else s
        for s in schedules
    ]


def report(entries: Sequence[ScheduleEntry], now: datetime) -> list[str]:
    """``threadbot schedules``: each schedule's cron, timezone, place, workflow, owner,
    missed policy and its next :data:`NEXT_TIMES` times after ``now``, in its timezone
    and in UTC; one line when there are none."""
    if not entries:
        return ["no schedules (add [[schedules]] tables to threadbot.toml: see the README)"]
    lines: list[str] = []
    for entry in entries:
        schedule = entry.schedule()
        place = " ".join(p for p in (entry.platform or "", entry.team, entry.channel) if p)
        workflow = entry.workflow or "(the channel's)"
        lines += [
            f"{entry.name}",
            f"  cron      {entry.cron}  ({entry.timezone})",
            f"  channel   {place}",
            f"  workflow  {workflow}",
            f"  owner     {entry.owner}",
            f"  missed    {entry.missed}",
        ]
        for n, moment in enumerate(schedule.next_times(now, NEXT_TIMES)):
            label = "next" if n == 0 else ""
            utc = moment.astimezone(UTC)
            lines.append(
                f"  {label:<9} {moment:%Y-%m-%d %H:%M %Z} ({entry.timezone}) = "
                f"{utc:%Y-%m-%d %H:%M} UTC"
            )
    return lines
