"""Stops that reach a run held elsewhere, and stop requests left by a holder that died."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from conversations.stopping import NOTHING_RUNNING, STOPPING
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.people import Person
from tests.harness import Chat
from tests.pids import gone_holder

QUESTION = ScriptedTurn(calls=[ScriptedCall("ask_user", {"question": "Which one?"})])


async def test_a_stop_request_left_by_a_dead_holder_is_carried_out_here(make_app) -> None:
    app = await make_app(ScriptedModel([QUESTION]))
    chat = Chat(app)
    await app.start()
    await chat.mention("pick one")
    cid = (await chat.snapshot()).id
    ghost = await app.store.leases.acquire_lease(cid, "elsewhere:1", ttl=0.2)
    assert ghost is not None
    await chat.stop(by="alice")  # another instance holds the run: a request is written
    assert (await chat.snapshot()).status.lifecycle is Lifecycle.WAITING
    assert len(await app.store.stops.stop_requests({cid})) == 1

    await asyncio.sleep(0.3)  # that instance died; its lease lapses
    assert await app.hub.stopper.poll_once(orphans=True) == 1

    assert (await chat.snapshot()).status.lifecycle is Lifecycle.CANCELLED
    assert await app.store.stops.stop_requests({cid}, orphans=True) == []
    await app.hub.settled()
    assert sum("Stopped by alice" in line for line in chat.said()) == 1
    [stopped] = await app.store.audit.entries()  # once, by the instance that carried it out
    assert (stopped.user_id, stopped.means, stopped.outcome) == (
        "console:alice",
        "command",
        "stopped",
    )


async def test_a_stop_with_nobody_holding_the_run_takes_the_lease_and_stops_here(
    make_app,
) -> None:
    app = await make_app(ScriptedModel([QUESTION]))
    chat = Chat(app)
    await app.start()
    await chat.mention("pick one")
    cid = (await chat.snapshot()).id
    before = await app.store.leases.lease_state(cid)
    assert before is not None and before.owner is None

    await chat.stop(by="alice")

    after = await app.store.leases.lease_state(cid)
    assert after is not None and after.owner is None and after.epoch == before.epoch + 1
    assert (await chat.snapshot()).status.lifecycle is Lifecycle.CANCELLED


async def test_a_stop_for_a_holder_gone_from_this_host_stops_at_once(make_app) -> None:
    app = await make_app(ScriptedModel([QUESTION]))
    chat = Chat(app)
    await app.start()
    await chat.mention("pick one")
    cid = (await chat.snapshot()).id
    held = await app.store.leases.acquire_lease(cid, gone_holder(), ttl=600)  # killed holding it
    assert held is not None

    await chat.stop(by="alice")

    assert (await chat.snapshot()).status.lifecycle is Lifecycle.CANCELLED
    after = await app.store.leases.lease_state(cid)
    assert after is not None and after.owner is None and after.epoch == held.epoch + 1
    assert await app.store.stops.stop_requests({cid}, orphans=True) == []
    await app.hub.settled()
    stopped = [line for line in chat.said() if "Stopped" in line or "Stopping" in line]
    assert stopped.count("⏹ Stopped by alice.") == 1 and STOPPING not in stopped  # done at once


async def test_a_stop_for_a_holder_on_another_host_is_told_at_once_and_done_when_it_lapses(
    make_app,
) -> None:
    app = await make_app(ScriptedModel([QUESTION]))
    chat = Chat(app)
    await app.start()
    await chat.mention("pick one")
    cid = (await chat.snapshot()).id
    ghost = await app.store.leases.acquire_lease(cid, "elsewhere:1", ttl=600)
    assert ghost is not None

    await chat.stop(by="alice")
    await app.hub.settled()

    assert chat.said()[-1] == STOPPING
    assert await app.hub.stopper.poll_once() == 1  # followed up: the holder's lease is live
    assert (await chat.snapshot()).status.lifecycle is Lifecycle.WAITING
    assert len(await app.store.stops.stop_requests({cid})) == 1

    lapsed = datetime.now(UTC) - timedelta(seconds=600)  # that host died; its lease lapsed
    assert await app.store.leases.renew_leases([ghost], ttl=1, now=lapsed) == {cid}
    assert await app.hub.stopper.poll_once() == 1  # no wait for the orphans' round

    assert (await chat.snapshot()).status.lifecycle is Lifecycle.CANCELLED
    assert await app.store.stops.stop_requests({cid}, orphans=True) == []
    assert await app.hub.stopper.poll_once() == 0  # nothing left to follow up
    await app.hub.settled()
    said = chat.said()
    assert said[-2:] == [STOPPING, "⏹ Stopped by alice."], said


async def test_two_polls_at_once_carry_a_stop_out_once_and_say_nothing_more(make_app) -> None:
    app = await make_app(ScriptedModel([QUESTION]))
    chat = Chat(app)
    await app.start()
    await chat.mention("pick one")
    cid = (await chat.snapshot()).id
    alice = Person(id="alice", name="alice")

    async with app.hub.leases.held(cid) as lease:  # this instance holds the run
        assert await app.store.stops.request_stop(
            cid, holder=lease.owner, epoch=lease.epoch, by=alice
        )
        # the poll of its timer and the one a wake-up starts, at once
        await asyncio.gather(app.hub.stopper.poll_once(), app.hub.stopper.poll_once())
    await app.hub.settled()

    assert (await chat.snapshot()).status.lifecycle is Lifecycle.CANCELLED
    said = chat.said()
    assert sum("Stopped by alice" in line for line in said) == 1, said
    assert NOTHING_RUNNING not in said, said
