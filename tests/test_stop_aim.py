"""A stop ends the run it was aimed at, never a later one (issue 31, "Stops and mentions").

Through the hub and the console adapter (:mod:`tests.harness`), on the in-memory store
and on the SQL stores the ``make_app`` fixture builds: a stop and a new message sent at
once, a stop request aimed at a run that ended before it was carried out (here, after
a restart), and a stop carried out after its run ended.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.app import App, build
from bot.settings import Settings
from conversations.stopping import ALREADY_ENDED
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.people import Person
from tests.conftest import wait_for
from tests.harness import Chat

ALICE = Person(id="console:alice", name="alice")


def plan(*steps: str) -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": list(steps) or ["Look"]})])


def finish(answer: str) -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("finish", {"answer": answer})])


def question(text: str) -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("ask_user", {"question": text})])


async def test_a_stop_and_a_new_message_sent_at_once_stop_the_run_and_start_the_next(
    make_app,
) -> None:
    working = ScriptedTurn(gate=asyncio.Event(), calls=[ScriptedCall("list_files", {})])
    app = await make_app(ScriptedModel([plan(), working, plan("Do it"), finish("Fresh start.")]))
    chat = Chat(app)
    await app.start()
    await chat.mention("look around")
    await chat.react(chat.bot_message("📋 Plan (v1)"))
    await asyncio.wait_for(working.started.wait(), 60)  # run A works, held in its model call

    # the stop first; the new message reaches the hub while the stop is on its way to
    # the run (before its job is cancelled), and again once the run's job is cancelled
    queue = app.hub.stopper._queue
    queue_stop, engine_stop = queue.stop, app.engine.stop

    async def stop_with_a_message_behind(conversation_id):
        await chat.reply("do this instead", settle=False)
        return await queue_stop(conversation_id)

    async def commit_with_another_message_behind(*args, **kwargs):
        await chat.reply("and this too", settle=False)
        return await engine_stop(*args, **kwargs)

    queue.stop, app.engine.stop = stop_with_a_message_behind, commit_with_another_message_behind
    await chat.stop()
    await app.hub.settled()

    said = chat.said()
    assert "⏹ Stopped by alice." in said, said
    stop_at = said.index("⏹ Stopped by alice.")
    assert [line.split(" —")[0] for line in said[stop_at + 1 :]] == ["📋 Plan (v2)"], said
    snap = await chat.snapshot()
    assert snap.status.lifecycle is Lifecycle.WAITING  # run B waits for its plan's approval
    texts = [r.entry for r in snap.journal if r.entry.kind == "user_text"]
    assert [(t.text, t.role) for t in texts][-2:] == [
        ("do this instead", "request"),
        ("and this too", "note"),
    ]

    await chat.react(chat.bot_message("📋 Plan (v2)"))
    await app.hub.settled()
    assert chat.said()[-1].startswith("✅ Fresh start."), chat.said()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_settings(request: pytest.FixtureRequest, settings: Settings, tmp_path: Path) -> Settings:
    """The test's settings on a SQLite file or this test's PostgreSQL database, the
    stop requests looked for only when a test asks (``wakeup_poll``: an hour)."""
    if request.param == "sqlite":
        settings.database_url = f"sqlite+aiosqlite:///{tmp_path / 'threadbot.db'}"
    else:
        settings.database_url = request.getfixturevalue("postgres_url")
    settings.wakeup_poll = 3600
    return settings


async def built(settings: Settings, model: ScriptedModel, instance: str = "") -> App:
    """An app on ``settings``' store, named ``instance`` (empty: this process, as a
    restarted bot is; another name is another instance, as on another host)."""
    return await build(settings.model_copy(update={"instance": instance}), model=model)


async def test_a_stop_request_for_a_run_that_ended_leaves_the_next_run_alone_across_a_restart(
    store_settings: Settings,
) -> None:
    first = await built(
        store_settings,
        ScriptedModel([question("Which one?"), finish("Blue."), question("Red?")]),
    )
    chat = Chat(first)
    await first.start()
    await chat.mention("pick one")
    cid = (await chat.snapshot()).id
    run_a = (await chat.snapshot()).run
    assert run_a > 0
    async with first.hub.leases.held(cid) as lease:  # an instance that held A was asked
        assert lease is not None
        assert await first.store.stops.request_stop(
            cid, holder=lease.owner, epoch=lease.epoch, by=ALICE, run=run_a, means="button"
        )
    [asked] = await first.store.stops.stop_requests({cid}, orphans=True)
    assert asked.run == run_a
    await chat.reply("the blue one")  # A goes on and ends before the request is seen
    assert chat.said()[-1].startswith("✅ Blue."), chat.said()
    await chat.reply("now the red one")  # run B begins after the stop
    run_b = (await chat.snapshot()).run
    assert run_b > run_a and (await chat.snapshot()).status.lifecycle is Lifecycle.WAITING
    await first.close()

    second = await built(store_settings, ScriptedModel([finish("Red it is.")]))
    try:
        again = Chat(second)
        again.thread = chat.thread
        await second.start()
        assert await second.hub.stopper.poll_once(orphans=True) == 1  # the request, restarted
        await second.hub.settled()
        await wait_for(lambda: again.said())
        assert again.said() == [ALREADY_ENDED]
        entries = await second.store.audit.entries(conversation_id=cid)
        [refused] = [e for e in entries if e.request_kind == "stop"]  # the answers are there too
        assert (refused.user_id, refused.means, refused.outcome, refused.reason) == (
            ALICE.id,
            "button",  # as the stop came, kept in its request across the restart
            "refused",
            "the run had already ended",
        )
        assert await second.store.stops.stop_requests({cid}, orphans=True) == []
        snap = await again.snapshot()
        assert (snap.run, snap.status.lifecycle) == (run_b, Lifecycle.WAITING)  # B goes on
        assert not [r for r in snap.journal if r.seq > run_b and r.entry.kind == "stop"]

        await again.reply("the dark red")
        assert again.said()[-1].startswith("✅ Red it is."), again.said()
    finally:
        await second.close()


async def test_a_stop_sent_to_another_instance_ends_its_run_not_the_one_after_it(
    store_settings: Settings,
) -> None:
    """Two instances on one store: B takes the stop of run A, which the first instance
    holds; A ends before the holder carries the request out, and run B, begun after
    the stop on the holder, goes on."""
    a_works = ScriptedTurn(gate=asyncio.Event(), calls=[ScriptedCall("list_files", {})])
    b_works = ScriptedTurn(gate=asyncio.Event(), calls=[ScriptedCall("list_files", {})])
    holder = await built(
        store_settings,
        ScriptedModel([plan(), a_works, finish("A done."), b_works, finish("B done.")]),
        "holder",
    )
    other = await built(store_settings, ScriptedModel([]), "other")
    try:
        chat, elsewhere = Chat(holder), Chat(other)
        await holder.start()
        await other.start()
        holder_poll = holder.hub.stopper.poll_once
        holder.hub.stopper.poll_once = _later  # the holder looks only when the test says
        await chat.mention("look around")
        await chat.react(chat.bot_message("📋 Plan (v1)"))
        await asyncio.wait_for(a_works.started.wait(), 60)
        cid = (await chat.snapshot()).id
        run_a = (await chat.snapshot()).run
        elsewhere.thread = chat.thread

        await elsewhere.stop()  # to the instance that does not hold A
        [asked] = await other.store.stops.stop_requests({cid})
        assert asked.run == run_a

        a_works.gate.set()  # A ends on its own before the holder saw the request
        await holder.hub.settled()
        assert chat.said()[-1].startswith("✅ A done."), chat.said()
        await chat.reply("and now list them again", settle=False)  # run B, after the stop
        await asyncio.wait_for(b_works.started.wait(), 60)
        run_b = (await chat.snapshot()).run
        assert run_b > run_a

        assert await other.hub.stopper.poll_once() == 1  # followed up: B's holder is live
        holder.hub.stopper.poll_once = holder_poll
        assert await holder.hub.stopper.poll_once() == 1
        assert await other.store.stops.stop_requests({cid}, orphans=True) == []
        assert await other.hub.stopper.poll_once() == 0  # nothing left to follow up
        b_works.gate.set()
        await holder.hub.settled()
        await other.hub.settled()

        snap = await chat.snapshot()
        assert (snap.run, snap.status.lifecycle) == (run_b, Lifecycle.DONE)
        assert [r.entry.kind for r in snap.journal].count("stop") == 0
        said = chat.said() + elsewhere.said()
        assert said.count(ALREADY_ENDED) == 1, said
        assert not any("Stopped by" in line for line in said), said
        assert chat.said()[-1].startswith("✅ B done."), said
    finally:
        await holder.close()
        await other.close()


async def _later(*, orphans: bool = False) -> int:
    return 0


async def test_of_two_stop_requests_the_one_aimed_at_the_run_going_on_is_carried_out(
    make_app,
) -> None:
    app = await make_app(ScriptedModel([finish("Looked."), question("Which one?")]))
    chat = Chat(app)
    await app.start()
    await chat.mention("look around")
    run_a = (await chat.snapshot()).run
    await chat.reply("and pick one")  # run B waits for an answer
    snap = await chat.snapshot()
    run_b, cid = snap.run, snap.id
    assert run_b > run_a and snap.status.lifecycle is Lifecycle.WAITING

    async with app.hub.leases.held(cid) as lease:  # this instance holds B
        assert lease is not None
        for run in (run_a, run_b):  # a late one for A, then one for B
            assert await app.store.stops.request_stop(
                cid, holder=lease.owner, epoch=lease.epoch, by=ALICE, run=run
            )
        assert await app.hub.stopper.poll_once() == 1
    await app.hub.settled()

    assert (await chat.snapshot()).status.lifecycle is Lifecycle.CANCELLED
    assert await app.store.stops.stop_requests({cid}, orphans=True) == []
    said = chat.said()
    assert said[-1] == "⏹ Stopped by alice." and ALREADY_ENDED not in said, said
