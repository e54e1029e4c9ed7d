"""One of two instances killed while 50 conversations run: the other finishes them (issue 26).

The acceptance of issue 26's takeover: two real ``threadbot run`` processes on one
store (PostgreSQL; a SQLite file), a short run lease (``THREADBOT_LEASE_TTL=2``),
behind the round-robin proxy (:mod:`tests.instances`). 50 conversations are told up
to their approval; each one's command (:func:`tests.instances.gated`) notes that it
started and waits for a file the test creates, so all 50 run at once. Once both
instances hold some (``conversations.lease_owner``), one is SIGKILLed (its commands
die with it: bubblewrap's ``--die-with-parent``), and then every command is let go.

The survivor, never restarted, must take the dead one's conversations over while it
runs (their leases lapse) and finish every one: what the fakes and the store hold
at the end shows every answer posted once, no command started twice (a call that
was running in the dead instance is ``unknown``: never run again), every side
effect of the survivor's own commands once and none of the killed ones; its
``/metrics`` counts each run it took over from a lapsed lease (issue 27; a run of a
process of this host that is gone may also be taken at once on the way, uncounted).
"""

from __future__ import annotations

import asyncio
import secrets
import signal
from pathlib import Path

import aiohttp
import pytest

from tests.instances import (
    STARTED,
    Instances,
    doubles,
    finished,
    gated,
    holders,
    instances,
    is_answer,
    live_markers,
    missing,
    opened,
    per_job,
    posted,
    release,
    said_twice,
    settled,
    side_effects,
    story_model,
    until,
)
from tests.process_harness import WAIT, BotProcess, scrape

JOBS = 50
AT_ONCE = 25
"""Conversations opened at once (a mention and an approval each)."""


def answered(world: Instances, n: int) -> int:
    """How many answers job ``n``'s thread got."""
    return sum(is_answer(t, n) for t in posted(world.api, world.threads[n]))


def held_now(world: Instances, bot: BotProcess) -> dict[int, str]:
    """The jobs whose run lease someone holds now, and who."""
    return {n: owner for n, owner in sorted(holders(world, bot).items()) if owner}


@pytest.mark.timeout(1800)  # a stall fails it much sooner, saying what is missing
async def test_the_instance_left_finishes_every_run_of_the_killed_one_while_it_runs(
    tmp_path: Path, instances_database: str | None
) -> None:
    numbers = range(1, JOBS + 1)
    suffix = f"{secrets.randbelow(10**6):06d}"  # this test's commands alone sleep so long

    def marker(n: int) -> str:
        return f"0.3{n:03d}{suffix}"

    model = story_model(lambda n: gated(n, marker(n)))
    async with instances(tmp_path, model, database=instances_database, lease_ttl="2") as world:
        victim, survivor = world.bots
        names = [bot.env["THREADBOT_INSTANCE"] for bot in world.bots]
        await finished(
            world,
            (opened(world, n) for n in numbers),
            lambda: missing(world, numbers),
            at_once=AT_ONCE,
        )

        def all_running() -> bool:
            started = side_effects(world.workspaces, STARTED)
            held = set(holders(world, survivor).values())
            return all(str(n) in started for n in numbers) and set(names) <= held

        await finished(
            world,
            [until(all_running)],
            lambda: (
                f"commands started for jobs {sorted(side_effects(world.workspaces, STARTED))}; "
                f"leases held {held_now(world, survivor)}"
            ),
            at_once=1,
        )
        held = holders(world, survivor)
        killed = sorted(n for n, owner in held.items() if owner == names[0])
        kept = sorted(n for n, owner in held.items() if owner == names[1])
        assert sorted(killed + kept) == list(numbers), held

        victim.signal(signal.SIGKILL)
        assert await victim.wait() == -signal.SIGKILL
        async with asyncio.timeout(WAIT):  # the killed instance's commands die with it
            await until(lambda: not live_markers(marker(n) for n in killed))
        await asyncio.to_thread(release, world.workspaces)

        await finished(
            world,
            [until(lambda: all(answered(world, n) for n in numbers))],
            lambda: (
                f"{missing(world, numbers)} (the killed {names[0]} held jobs {killed}; "
                f"leases held now {held_now(world, survivor)})"
            ),
            at_once=1,
        )
        pending = await settled(world, survivor)
        states = per_job(
            world,
            survivor,
            "select c.thread, t.state from tool_calls t join conversations c"
            " on c.id = t.conversation_id where t.name = 'run_command'",
        )
        results = per_job(
            world,
            survivor,
            "select c.thread, count(*) from journal j join conversations c"
            " on c.id = j.conversation_id where j.kind = 'tool_result'"
            " and cast(j.body as text) like '%toolu_job_%' group by c.thread",
        )
        ended = per_job(world, survivor, "select thread, lifecycle from conversations")
        async with aiohttp.ClientSession() as http:
            counted = await scrape(http, survivor.ops_url)
        codes = await world.stop()

    problems = []
    found = doubles(world.api, world.threads)
    if found:
        problems.append(said_twice(found, JOBS))
    twice = {n: k for n in numbers if (k := answered(world, n)) != 1}
    if twice:
        problems.append(f"answers per job, where not one: {twice}")
    started = side_effects(world.workspaces, STARTED)
    if any(started[str(n)] != 1 for n in numbers):
        problems.append(f"commands started per job, where not once: {dict(started)}")
    effects = side_effects(world.workspaces)
    expected = {str(n): 1 for n in kept}  # the killed instance's commands died before the go
    if dict(effects) != expected:
        problems.append(f"side effects {dict(effects)}, expected once for jobs {kept} only")
    want_states = {n: "unknown" if n in killed else "done" for n in numbers}
    if states != want_states:
        wrong = {n: s for n, s in states.items() if want_states.get(n) != s}
        problems.append(f"run_command states where not as expected: {wrong}")
    if results != {n: 1 for n in numbers}:
        problems.append(f"job tool results per job: {results}")
    if set(ended.values()) != {"done"}:
        problems.append(f"lifecycles: {ended}")
    if pending:
        problems.append(f"outbox rows still pending (conversation, purpose): {pending}")
    takeovers = counted[("threadbot_lease_takeovers_total", ())]
    taken = survivor.log.count("taking over conversation ")  # Hub.take_over says each
    if not 0 < takeovers == taken <= JOBS:
        problems.append(f"/metrics counts {takeovers} takeovers; the survivor took {taken}")
    if counted[("threadbot_outbox_depth", ())] != 0:
        problems.append(f"/metrics says {counted[('threadbot_outbox_depth', ())]} rows pending")
    if codes != [-signal.SIGKILL, 0]:
        problems.append(f"exit codes {codes}:\n{world.logs()}")
    assert not problems, "\n".join(problems)
