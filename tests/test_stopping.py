"""Stops that reach a run held elsewhere, and stop requests left by a holder that died."""

from __future__ import annotations

import asyncio

from core.lifecycle import Lifecycle
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from tests.harness import Chat

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
