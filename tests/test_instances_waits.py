"""A wait of one hour fires once after a SIGKILL and a restart, and once with two
instances (issue 29, "Time").

The acceptance of issue 29's durable waits: real ``threadbot run`` processes on one store
(a SQLite file; PostgreSQL) through the Slack fake, launched by :mod:`tests.timer_bot`:
their sweepers read the wall clock from a file the test moves (:mod:`tests.clocked_bot`),
each notes every sweep and the requests it found expired. The engine's run context keeps
the real wall clock, so a wait's ``expires_at`` is the real time it began plus the hour,
and the test moves the sweepers' clock relative to that ``expires_at`` as stored: the
stored time is the timer, whichever clock set it (docs/architecture.md, "Workflows").

The channel allows the workflow ``later`` of the bot's ``workflows_folder``: its plan is a
fixed one (a human ``approve`` step), then a ``wait`` of ``1h`` whose ``timeout`` leads to
an agent state that answers with ``finish`` (the model fake's one answer), then the end.
Alice asks for it and approves the plan; the test waits until the conversation is
``waiting(timer)`` with its ``WaitRequest`` open in the store, kills every process with
SIGKILL and starts it again on the same database and clock. With one process, the clock
is first set a second before the hour (nothing fires), then a second past it; with two,
past it at once, both reading the due requests together (the launcher's
``CLOCKED_BOT_TOGETHER``) so both find the timer due and try to fire it. Then the clock
stays past the hour for more sweeps and moves a day on. What the fakes and the store
hold at the end: the answer posted once in the thread and nothing posted twice; one
model request; the request ``expired``; the conversation ``done``; the journal with
one entry into the agent state after the wait and one model turn.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from core.context import now
from tests.clocked_bot import set_clock, swept
from tests.fakes.anthropic_server import Scripted, tool_use
from tests.instances import Instances, instances, offered, plans, posted
from tests.process_harness import WAIT, BotProcess, eventually
from tests.timer_bot import due

LATER = """
[workflow]
name = "later"
start = "approve"

[states.approve]
kind = "human"
ask = "approve"
steps = ["Wait an hour", "Then answer"]

[states.approve.on]
approved = "pause"
rejected = "done"

[states.pause]
kind = "wait"
duration = "1h"
description = "Waiting an hour."

[states.pause.on]
timeout = "answer"

[states.answer]
kind = "agent"
tools = ["read_only", "finish"]
instructions = "The hour is over: answer."

[states.answer.on]
finished = "done"

[states.done]
kind = "end"
"""
SETTINGS = 'workflows_folder = "flows"\nworkflows = ["default", "later"]\n'
ANSWER = "an hour later"
HOUR = timedelta(hours=1)


def answering(body: dict[str, Any]) -> Scripted:
    """The model fake's answer to any request: ``finish`` with :data:`ANSWER`."""
    return [tool_use("toolu_answer", "finish", {"answer": ANSWER})]


@dataclass(frozen=True)
class Timer:
    """A conversation ``waiting(timer)`` and its open ``WaitRequest``, as stored."""

    conversation: str
    request: str
    expires_at: datetime


def _utc(moment: Any) -> datetime:
    """A stored time (SQLite: text; PostgreSQL: a naive UTC ``datetime``) as aware UTC."""
    found = moment if isinstance(moment, datetime) else datetime.fromisoformat(str(moment))
    return found if found.tzinfo is not None else found.replace(tzinfo=UTC)


def _body(stored: Any) -> dict[str, Any]:
    """A journal entry's body (SQLite and asyncpg give JSON as text)."""
    found = json.loads(stored) if isinstance(stored, str | bytes) else stored
    assert isinstance(found, dict)
    return found


def setup(tmp_path: Path, together: int) -> tuple[Path, Path, dict[str, str]]:
    """The bot's settings and workflow folder in ``tmp_path``; the clock file (set to the
    real time now), the notes folder, and the launcher's environment."""
    (tmp_path / "threadbot.toml").write_text(SETTINGS, encoding="utf-8")
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "later.toml").write_text(LATER, encoding="utf-8")
    clock, notes = tmp_path / "clock", tmp_path / "swept"
    notes.mkdir()
    set_clock(clock, now())
    environ = {
        "CLOCKED_BOT_CLOCK": str(clock),
        "CLOCKED_BOT_SWEEP": "0.1",
        "CLOCKED_BOT_SWEPT": str(notes),
        "CLOCKED_BOT_TOGETHER": str(together),
    }
    return clock, notes, environ


