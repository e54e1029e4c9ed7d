"""Two instances, one schedule: each time starts exactly one conversation (issue 29).

The acceptance of issue 29's scheduled runs: two real ``threadbot run`` processes on one
store (PostgreSQL; a SQLite file), behind the round-robin proxy
(:mod:`tests.instances`), both on one wall clock the test moves
(:mod:`tests.clocked_bot`: a file they read; each notes every sweep of its schedules).
The schedule runs every ten minutes. The clock is set just before a time (the schedule
is first seen: no backlog) and then past three times in turn; after each, the test
waits until both processes have swept at that time, so both tried to start it.

Both processes read the schedule's last time before either records the next (the
launcher's ``CLOCKED_BOT_TOGETHER``), so both try to start each time, and each notes what
it got: for every time one started a conversation and the other found it recorded.
What the fakes and the store hold at the end: three scheduled messages at the top of the
channel, each posted once; in each one's thread the plan, posted once; three
conversations, each bound to its message's thread, its requester the owner; one
record per time (``started``, with its conversation), and the one ``seen`` before them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from core.context import now
from tests.clocked_bot import fired, set_clock, swept
from tests.fakes.slack_api import BOT_USER_ID, TEAM_ID
from tests.instances import (
    PLAN,
    Instances,
    doubles,
    finished,
    instances,
    posted,
    requests_of,
    said_twice,
    story_model,
    until,
)
from tests.slack_harness import ALICE, CHANNEL

SCHEDULE = f"""
[[schedules]]
name = "every-ten"
cron = "*/10 * * * *"
team = "{TEAM_ID}"
channel = "{CHANNEL}"
request = "job 7"
owner = "{ALICE}"
"""
ANNOUNCED = f"⏰ Scheduled run `every-ten` for <@{ALICE}>: job 7"


def scheduled(world: Instances) -> list[dict[str, object]]:
    """The scheduled messages the bot posted at the top of the channel, as posted."""
    return [
        call.args
        for call in world.api.calls_of("chat.postMessage")
        if call.ok and not call.args.get("thread_ts") and call.args.get("text") == ANNOUNCED
    ]


def threads(world: Instances) -> list[str]:
    """The ts of each scheduled message in the channel now."""
    return [
        str(m["ts"])
        for m in world.api.messages(CHANNEL)
        if m.get("user") == BOT_USER_ID and m.get("text") == ANNOUNCED
    ]


def first_time_after(moment: datetime) -> datetime:
    """The schedule's first time (a whole ten minutes) after ``moment``."""
    floor = moment.replace(second=0, microsecond=0) - timedelta(minutes=moment.minute % 10)
    return floor + timedelta(minutes=10)


@pytest.mark.timeout(900)
async def test_each_time_starts_one_conversation_with_two_instances_on_one_database(
    tmp_path: Path, instances_database: str | None
) -> None:
    (tmp_path / "threadbot.toml").write_text(SCHEDULE, encoding="utf-8")
    clock, notes = tmp_path / "clock", tmp_path / "swept"
    notes.mkdir()
    first = first_time_after(now())  # near the real time: no request reminder comes due
    set_clock(clock, first - timedelta(seconds=30))
    environ = {
        "CLOCKED_BOT_CLOCK": str(clock),
        "CLOCKED_BOT_SWEEP": "0.1",
        "CLOCKED_BOT_SWEPT": str(notes),
        "CLOCKED_BOT_TOGETHER": "2",  # both read before either records: both try each time
    }
    async with instances(
        tmp_path,
        story_model(),
        database=instances_database,
        launcher="tests.clocked_bot",
        environ=environ,
    ) as world:
        names = [bot.env["THREADBOT_INSTANCE"] for bot in world.bots]

        async def everyone_swept(moment: datetime) -> None:
            def done() -> bool:
                return all(any(t >= moment for t in swept(notes, name)) for name in names)

            await finished(
                world, [until(done)], lambda: f"sweeps: {_sweeps(notes, names)}", at_once=1
            )

        await everyone_swept(first - timedelta(seconds=30))  # first seen, both
        times = [first + timedelta(minutes=10 * n) for n in range(3)]
        for due in times:
            moment = due + timedelta(seconds=5)
            set_clock(clock, moment)
            await everyone_swept(moment)

        def planned() -> bool:
            found = threads(world)
            return len(found) >= 3 and all(
                any(PLAN in text for text in posted(world.api, t)) for t in found
            )

        await finished(world, [until(planned)], lambda: f"threads {threads(world)}", at_once=1)
        bot = world.bots[0]
        runs = bot.query(
            "select due_at, outcome, claimed_by, conversation_id from schedule_runs"
            " where schedule = 'every-ten' order by due_at"
        )
        conversations = {
            cid: (thread, requester)
            for cid, thread, requester in bot.query(
                "select id, thread, requester_id from conversations"
            )
        }
        codes = await world.stop()

    problems = []
    tries = {name: fired(notes, name) for name in names}
    for due in times:
        got = {name: [cid for at, cid in tried if at == due] for name, tried in tries.items()}
        if (
            sorted(len(ids) for ids in got.values()) != [1, 1]
            or sum(cid is not None for ids in got.values() for cid in ids) != 1
        ):
            problems.append(f"starts of {due} (conversation per instance): {got}")
    if len(scheduled(world)) != 3:
        problems.append(f"{len(scheduled(world))} scheduled messages posted, not 3")
    made = threads(world)
    plans = {t: sum(PLAN in text for text in posted(world.api, t)) for t in made}
    if plans != dict.fromkeys(made, 1) or len(made) != 3:
        problems.append(f"plans per scheduled thread: {plans}")
    found = doubles(world.api, dict(enumerate(made)))
    if found:
        problems.append(said_twice(found, len(made)))
    outcomes = [(outcome, cid is not None) for _due, outcome, _by, cid in runs]
    if outcomes != [("seen", False), *[("started", True)] * 3]:
        problems.append(f"schedule records: {runs}")
    started = {cid for *_rest, cid in runs if cid is not None}
    if started != set(conversations) or len(started) != 3:
        problems.append(f"conversations {conversations} and records {runs} differ")
    if {conversations[cid][0] for cid in started} != set(made):
        problems.append(f"threads of the conversations {conversations}, of the messages {made}")
    if {requester for _thread, requester in conversations.values()} != {ALICE}:
        problems.append(f"requesters {conversations}")
    if len(requests_of(world.model, 7)) != 3:
        problems.append(f"{len(requests_of(world.model, 7))} model requests, one per time wanted")
    if codes != [0, 0]:
        problems.append(f"exit codes {codes}:\n{world.logs()}")
    assert not problems, "\n".join(problems)


def _sweeps(notes: Path, names: list[str]) -> dict[str, str]:
    return {name: str(swept(notes, name)[-1:]) for name in names}
