"""Rows handed over by the commits that wrote them: sent without reading the store.

A commit hands its outbox rows to the deliverer (``store.on_outbox``): the
deliverer sends them and settles each with one write, reading nothing, in both
progress modes and for a request's closing edit (its message id is the one the
deliverer kept). The store stays the fallback: a row written while the deliverer
was down goes out at its start, before the rows written after it in the same
conversation, and a row another process wrote is found by the poll.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from bench._trace import Statement, StatementTrace
from conversations.events import PlatformRef, PostReply, UpdateMessage
from conversations.outbox import Deliverer
from conversations.render import CLOSED, render_event
from conversations.store import Outbox, Outgoing, Store, migrate
from conversations.store.memory import MemoryStore
from conversations.store.sql import SqlStore, create_engine
from core.vocabulary.journal import Change
from core.vocabulary.people import Person
from core.vocabulary.run_events import (
    PlanProposed,
    ProgressNote,
    RequestClosed,
    RunAnswered,
    RunStats,
)
from tests.conftest import wait_for
from tests.fakes.clock import VirtualClock
from tests.test_outbox import RecordingSender
from tests.test_store_contract import sqlite_store

THREAD = PlatformRef(platform="test", channel="c", thread="t")
READS = frozenset(
    {
        "pending_conversations",
        "pending_rows",
        "has_pending_milestone",
        "has_pending_in",
        "still_pending",
        "request_message",
        "last_outbox_id",
        "rows",
    }
)
"""The outbox's methods that read the store."""


class CountingOutbox:
    """An outbox that counts the calls of each method, then calls the real one."""

    def __init__(self, outbox: Outbox) -> None:
        self._outbox = outbox
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._outbox, name)

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return await method(*args, **kwargs)

        return counted

    def reads(self) -> dict[str, int]:
        return {name: n for name, n in self.calls.items() if name in READS}


async def open_conversation(store: Store, tmp_path: Path, thread: str = "t") -> str:
    conversation_id = await store.threads.open_conversation(
        delivery_key=f"k-{thread}",
        binding=THREAD.model_copy(update={"thread": thread}),
        requester=Person(id="u", name="alice"),
        workspace_root=tmp_path,
        position="executing",
    )
    assert conversation_id
    return conversation_id


def answered(text: str) -> Change:
    return Change(events=(RunAnswered(text=text, stats=RunStats()),))


def closed_plan() -> Change:
    event = RequestClosed.model_validate(
        {"request_id": "r1", "request": "plan", "outcome": "approved", "by_name": "alice"}
        | {"plan_version": 1}
    )
    return Change(events=(event,))


def proposed_plan() -> Change:
    return Change(events=(PlanProposed(request_id="r1", version=1, steps=("Clean up",)),))


def texts(sender: RecordingSender) -> list[str]:
    return [getattr(action, "text", "").split("\n")[0].split(" — ")[0] for action in sender.sent]


@pytest.mark.parametrize("mode", ["replies", "status"])
async def test_handed_rows_are_sent_and_settled_without_a_read(mode: str, tmp_path: Path) -> None:
    store = MemoryStore(render=render_event)
    outbox = CountingOutbox(store.outbox)
    sender = RecordingSender()
    clock = VirtualClock()  # stands still: no poll timer runs out
    deliverer = Deliverer(
        outbox=outbox,  # type: ignore[arg-type]
        senders={"test": sender},
        progress_mode=mode,  # type: ignore[arg-type]
        note_interval=0,
        clock=clock,
    )
    store.on_outbox = deliverer.wake
    cid = await open_conversation(store, tmp_path)
    running = asyncio.create_task(deliverer.run())
    try:
        await wait_for(lambda: outbox.calls["pending_conversations"])  # run() looks at start
        await deliverer.drain()  # that look is done
        outbox.calls.clear()

        await store.journal.commit(cid, proposed_plan())
        await wait_for(lambda: len(sender.sent) == 1)
        await store.journal.commit(cid, closed_plan())
        await store.journal.commit(cid, Change(events=(ProgressNote(text="working"),)))
        await store.journal.commit(cid, answered("Done."))
        await wait_for(lambda: len(sender.sent) == 4)
        await deliverer.drain()
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)

    # nothing read back but the plan's message, for its closing edit (a conversation
    # waiting on a person holds no memory, so the plan was not kept for it)
    assert outbox.reads() == {"request_message": 1}
    assert texts(sender) == [
        "📋 Plan (v1)",
        "✅ Approved by alice (plan v1)",
        "⏳ working",
        "✅ Done.",
    ]
    edit = sender.sent[1]
    assert isinstance(edit, UpdateMessage) and edit.ref.message == "m1"  # the plan's message
    stored = [(r.purpose, r.state, r.platform_message_id) for r in await store.outbox.rows(cid)]
    assert stored == [
        ("milestone", "sent", "m1"),
        (CLOSED, "sent", "m1"),
        ("note", "sent", "m3"),
        ("answer", "sent", "m4"),
    ]


@pytest.fixture
def trace() -> Iterator[StatementTrace]:
    """Every statement of every SQLite connection opened while the test runs."""
    traced = StatementTrace()
    with traced.installed():
        yield traced


@pytest.fixture
async def sql_store(tmp_path: Path, trace: StatementTrace) -> AsyncIterator[SqlStore]:
    async with sqlite_store(tmp_path) as store:  # opened while traced
        assert isinstance(store, SqlStore)
        yield store


def said(statements: list[Statement]) -> list[str]:
    """Each statement as its verb and table: ``UPDATE outbox``, ``BEGIN IMMEDIATE``."""
    found = []
    for s in statements:
        words = " ".join(s.sql.split()).split(" ")
        if s.verb in ("UPDATE", "INSERT", "SELECT", "DELETE"):
            table = words[2] if s.verb == "INSERT" else words[1]
            found.append(f"{s.verb} {table}" if s.verb != "SELECT" else "SELECT")
        else:
            found.append(" ".join(words[:2]))
    return found


