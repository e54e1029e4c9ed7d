"""Scheduled runs (docs/architecture.md, "Scheduled runs"): the store's ``schedules``
contract on each backend, which times a sweep starts, skips or passes over, and the
settings that declare them.

The contract: a due time is recorded once (of two concurrent starts exactly one opens a
conversation), with the conversation it started, its delivery kept unhandled and its
scheduled message as its one outbox row; a conversation waits on a placeholder thread
until it is bound, once. The sweep: a schedule first seen runs no backlog; a time due
now starts once however many instances sweep it; a time missed while no instance ran
runs once (``run_once``) or is recorded skipped (``skip``). ``threadbot schedules``
lists each schedule with its next times; a bad cron expression, an unknown timezone,
a name used twice or a place that is no id of its platform stop the bot with exit 2.
The whole path through the hub and the Slack fake: ``tests/test_schedules_slack.py``;
two real instances: ``tests/test_instances_schedules.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from bot.schedules import ScheduleEntry, report
from bot.settings import Settings
from bot.settings_errors import explain
from conversations.events import PlatformRef, StartThread
from conversations.schedules import Schedule, Scheduler
from conversations.store import Outgoing, Store
from conversations.store.schedules import Opening, Outcome, awaits_thread
from conversations.sweeper import Sweeper
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.people import Person
from tests import forkserver
from tests.test_store_contract import BACKENDS, opened_store

ROOT = Path(__file__).resolve().parents[1]
OWNER = Person(id="U0ALICE001", name="<@U0ALICE001>")
CHANNEL = PlatformRef(platform="slack", workspace="T0TEAM0001", channel="C0PROJ0001")
MONDAY_9 = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
"""A due time of :data:`HOURLY` (a Monday)."""
HOURLY = Schedule(
    name="hourly",
    cron="0 * * * *",
    timezone="UTC",
    place=CHANNEL,
    owner=OWNER,
    request="check the build",
)


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A new, empty store of each backend (as in the contract suite)."""
    async with opened_store(request.param, request, tmp_path) as new:
        yield new


def opening(key: str = "schedule:hourly:1") -> Opening:
    """What a time of :data:`HOURLY` opens (as the hub makes it)."""
    announce = StartThread(ref=CHANNEL, text="⏰ Scheduled run `hourly`: check the build")
    return Opening(
        delivery_key=key,
        place=CHANNEL,
        requester=OWNER,
        event={"kind": "message_posted", "text": "check the build"},
        announce=Outgoing(announce),
        workspace_root=Path("workspaces"),
    )


# --- the contract --------------------------------------------------------------------------


async def test_a_due_time_is_started_once_with_its_conversation_waiting_for_its_thread(
    store: Store,
) -> None:
    handed: list[list[int]] = []
    store.on_outbox = lambda rows: handed.append([r.id for r in rows])
    at = MONDAY_9 + timedelta(seconds=5)
    starts = [
        store.schedules.start("hourly", MONDAY_9, by=f"instance-{n}", at=at, opening=opening())
        for n in (1, 2, 3)
    ]
    started = [cid for cid in await asyncio.gather(*starts) if cid is not None]
    assert len(started) == 1, started
    [cid] = started
    [run] = await store.schedules.runs("hourly")
    assert (run.schedule, run.due, run.outcome, run.conversation_id) == (
        "hourly",
        MONDAY_9,
        Outcome.STARTED,
        cid,
    )
    assert run.by.startswith("instance-") and run.at == at
    # A later start of the same time, written in another timezone, is the same time.
    paris = MONDAY_9.astimezone(ZoneInfo("Europe/Paris"))
    assert await store.schedules.start("hourly", paris, by="x", at=at, opening=opening()) is None

    conversation = await store.threads.info(cid)
    assert conversation.requester == OWNER
    assert conversation.status.lifecycle is Lifecycle.IDLE
    assert awaits_thread(conversation.binding)
    assert await store.threads.find_by_thread(conversation.binding.in_thread("1.0")) is None
    assert [(key, c) for key, c, _ in await store.inbox.unhandled()] == [("schedule:hourly:1", cid)]
    [row] = await store.outbox.rows(cid)
    assert isinstance(row.action, StartThread) and row.state == "pending"
    assert handed == [[row.id]]

    thread = CHANNEL.in_thread("1765098000.000100")
    assert await store.schedules.bind_thread(cid, thread)
    bound = await store.threads.find_by_thread(thread)
    assert bound is not None and bound.id == cid and not awaits_thread(bound.binding)
    assert not await store.schedules.bind_thread(cid, CHANNEL.in_thread("9.9"))  # once
    assert not await store.schedules.bind_thread("no-such-conversation", thread)


