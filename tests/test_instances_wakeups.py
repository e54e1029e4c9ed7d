"""A stop or a reply that reaches the instance not holding the run reaches the run (issue 26).

The acceptance of issue 26's wake-ups, with two real ``threadbot run`` processes on
one store (:mod:`tests.instances`); the conversation is opened and approved on the
first process, A, so A holds its run, and the test then speaks to the second, B,
directly (not through the proxy):

- a ``/stop`` sent to B stops the command running under A (its processes are gone)
  and the thread says it stopped, once. On PostgreSQL the fallback poll of the store
  (``THREADBOT_WAKEUP_POLL``) is an hour, so only the notification can have carried
  the stop: it must be done within :data:`tests.process_harness.WAIT` (two minutes,
  however slow the machine), well before the hour. On SQLite the fallback, every
  second, carries it.
- a reply sent to B while A's command runs reaches A's run at its next turn: the
  model's first request after the command's result holds the reply's text (the
  run still going), not a later request after the run ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from pathlib import Path
from typing import Any

import pytest

from tests.instances import (
    STARTED,
    Instances,
    database_url,
    gated,
    holders,
    instances,
    is_answer,
    posted,
    release,
    reply,
    requests_of,
    side_effects,
    story_model,
    until,
)
from tests.process_harness import WAIT, eventually, live_with, sleep_marker
from tests.slack_harness import ALICE

WAKEUPS = {"postgresql": "3600", "sqlite": "1"}
"""``THREADBOT_WAKEUP_POLL`` per backend: an hour on PostgreSQL (only a notification is
fast), a second on SQLite (the fallback carries it)."""
STOPPED = f"⏹ Stopped by <@{ALICE}>. 1 tool call interrupted while running."


@pytest.fixture(params=list(WAKEUPS), ids=["postgresql-notified", "sqlite-polled"])
def backend(request: pytest.FixtureRequest) -> tuple[str | None, str]:
    """The store both processes share (None: a SQLite file in ``tmp_path``) and its
    ``THREADBOT_WAKEUP_POLL``."""
    return database_url(request, request.param), WAKEUPS[request.param]


async def held_by_the_first(world: Instances, n: int = 1) -> str:
    """Alice opens job ``n`` and approves its plan on the first process (A), which then
    runs it; waits until its command started under A; the thread's ts."""
    runner = world.bots[0]
    thread = await world.channel.mention(runner, f"job {n}")
    world.threads[n] = thread
    await eventually(lambda: world.channel.post_with(thread, "Plan (v1)"))
    plan = world.channel.post_with(thread, "Plan (v1)")
    assert plan is not None
    await world.channel.react(runner, str(plan["ts"]))
    command = "select process_group from tool_calls where tool_use_id = ?"
    await eventually(lambda: runner.query(command, f"toolu_job_{n}") not in ([], [(None,)]))
    assert holders(world, runner) == {n: runner.env["THREADBOT_INSTANCE"]}
    return thread


async def test_a_stop_sent_to_the_other_instance_stops_the_command_at_once(
    tmp_path: Path, backend: tuple[str | None, str]
) -> None:
    database, poll = backend
    marker = sleep_marker(600)  # this test's command alone sleeps so long
    model = story_model(lambda n: f"sleep {marker}")
    async with instances(tmp_path, model, database=database, wakeup_poll=poll) as world:
        runner, other = world.bots
        thread = await held_by_the_first(world)
        assert live_with(marker)

        await world.channel.slash(other, "/stop")  # B, which does not hold the run

        async with asyncio.timeout(WAIT):  # within two minutes: an hour's poll cannot
            await until(lambda: STOPPED in posted(world.api, thread) and not live_with(marker))
        state = runner.query("select state from tool_calls where tool_use_id = 'toolu_job_1'")
        ended = runner.query("select lifecycle from conversations")
        codes = await world.stop()

    assert state == [("interrupted",)]
    assert ended == [("cancelled",)]
    said = posted(world.api, thread)
    assert said.count(STOPPED) == 1, said
    # told at once by B, before the holder's "Stopped"; nothing more after it
    assert said[said.index(STOPPED) - 1 :] == ["⏹ Stopping…", STOPPED], said
    assert codes == [0, 0], world.logs()


def carries(request: dict[str, Any], said: str) -> bool:
    """Whether a model request's messages hold ``said``."""
    return said in json.dumps(request.get("messages", []), ensure_ascii=False)


def answers_the_job(request: dict[str, Any], n: int = 1) -> bool:
    """Whether a model request's last message holds job ``n``'s command result."""
    last = request["messages"][-1]
    blocks = last["content"] if isinstance(last["content"], list) else []
    return any(b.get("tool_use_id") == f"toolu_job_{n}" for b in blocks)


async def test_a_reply_sent_to_the_other_instance_reaches_the_run_at_its_next_turn(
    tmp_path: Path, backend: tuple[str | None, str]
) -> None:
    database, poll = backend
    model = story_model(lambda n: gated(n, f"0.2{secrets.randbelow(10**6):06d}"))
    said = f"Please also clear the cache ({secrets.token_hex(4)})"
    settings = {"wakeup_poll": poll, "log_level": "INFO"}
    async with instances(tmp_path, model, database=database, **settings) as world:
        runner, other = world.bots
        thread = await held_by_the_first(world)
        await eventually(lambda: "1" in side_effects(world.workspaces, STARTED))

        ts = await reply(world, other, thread, said)  # to B, which does not hold the run
        delivered = "select count(*) from deliveries where key like ?"
        await eventually(lambda: other.query(delivered, f"%{ts}") == [(1,)])  # B took it
        # A has it (told by B on PostgreSQL, by its own poll on SQLite): it says so
        await eventually(lambda: f"{ts}, taken by another instance, goes here" in runner.log)
        await asyncio.to_thread(release, world.workspaces)

        await eventually(lambda: any(answers_the_job(r) for r in requests_of(world.model, 1)))
        # Wait for the answer, and for the reply wherever it went, to say where it was.
        await eventually(lambda: any(is_answer(t, 1) for t in posted(world.api, thread)))
        with contextlib.suppress(TimeoutError):
            await eventually(
                lambda: any(carries(r, said) for r in requests_of(world.model, 1)), seconds=WAIT
            )
        codes = await world.stop()

    requests = requests_of(world.model, 1)
    after = next(i for i, r in enumerate(requests) if answers_the_job(r))
    carried = [i for i, r in enumerate(requests) if carries(r, said)]
    reached = carries(requests[after], said)
    assert reached, (
        f"the model's turn after the command (request {after} of job 1) lacks the reply; "
        f"requests holding it: {carried or 'none'} (the run ended at its answer first)"
    )
    assert codes == [0, 0], world.logs()
