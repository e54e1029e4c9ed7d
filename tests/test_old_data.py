"""What threadbot stored before requests and verdicts were typed still loads, and goes on.

``tests/fixtures/store_0005.json`` holds the rows that threadbot as it was before
issue 11 wrote (schema revision 0005), driven through its engine: one
conversation had its plan rejected, the change asked for in words, plan v2
approved, a tool approval decided call by call then all at once, a retry given in
words, and waits on an ``ask_user`` question (its record sitting ``running``);
another waits on its first plan (``propose_plan`` sitting ``pending_approval``).
Decisions were texts (``"approved call 2"``, ``"revise"``, ``"go on"``) and the
plan's "what should change?" was a ``question``. The database is built at 0005,
filled with those rows, upgraded as a start does, and read by today's code
(``conversations.store.legacy``); both conversations then go on.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from conversations.render import render_event
from conversations.store import migrate
from conversations.store.sql import SqlStore, create_engine
from core.context import ManualClock, RunContext
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.requests.closing import call_outcomes
from core.run.engine import Engine
from core.tools.base import Toolbox
from core.tools.command import RunCommand
from core.tools.control import control_tools
from core.tools.workspace import ListFiles
from core.vocabulary.entries import DecisionEntry
from core.vocabulary.inputs import Approve, ThreadMessage
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.people import Person
from core.vocabulary.requests import (
    PlanApproval,
    PlanRevision,
    Question,
    RequestState,
    RetryRequest,
    ToolApproval,
)
from core.vocabulary.run_events import CallOutcome
from core.vocabulary.tool_records import ToolState
from core.vocabulary.verdicts import Approved, Denied, Rejected, Revised

FIXTURE = Path(__file__).parent / "fixtures" / "store_0005.json"
ALICE = Person(id="U0ALICE001", name="alice")
BOB = Person(id="U0BOB00001", name="bob")


def old_rows() -> dict[str, list[dict[str, Any]]]:
    rows: dict[str, list[dict[str, Any]]] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return rows


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    """A database built at 0005, filled with the old rows, then upgraded to the newest."""
    db = tmp_path / "old.db"
    engine = create_engine(f"sqlite+aiosqlite:///{db}")
    await migrate.upgrade(engine, "0005")
    with sqlite3.connect(db) as conn:
        for table, rows in old_rows().items():
            for row in rows:
                values = {
                    k: json.dumps(v) if isinstance(v, dict | list) else v for k, v in row.items()
                }
                if table == "conversations":
                    values["workspace_dir"] = str(row["workspace_dir"]).format(
                        workspace=tmp_path / "workspaces"
                    )
                names, marks = ", ".join(values), ", ".join("?" for _ in values)
                insert = f"insert into {table} ({names}) values ({marks})"
                conn.execute(insert, list(values.values()))
    await migrate.upgrade(engine)
    store = SqlStore(engine=engine, render=render_event)
    yield store
    await store.close()


def conversation(n: int) -> str:
    return str(old_rows()["conversations"][n]["id"])


RECORDED = datetime(2026, 12, 1, 13, 30, tzinfo=UTC)
"""A moment just after the fixture's rows were written, before its requests expire."""


def engine_for(store: SqlStore, *turns: ScriptedTurn) -> Engine:
    """An engine over the upgraded store whose clock stands at :data:`RECORDED`: the
    fixture's requests expire a day after they were written, and a decision is judged
    by the engine's clock, never the day the test runs."""
    return Engine(
        journal=store.journal,
        model=ScriptedModel(list(turns)),
        toolbox=Toolbox([*control_tools(), RunCommand(), ListFiles()]),
        context=RunContext(clock=ManualClock(RECORDED)),
    )


async def test_old_requests_load_as_their_kinds_with_typed_verdicts(store: SqlStore) -> None:
    snap = await store.journal.load(conversation(0))

    assert [(type(r), r.state, r.verdict) for r in snap.requests] == [
        (PlanApproval, RequestState.SUPERSEDED, Rejected()),
        (PlanRevision, RequestState.DECIDED, Revised()),  # was a "question" with a plan
        (PlanApproval, RequestState.DECIDED, Approved()),
        (ToolApproval, RequestState.DECIDED, Denied()),  # "denied": the last decision
        (RetryRequest, RequestState.DECIDED, Approved()),  # "go on", in words
        (Question, RequestState.OPEN, None),
    ]
    assert [r.decided_by for r in snap.requests] == [BOB, ALICE, ALICE, BOB, ALICE, None]


async def test_old_decisions_load_as_verdicts_and_still_name_who_decided_each_call(
    store: SqlStore,
) -> None:
    snap = await store.journal.load(conversation(0))

    decisions = [r.entry for r in snap.journal if isinstance(r.entry, DecisionEntry)]
    assert [(d.verdict, d.call, d.by) for d in decisions] == [
        (Rejected(), None, BOB),
        (Approved(), None, ALICE),
        (Approved(), 2, ALICE),  # "approved call 2"
        (Denied(), None, BOB),  # "denied": every call still undecided
    ]
    (approval,) = [r for r in snap.requests if isinstance(r, ToolApproval)]
    assert call_outcomes(snap, approval) == (
        CallOutcome(number=1, outcome="denied", by_name="bob"),
        CallOutcome(number=2, outcome="allowed", by_name="alice"),
    )


async def test_a_question_asked_before_the_upgrade_is_answered_after_it(store: SqlStore) -> None:
    cid = conversation(0)
    before = await store.journal.load(cid)
    (asked,) = [r for r in before.tool_calls.values() if r.name == "ask_user"]
    assert (asked.state, asked.request_id) == (ToolState.APPROVED, None)  # was "running"

    engine = engine_for(store, ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "On main."})]))
    await engine.reply(cid, ThreadMessage(text="main", author=ALICE))

    snap = await store.journal.load(cid)
    assert snap.status.lifecycle is Lifecycle.DONE
    assert snap.tool_calls[asked.tool_use_id].state is ToolState.DONE
    question = next(r for r in snap.requests if isinstance(r, Question))
    assert question.state is RequestState.DECIDED
    results = [r.entry for r in snap.journal if r.entry.kind == "tool_result"]
    assert [r.content for r in results if r.tool_use_id == asked.tool_use_id] == [
        "alice answered: main"
    ]


async def test_a_plan_proposed_before_the_upgrade_is_approved_after_it(
    store: SqlStore, tmp_path: Path
) -> None:
    cid = conversation(1)
    before = await store.journal.load(cid)
    (plan,) = before.open_requests
    assert isinstance(plan, PlanApproval) and plan.plan_version == 1
    assert before.tool_calls[plan.tool_use_id].state is ToolState.APPROVED  # was pending_approval

    engine = engine_for(store, ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Done."})]))
    assert await engine.decide(cid, Approve(request_id=plan.id, by=BOB)) == "decided"
    await engine.run(cid)

    snap = await store.journal.load(cid)
    assert snap.status.lifecycle is Lifecycle.DONE
    assert snap.tool_calls[plan.tool_use_id].state is ToolState.DONE
    assert (snap.requests[0].state, snap.requests[0].verdict) == (RequestState.DECIDED, Approved())
    with sqlite3.connect(tmp_path / "old.db") as conn:
        stored = conn.execute(
            "select verdict, decision from pending_requests where id = ?", (plan.id,)
        ).fetchone()
    assert (json.loads(stored[0]), stored[1]) == ({"kind": "approved"}, None)