async def test_times_skipped_or_seen_are_recorded_once_and_the_newest_is_the_last(
    store: Store,
) -> None:
    at = MONDAY_9
    assert await store.schedules.last_due(["hourly", "daily"]) == {}
    assert await store.schedules.note("hourly", MONDAY_9, Outcome.SEEN, by="a", at=at)
    assert not await store.schedules.note("hourly", MONDAY_9, Outcome.SKIPPED, by="b", at=at)
    later = MONDAY_9 + timedelta(hours=2)
    assert await store.schedules.note("hourly", later, Outcome.SKIPPED, by="b", at=at)
    assert await store.schedules.note("daily", MONDAY_9, Outcome.SEEN, by="a", at=at)
    assert await store.schedules.last_due(["hourly", "daily", "other"]) == {
        "hourly": later,
        "daily": MONDAY_9,
    }
    runs = await store.schedules.runs()
    assert [(r.schedule, r.due, r.outcome, r.by) for r in runs] == [
        ("daily", MONDAY_9, Outcome.SEEN, "a"),
        ("hourly", MONDAY_9, Outcome.SEEN, "a"),
        ("hourly", later, Outcome.SKIPPED, "b"),
    ]
    assert all(r.conversation_id is None for r in runs)


# --- the sweep -----------------------------------------------------------------------------


def scheduler(store: Store, *schedules: Schedule, instance: str = "instance-1") -> Scheduler:
    """A scheduler whose starts open conversations straight in the store."""

    async def start(schedule: Schedule, due: datetime, now: datetime) -> str | None:
        key = f"schedule:{schedule.name}:{due.astimezone(UTC).isoformat()}"
        return await store.schedules.start(
            schedule.name, due, by=instance, at=now, opening=opening(key)
        )

    return Scheduler(schedules=schedules, store=store.schedules, start=start, instance=instance)


async def started(store: Store) -> list[tuple[str, datetime]]:
    runs = await store.schedules.runs()
    return [(r.schedule, r.due) for r in runs if r.outcome is Outcome.STARTED]


async def test_a_schedule_first_seen_runs_no_backlog_then_each_time_once(store: Store) -> None:
    first = scheduler(store, HOURLY)
    now = MONDAY_9 + timedelta(minutes=30)
    assert await first.sweep(now, now - timedelta(minutes=1)) == []
    [seen] = await store.schedules.runs()
    assert (seen.due, seen.outcome) == (MONDAY_9, Outcome.SEEN)  # its last time before

    # Two instances sweep the next time; one starts it.
    second = scheduler(store, HOURLY, instance="instance-2")
    ten = MONDAY_9 + timedelta(hours=1)
    now = ten + timedelta(seconds=20)
    fired = [*await first.sweep(now, now - timedelta(seconds=30))]
    fired += await second.sweep(now + timedelta(seconds=1), now - timedelta(seconds=29))
    assert [(f.due, f.outcome, f.conversation_id is not None) for f in fired] == [
        (ten, Outcome.STARTED, True)
    ]
    assert await started(store) == [("hourly", ten)]
    assert len(await store.threads.conversations()) == 1


async def test_a_missed_time_runs_once_with_run_once_and_never_with_skip(store: Store) -> None:
    once = dataclasses.replace(HOURLY, name="once", missed="run_once")
    skip = dataclasses.replace(HOURLY, name="skip")
    before = scheduler(store, once, skip)
    now = MONDAY_9 + timedelta(minutes=30)
    await before.sweep(now, now - timedelta(minutes=1))  # both seen, last at 9:00

    # No instance ran from 9:30 to 12:30 (10, 11 and 12 missed); one starts again.
    after = scheduler(store, once, skip, instance="instance-2")
    now = MONDAY_9 + timedelta(hours=3, minutes=30)
    fired = await after.sweep(now, now - timedelta(minutes=1))
    noon = MONDAY_9 + timedelta(hours=3)
    assert sorted((f.schedule, f.due, f.outcome) for f in fired) == [
        ("once", noon, Outcome.STARTED),
        ("skip", noon, Outcome.SKIPPED),
    ]
    assert await started(store) == [("once", noon)]
    assert len(await store.threads.conversations()) == 1
    # Nothing more until the next time; then each runs it.
    assert await after.sweep(now + timedelta(minutes=1), now) == []
    one = MONDAY_9 + timedelta(hours=4)
    fired = await after.sweep(one + timedelta(seconds=5), now + timedelta(minutes=1))
    assert sorted((f.schedule, f.outcome) for f in fired) == [
        ("once", Outcome.STARTED),
        ("skip", Outcome.STARTED),
    ]