async def seen(world: Instances, condition: Callable[[], object], what: Callable[[], str]) -> None:
    """Wait until ``condition`` holds; fail after :data:`WAIT` with ``what()`` and the logs."""
    try:
        await eventually(condition, seconds=WAIT)
    except TimeoutError:
        raise AssertionError(f"waited {WAIT:g} s: {what()}\n{world.logs()}") from None


async def approved(world: Instances) -> str:
    """Alice asks for the workflow ``later`` and approves its plan with ✅ once the bot
    offered its ✅ under it; the thread's ts."""
    thread = await world.channel.mention(world.front, "workflow=later wait an hour, then answer")
    await seen(
        world,
        lambda: [m for m in plans(world, thread) if offered(m)],
        lambda: f"no plan offered; posted {posted(world.api, thread)}",
    )
    plan = next(m for m in plans(world, thread) if offered(m))
    await world.channel.react(world.front, str(plan["ts"]))
    return thread


def timers(bot: BotProcess, thread: str) -> list[Timer]:
    """The open ``WaitRequest`` of the conversation in ``thread``, while it is
    ``waiting(timer)``."""
    rows = bot.query(
        "select c.id, r.id, r.expires_at from conversations c"
        " join pending_requests r on r.conversation_id = c.id"
        " where c.thread = ? and c.lifecycle = 'waiting' and c.wait_kind = 'timer'"
        " and r.kind = 'wait' and r.state = 'open'",
        thread,
    )
    return [Timer(cid, request, _utc(at)) for cid, request, at in rows]


async def waiting(world: Instances, thread: str) -> Timer:
    """Wait until the conversation in ``thread`` is ``waiting(timer)`` with its request
    open in the store; that timer."""
    bot = world.bots[0]
    await seen(
        world,
        lambda: timers(bot, thread),
        lambda: f"{bot.query('select lifecycle, wait_kind, position from conversations')}",
    )
    (found,) = timers(bot, thread)
    return found


async def restarted(world: Instances) -> None:
    """SIGKILL every process, then start each again (same database, clock, name)."""
    for bot in world.bots:
        bot.signal(signal.SIGKILL)
    assert [await bot.wait() for bot in world.bots] == [-signal.SIGKILL] * len(world.bots)
    await asyncio.gather(*(bot.start() for bot in world.bots))


def answers(world: Instances, thread: str) -> int:
    """How often the answer was posted in ``thread``."""
    return sum(
        said.split("\n", 1)[0].removeprefix("✅").strip() == ANSWER
        for said in posted(world.api, thread)
    )


async def everyone_swept(world: Instances, notes: Path, moment: datetime, times: int = 1) -> None:
    """Wait until every process swept at ``moment`` or later ``times`` times."""
    names = [bot.env["THREADBOT_INSTANCE"] for bot in world.bots]

    def done() -> bool:
        return all(sum(t >= moment for t in swept(notes, name)) >= times for name in names)

    await seen(world, done, lambda: f"sweeps: {[swept(notes, n)[-1:] for n in names]}")


async def past_the_hour(
    world: Instances, notes: Path, clock: Path, timer: Timer, thread: str
) -> datetime:
    """Move the clock a second past ``timer``, wait for the answer; then, the clock still
    there, until every process swept twice more, and a day on, until each swept there."""
    past = timer.expires_at + timedelta(seconds=1)
    set_clock(clock, past)
    await seen(world, lambda: answers(world, thread), lambda: f"posted {posted(world.api, thread)}")
    sweeps = {
        bot.env["THREADBOT_INSTANCE"]: len(swept(notes, bot.env["THREADBOT_INSTANCE"]))
        for bot in world.bots
    }
    await seen(
        world,
        lambda: all(len(swept(notes, name)) >= count + 2 for name, count in sweeps.items()),
        lambda: f"sweeps after the answer: {sweeps}",
    )
    later = past + timedelta(days=1)
    set_clock(clock, later)
    await everyone_swept(world, notes, later)
    return past


