"""Decision code takes the time and new ids from the run context that a test sets (issue 11).

The engine opens requests with ids from the context's id source and times from
its clock, and decides whether a request has expired by that clock too, never by
the wall clock: a test that sets both gets the same requests every time.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conversations.events import PlatformRef
from conversations.render import render_event
from conversations.store.memory import MemoryStore
from core.context import CountingIds, ManualClock, RunContext
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.run.engine import Engine
from core.run.settings import EngineSettings
from core.tools.base import Toolbox
from core.tools.control import control_tools
from core.vocabulary.inputs import Approve, DecideOutcome, ThreadMessage
from core.vocabulary.people import Person
from core.vocabulary.requests import PlanApproval, Question, RequestState
from core.workflows import default_workflow

ALICE = Person(id="U0ALICE001", name="alice")
START = datetime(2030, 5, 17, 9, 30, tzinfo=UTC)
TTL = 3600.0


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore(render=render_event)


async def mention(store: MemoryStore, engine: Engine, text: str) -> str:
    cid = await store.threads.open_conversation(
        delivery_key=f"m-{text}",
        binding=PlatformRef(platform="console", channel="console", thread=f"m-{text}"),
        requester=ALICE,
        workspace_root=Path("unused"),
        position=default_workflow().start,
    )
    assert cid is not None
    await engine.start(cid, ThreadMessage(text=text, author=ALICE))
    return cid


def engine_for(store: MemoryStore, clock: ManualClock, *turns: ScriptedTurn) -> Engine:
    return Engine(
        journal=store.journal,
        model=ScriptedModel(list(turns)),
        toolbox=Toolbox(control_tools()),
        settings=EngineSettings(request_ttl=TTL),
        context=RunContext(clock=clock, ids=CountingIds("req")),
    )


def plan(*steps: str) -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": list(steps)})])


async def test_requests_take_their_ids_and_times_from_the_run_context(store: MemoryStore) -> None:
    clock = ManualClock(START)
    question = ScriptedTurn(calls=[ScriptedCall("ask_user", {"question": "Which branch?"})])
    engine = engine_for(store, clock, plan("Look around"), question)

    cid = await mention(store, engine, "look around")
    clock.advance(60)
    assert await engine.decide(cid, Approve(request_id="req1", by=ALICE)) is DecideOutcome.DECIDED
    await engine.run(cid)

    snap = await store.journal.load(cid)
    opened = START + timedelta(seconds=60)
    assert [(type(r), r.id, r.expires_at, r.remind_at) for r in snap.requests] == [
        (PlanApproval, "req1", START + timedelta(hours=1), START + timedelta(minutes=30)),
        (Question, "req2", opened + timedelta(hours=1), opened + timedelta(minutes=30)),
    ]


async def test_a_decision_after_the_context_clock_passed_expiry_finds_the_request_expired(
    store: MemoryStore,
) -> None:
    clock = ManualClock(START)
    engine = engine_for(store, clock, plan("Look around"))
    cid = await mention(store, engine, "look around")

    clock.advance(TTL)  # the sweeper has not come by; the engine's clock decides
    outcome = await engine.decide(cid, Approve(request_id="req1", by=ALICE))

    assert outcome is DecideOutcome.EXPIRED
    snap = await store.journal.load(cid)
    assert snap.requests[0].state is RequestState.OPEN  # nothing written: the caller queues
    assert await engine.expire(cid, "req1")  # the expiry, in the conversation's turn
    snap = await store.journal.load(cid)
    assert snap.requests[0].state is RequestState.EXPIRED