async def test_the_sweeper_starts_the_times_since_its_last_sweep_and_skips_older_ones(
    store: Store,
) -> None:
    """Due now: a time after the sweeper's last sweep, no more than a minute (or two
    intervals) ago; a time its sweeps did not reach within that was missed."""
    clock = [MONDAY_9 - timedelta(seconds=30)]

    async def nothing(*_args: object) -> None:
        return None

    sweeper = Sweeper(
        requests=store.requests,
        pruning=store.retention,
        engine=None,  # type: ignore[arg-type]  # no request comes due here
        expire=nothing,
        clock=lambda: clock[0],
        scheduler=scheduler(store, HOURLY),
    )
    await sweeper.sweep_once()  # first seen: 8:00 seen
    clock[0] = MONDAY_9 + timedelta(seconds=20)
    await sweeper.sweep_once()
    assert await started(store) == [("hourly", MONDAY_9)]
    clock[0] = MONDAY_9 + timedelta(hours=1, minutes=5)  # no sweep came near 10:00
    await sweeper.sweep_once()
    runs = await store.schedules.runs()
    assert [(r.due.hour, r.outcome) for r in runs] == [
        (8, Outcome.SEEN),
        (9, Outcome.STARTED),
        (10, Outcome.SKIPPED),
    ]


# --- settings and the command -------------------------------------------------------------


def entry(**changes: object) -> dict[str, object]:
    return {
        "name": "morning-tests",
        "cron": "0 9 * * 1-5",
        "timezone": "Europe/Paris",
        "platform": "slack",
        "team": "T0TEAM0001",
        "channel": "C0PROJ0001",
        "request": "Run the tests and report.",
        "owner": "U0ALICE001",
        **changes,
    }


def test_a_schedule_entry_gives_the_schedule_the_sweeper_starts() -> None:
    schedule = ScheduleEntry.model_validate(entry(workflow="validate-fix")).schedule()
    assert schedule.place == CHANNEL
    assert schedule.owner == OWNER
    assert schedule.request_text() == "Run the tests and report. workflow=validate-fix"
    assert schedule.missed == "skip" and not schedule.thread_is_channel
    assert schedule.announcement() == (
        "⏰ Scheduled run `morning-tests` (workflow `validate-fix`) for <@U0ALICE001>: "
        "Run the tests and report."
    )
    friday = datetime(2026, 12, 11, 12, tzinfo=UTC)
    assert [t.astimezone(UTC).isoformat() for t in schedule.next_times(friday, 2)] == [
        "2026-12-14T08:00:00+00:00",  # Monday 9:00 in Paris (CET): Saturday and Sunday skipped
        "2026-12-15T08:00:00+00:00",
    ]
    discord = ScheduleEntry.model_validate(
        entry(platform="discord", team="1198206788567171079", channel="12", owner="42")
    ).schedule()
    assert discord.thread_is_channel and discord.owner == Person(id="42", name="<@42>")


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"cron": "0 25 * * *"}, "schedules.0.cron"),
        ({"cron": "* * * * * *"}, "has 6 fields; a schedule's has 5"),
        ({"cron": "0 0 30 2 *"}, "'0 0 30 2 *' never comes"),
        ({"timezone": "Mars/Olympus"}, "'Mars/Olympus' is not a timezone"),
        ({"team": ""}, "team is required on slack"),
        ({"channel": "general"}, "channel: 'general' is not a Slack channel id"),
        ({"owner": "alice"}, "owner 'alice' is not a slack user id"),
        ({"missed": "always"}, "schedules.0.missed"),
        ({"request": None}, "schedules.0.request"),
    ],
)
def test_a_bad_schedule_entry_is_a_settings_error(changes: dict[str, object], said: str) -> None:
    data = {k: v for k, v in entry(**changes).items() if v is not None}
    with pytest.raises(ValidationError) as raised:
        Settings(slack_bot_token="xoxb-test", schedules=[data])
    assert said in str(raised.value)


def test_names_are_unique_and_the_platform_is_the_one_the_bot_runs() -> None:
    with pytest.raises(ValidationError, match=r"schedules\[1\].name: 'morning-tests' is the name"):
        Settings(slack_bot_token="xoxb-test", schedules=[entry(), entry()])
    one = {k: v for k, v in entry().items() if k != "platform"}
    assert Settings(slack_bot_token="xoxb-test", schedules=[one]).schedules[0].platform == "slack"
    with pytest.raises(ValidationError, match=r"schedules\[0\].platform: say which platform"):
        Settings(slack_bot_token="xoxb-test", discord_token="d", schedules=[one])
    with pytest.raises(ValidationError, match="the bot does not run on slack"):
        Settings(discord_token="d", schedules=[entry()])
    console = {"name": "n", "cron": "@daily", "channel": "console", "request": "r", "owner": "bob"}
    assert Settings(schedules=[console]).schedules[0].platform == "console"