def problems_at_the_end(world: Instances, thread: str, timer: Timer) -> list[str]:
    """What the fakes and the store hold against one firing of ``timer`` (the module
    docstring lists it)."""
    bot = world.bots[0]
    problems = []
    if answers(world, thread) != 1:
        problems.append(f"the answer was posted {answers(world, thread)} times")
    twice = {said: k for said, k in Counter(posted(world.api, thread)).items() if k > 1}
    if twice:
        problems.append(f"posted more than once: {twice}")
    if len(world.model.requests) != 1:
        problems.append(f"{len(world.model.requests)} model requests, one wanted")
    stored = bot.query("select kind, state from pending_requests where id = ?", timer.request)
    if stored != [("wait", "expired")]:
        problems.append(f"the wait request is {stored}, not expired")
    ended = bot.query("select lifecycle from conversations where id = ?", timer.conversation)
    if ended != [("done",)]:
        problems.append(f"the conversation is {ended}, not done")
    entries = [
        (kind, _body(body))
        for kind, body in bot.query(
            "select kind, body from journal where conversation_id = ? order by seq",
            timer.conversation,
        )
    ]
    entered = [b["position"] for kind, b in entries if kind == "step_entered"]
    if entered.count("answer") != 1 or entered.count("pause") != 1:
        problems.append(f"states entered {entered}: the wait and its answer once each wanted")
    turns = [b for kind, b in entries if kind == "assistant_turn" and not b.get("workflow")]
    if len(turns) != 1:
        problems.append(f"{len(turns)} model turns in the journal, one wanted")
    return problems


@pytest.mark.timeout(600)
async def test_a_wait_of_an_hour_fires_once_after_a_sigkill_and_restart(
    tmp_path: Path, instances_database: str | None
) -> None:
    clock, notes, environ = setup(tmp_path, together=1)
    async with instances(
        tmp_path,
        answering,
        database=instances_database,
        count=1,
        launcher="tests.timer_bot",
        environ=environ,
    ) as world:
        (bot,) = world.bots
        began = now()
        thread = await approved(world)
        timer = await waiting(world, thread)
        assert began + HOUR <= timer.expires_at <= now() + HOUR  # the hour, on the real clock

        await restarted(world)
        early = timer.expires_at - timedelta(seconds=1)
        set_clock(clock, early)
        await everyone_swept(world, notes, early, times=2)
        assert timers(bot, thread) == [timer], "fired before its hour"
        assert (answers(world, thread), len(world.model.requests)) == (0, 0)
        assert due(notes, "instance-1") == []

        past = await past_the_hour(world, notes, clock, timer, thread)
        problems = problems_at_the_end(world, thread, timer)
        codes = await world.stop()

    found = due(notes, "instance-1")
    if {request for _at, request in found} != {timer.request} or found[0][0] < past:
        problems.append(f"found due {found}: the timer once, at {past} or later, wanted")
    if codes != [0]:
        problems.append(f"exit codes {codes}:\n{world.logs()}")
    assert not problems, "\n".join(problems)


@pytest.mark.timeout(600)
async def test_a_wait_fires_once_with_two_instances_past_its_hour(
    tmp_path: Path, instances_database: str | None
) -> None:
    clock, notes, environ = setup(tmp_path, together=2)
    async with instances(
        tmp_path,
        answering,
        database=instances_database,
        count=2,
        launcher="tests.timer_bot",
        environ=environ,
    ) as world:
        thread = await approved(world)
        timer = await waiting(world, thread)
        await restarted(world)
        past = await past_the_hour(world, notes, clock, timer, thread)
        problems = problems_at_the_end(world, thread, timer)
        codes = await world.stop()

    for name in ("instance-1", "instance-2"):  # both tried: the request's CAS let one through
        found = due(notes, name)
        if not found or {request for _at, request in found} != {timer.request}:
            problems.append(f"{name} found due {found}: the timer wanted")
        elif found[0][0] < past:
            problems.append(f"{name} found the timer due at {found[0][0]}, before {past}")
    if codes != [0, 0]:
        problems.append(f"exit codes {codes}:\n{world.logs()}")
    assert not problems, "\n".join(problems)
