"""A limit holds across two bot processes and across a restart (issue 30, "Limits and priorities").

Two real ``threadbot run`` processes on one store (:mod:`tests.instances`) with
``cluster_max_runs = 1`` and the queued message posted at the first look
(``queued_after = 0``). Job 1 is opened and approved on the first process, A, whose
run then holds the cluster's one slot while its command waits for the test; job 2 is
mentioned on the second, B: its run waits for the slot in the store and says so in
its thread, and the model hears nothing of it. B is then killed (SIGKILL) and started
again under its name: the row of its earlier life is dropped at its start (a name never
looks gone; left, it would hold the slot until it lapsed, ``lease_ttl`` here ten
minutes), and the mention it had taken asks again and waits, behind A's run, for the
same one slot. Once A's command is let go and its run ends, B's run starts (told on
PostgreSQL by the slot's notification alone: the poll is an hour; on SQLite by the
poll) and says it started after waiting, on the one queued message its thread has: the
one B posted before it was killed (docs/architecture.md, "Limits and priorities").
"""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from tests.instances import (
    STARTED,
    Instances,
    database_url,
    gated,
    instances,
    job_number,
    posted,
    release,
    requests_of,
    side_effects,
    story_model,
)
from tests.process_harness import eventually

WAKEUPS = {"postgresql": "3600", "sqlite": "1"}
"""``THREADBOT_WAKEUP_POLL`` per backend: an hour on PostgreSQL (only a notification is
fast), a second on SQLite (the fallback carries it)."""
QUEUED = "⏳ Queued: 1 run ahead of this one."


@pytest.fixture(params=list(WAKEUPS), ids=["postgresql-notified", "sqlite-polled"])
def backend(request: pytest.FixtureRequest) -> tuple[str | None, str]:
    """The store both processes share (None: a SQLite file in ``tmp_path``) and its
    ``THREADBOT_WAKEUP_POLL``."""
    return database_url(request, request.param), WAKEUPS[request.param]


def run_slots(world: Instances) -> set[tuple[str, str, str]]:
    """The run slots in the store: (conversation's thread, holder, state)."""
    rows = world.bots[0].query(
        "select c.thread, s.holder, s.state from slots s"
        " join conversations c on c.id = s.conversation_id where s.category = 'run'"
    )
    return {(str(thread), str(holder), str(state)) for thread, holder, state in rows}


def positions(world: Instances, n: int) -> list[int]:
    """The positions, among every model request in the order they came, of job ``n``'s."""
    return [i for i, r in enumerate(world.model.requests) if job_number(r.body) == n]


async def test_the_cluster_limit_holds_across_two_processes_and_a_restart(
    tmp_path: Path, backend: tuple[str | None, str]
) -> None:
    database, poll = backend
    model = story_model(lambda n: gated(n, f"0.2{secrets.randbelow(10**6):06d}"))
    settings = {
        "wakeup_poll": poll,
        "cluster_max_runs": "1",
        "queued_after": "0",
        "queued_edit_every": "0",
        "lease_ttl": "600",  # a row left by B's earlier life would hold the slot 10 min
    }
    async with instances(tmp_path, model, database=database, **settings) as world:
        a, b = world.bots
        first = await world.channel.mention_and_approve(a, "job 1")
        await eventually(lambda: "1" in side_effects(world.workspaces, STARTED))
        assert run_slots(world) == {(first, "instance-1", "held")}

        second = await world.channel.mention(b, "job 2")  # to B: the cluster is full
        await eventually(lambda: QUEUED in posted(world.api, second))
        await eventually(lambda: (second, "instance-2", "waiting") in run_slots(world))
        assert run_slots(world) == {
            (first, "instance-1", "held"),
            (second, "instance-2", "waiting"),
        }
        assert requests_of(world.model, 2) == []

        mine = "select enqueued_at from slots where holder = 'instance-2'"
        [(asked,)] = a.query(mine)
        await b.kill()  # B dies with job 2 waiting, and comes back under its name
        await b.start()
        # the row of B's earlier life is dropped at its start; the mention asks again
        await eventually(lambda: a.query(mine) not in ([], [(asked,)]))
        assert run_slots(world) == {
            (first, "instance-1", "held"),
            (second, "instance-2", "waiting"),
        }
        assert requests_of(world.model, 2) == []  # still waiting: the limit held

        release(world.workspaces)  # A's command ends, then its run: the slot is free
        await eventually(lambda: world.channel.post_with(second, "Plan (v1)"))
        said = world.channel.texts(second)
        told = [t for t in said if t.startswith(("⏳", "▶️"))]
        # one message, posted in B's first life and edited in its second
        assert len(told) == 1 and told[0].startswith("▶️ Started after waiting "), said
        assert min(positions(world, 2)) > max(positions(world, 1))  # B's run began after A's
        assert side_effects(world.workspaces)["1"] == 1
        await eventually(lambda: run_slots(world) == set())  # both wait for a person now
        codes = await world.stop()
    assert codes == [0, 0], world.logs()