def test_threadbot_schedules_lists_each_with_its_next_times() -> None:
    settings = Settings(
        slack_bot_token="xoxb-test",
        schedules=[entry(missed="run_once"), entry(name="hourly", cron="@hourly", timezone="UTC")],
    )
    lines = report(settings.schedules, datetime(2026, 12, 11, 12, 30, tzinfo=UTC))
    assert lines == [
        "morning-tests",
        "  cron      0 9 * * 1-5  (Europe/Paris)",
        "  channel   slack T0TEAM0001 C0PROJ0001",
        "  workflow  (the channel's)",
        "  owner     U0ALICE001",
        "  missed    run_once",
        "  next      2026-12-14 09:00 CET (Europe/Paris) = 2026-12-14 08:00 UTC",
        "            2026-12-15 09:00 CET (Europe/Paris) = 2026-12-15 08:00 UTC",
        "            2026-12-16 09:00 CET (Europe/Paris) = 2026-12-16 08:00 UTC",
        "hourly",
        "  cron      @hourly  (UTC)",
        "  channel   slack T0TEAM0001 C0PROJ0001",
        "  workflow  (the channel's)",
        "  owner     U0ALICE001",
        "  missed    skip",
        "  next      2026-12-11 13:00 UTC (UTC) = 2026-12-11 13:00 UTC",
        "            2026-12-11 14:00 UTC (UTC) = 2026-12-11 14:00 UTC",
        "            2026-12-11 15:00 UTC (UTC) = 2026-12-11 15:00 UTC",
    ]


TOML = """
[[schedules]]
name = "morning-tests"
cron = "{cron}"
timezone = "{zone}"
channel = "console"
request = "Run the tests"
owner = "alice"
"""


def threadbot(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("THREADBOT_", "SLACK_"))}
    env |= {"PYTHONPATH": str(ROOT), "THREADBOT_DATABASE_URL": "memory://"}
    env.pop("DISCORD_TOKEN", None)
    return forkserver.run(
        [sys.executable, "-m", "bot", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_command_prints_the_schedules_and_a_bad_one_exits_2(tmp_path: Path) -> None:
    (tmp_path / "threadbot.toml").write_text(TOML.format(cron="0 9 * * *", zone="UTC"))
    done = threadbot(tmp_path, "schedules")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:6] == [
        "morning-tests",
        "  cron      0 9 * * *  (UTC)",
        "  channel   console console",
        "  workflow  (the channel's)",
        "  owner     alice",
        "  missed    skip",
    ]
    times = r"\d{4}-\d\d-\d\d 09:00 UTC \(UTC\) = \d{4}-\d\d-\d\d 09:00 UTC"
    assert len(lines) == 9 and all(
        re.fullmatch(r"  (next)?\s+" + times, line) for line in lines[6:]
    )

    (tmp_path / "threadbot.toml").write_text(TOML.format(cron="0 9 * *", zone="UTC"))
    bad_cron = threadbot(tmp_path, "schedules")
    assert bad_cron.returncode == 2
    assert "threadbot.toml: schedules[0].cron: '0 9 * *' is not a cron expression" in (
        bad_cron.stderr
    )
    (tmp_path / "threadbot.toml").write_text(TOML.format(cron="0 9 * * *", zone="Europe/Pariss"))
    bad_zone = threadbot(tmp_path, "run")
    assert bad_zone.returncode == 2
    assert "threadbot.toml: schedules[0].timezone: 'Europe/Pariss' is not a timezone" in (
        bad_zone.stderr
    )


def test_each_bad_entry_is_told_in_one_line_naming_it(tmp_path: Path) -> None:
    """As ``threadbot run`` tells them before it exits 2 (``bot/settings_errors.py``)."""
    toml = tmp_path / "threadbot.toml"
    missing = {k: v for k, v in entry().items() if k != "request"}
    cases = [
        ([entry(), entry()], "schedules[1].name: 'morning-tests' is the name of schedules[0] too"),
        ([missing], "schedules[0].request: is required"),
        ([entry(timezone="Europe/Pariss")], "schedules[0].timezone: 'Europe/Pariss' is not a"),
    ]
    for schedules, said in cases:
        with pytest.raises(ValidationError) as raised:
            Settings(slack_bot_token="xoxb-test", schedules=schedules)
        [line] = explain(raised.value, fields=Settings.model_fields, environ={}, toml_file=toml)
        assert line.startswith(f"{toml}: {said}"), line