async def test_on_sqlite_a_handed_row_costs_one_statement_to_settle(
    sql_store: SqlStore, trace: StatementTrace, tmp_path: Path
) -> None:
    sender = RecordingSender()
    outbox = CountingOutbox(sql_store.outbox)
    deliverer = Deliverer(
        outbox=outbox,  # type: ignore[arg-type]
        senders={"test": sender},
        poll_interval=3600,
    )
    sql_store.on_outbox = deliverer.wake
    cid = await open_conversation(sql_store, tmp_path)
    running = asyncio.create_task(deliverer.run())
    try:
        await wait_for(lambda: outbox.calls["pending_conversations"])  # run() looks at start
        await deliverer.drain()  # that look is done
        notice = Outgoing(PostReply(ref=THREAD, text="a notice"))
        with trace.record() as notice_statements:
            await sql_store.outbox.enqueue(cid, [notice])
            await wait_for(lambda: len(sender.sent) == 1)
            await deliverer.drain()
        with trace.record() as plan_statements:
            await sql_store.journal.commit(cid, proposed_plan())
            await wait_for(lambda: len(sender.sent) == 2)
            await sql_store.journal.commit(cid, closed_plan())
            await wait_for(lambda: len(sender.sent) == 3)
            await deliverer.drain()
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)

    # Written with RETURNING, sent, marked sent: one statement each, no BEGIN, no read.
    assert said(notice_statements) == ["INSERT outbox", "UPDATE outbox"]
    assert said(plan_statements) == [
        "BEGIN IMMEDIATE",  # the commit of the plan
        "UPDATE conversations",
        "INSERT outbox",
        "COMMIT",
        "BEGIN IMMEDIATE",  # the plan sent: its message linked to its request, in one go
        "UPDATE pending_requests",
        "UPDATE outbox",
        "COMMIT",
        "BEGIN IMMEDIATE",  # the commit of the closing
        "UPDATE conversations",
        "INSERT outbox",
        "COMMIT",
        "SELECT",  # the plan's message, read back for its edit (nothing kept)
        "UPDATE outbox",  # the edit sent
    ]
    edit = sender.sent[2]
    assert isinstance(edit, UpdateMessage) and edit.ref.message == "m2"
    states = [(r.state, r.platform_message_id) for r in await sql_store.outbox.rows(cid)]
    assert states == [("sent", "m1"), ("sent", "m2"), ("sent", "m2")]


# --- the store, the fallback ---------------------------------------------------------------


@pytest.fixture
async def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path / 'shared.db'}"
    engine = create_engine(url)
    await migrate.upgrade(engine)
    await engine.dispose()
    return url


async def test_a_row_written_while_the_deliverer_was_down_goes_out_first_at_its_start(
    sqlite_url: str, tmp_path: Path
) -> None:
    before = SqlStore(engine=create_engine(sqlite_url), render=render_event)  # nobody delivers
    cid = await open_conversation(before, tmp_path)
    await before.journal.commit(cid, answered("Written while it was down."))
    await before.close()

    store = SqlStore(engine=create_engine(sqlite_url), render=render_event)
    sender = RecordingSender()
    deliverer = Deliverer(outbox=store.outbox, senders={"test": sender}, poll_interval=3600)
    store.on_outbox = deliverer.wake
    running = asyncio.create_task(deliverer.run())
    try:
        await store.journal.commit(cid, answered("Written after its start."))  # handed over
        await wait_for(lambda: len(sender.sent) == 2)
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)

    assert texts(sender) == ["✅ Written while it was down.", "✅ Written after its start."]
    assert sender.calls[0][2] is True  # an earlier process may have sent it: looked for first
    assert [r.state for r in await store.outbox.rows(cid)] == ["sent", "sent"]
    await store.close()


async def test_a_row_another_process_wrote_is_found_by_the_poll(
    sqlite_url: str, tmp_path: Path
) -> None:
    store = SqlStore(engine=create_engine(sqlite_url), render=render_event)
    other = SqlStore(engine=create_engine(sqlite_url), render=render_event)  # hands us nothing
    cid = await open_conversation(store, tmp_path)
    elsewhere = await open_conversation(other, tmp_path, thread="t2")
    sender = RecordingSender()
    outbox = CountingOutbox(store.outbox)
    clock = VirtualClock()
    deliverer = Deliverer(
        outbox=outbox,  # type: ignore[arg-type]
        senders={"test": sender},
        poll_interval=2.0,
        clock=clock,
    )
    store.on_outbox = deliverer.wake
    running = asyncio.create_task(deliverer.run())
    try:
        await wait_for(lambda: outbox.calls["pending_conversations"])  # run() looks at start
        await deliverer.drain()  # that look is done
        looked_at = clock.now()

        notice = Outgoing(PostReply(ref=THREAD.model_copy(update={"thread": "t2"}), text="hi"))
        await other.outbox.enqueue(elsewhere, [notice])
        await store.journal.commit(cid, answered("Handed over."))
        await wait_for(lambda: len(sender.sent) == 1)  # time stands still meanwhile
        assert texts(sender) == ["✅ Handed over."]
        assert clock.now() == looked_at

        await clock.until(lambda: len(sender.sent) == 2)  # time moves: the poll comes
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)

    assert texts(sender) == ["✅ Handed over.", "hi"]
    assert clock.now() >= looked_at + 2.0
    assert [r.state for r in await store.outbox.rows()] == ["sent", "sent"]
    await other.close()
    await store.close()
