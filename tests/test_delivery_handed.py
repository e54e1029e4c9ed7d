"""Rows handed over by the commits that wrote them: sent without reading the store.

A commit hands its outbox rows to the deliverer (``store.on_outbox``): the
deliverer sends them and settles each with one write, reading nothing, in both
progress modes and for a request's closing edit (its message is the one the
deliverer posted, kept while it is among the last it posted; older ones, or one another
deliverer posted, are read back). The store stays the fallback: a row written while the deliverer
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
from conversations.events import PlatformRef, PostReply, SetSessionStatus, UpdateMessage
from conversations.outbox import Deliverer
from conversations.outbox._known import POSTS_REMEMBERED
from conversations.plan_cards import PLAN_STEPS
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
from tests.test_store_contract import (
    enqueued,
    new_conversation,
    plan_request,
    posted,
    sqlite_store,
)

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
    return Change(events=(_closed("approved"),))


def _closed(outcome: str) -> RequestClosed:
    return RequestClosed.model_validate(
        {"request_id": "r1", "request": "plan", "outcome": outcome, "by_name": "alice"}
        | {"plan_version": 1}
    )


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

    # nothing read back: the closing edit's message is one this deliverer posted lately
    assert outbox.reads() == {}
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


async def test_an_edit_of_a_message_posted_long_ago_or_by_another_deliverer_reads_it(
    tmp_path: Path,
) -> None:
    store = MemoryStore(render=render_event)
    outbox = CountingOutbox(store.outbox)
    sender = RecordingSender()
    deliverer = Deliverer(outbox=outbox, senders={"test": sender})  # type: ignore[arg-type]
    store.on_outbox = deliverer.wake
    cids = [await open_conversation(store, tmp_path, f"t{n}") for n in range(POSTS_REMEMBERED + 1)]
    for cid in cids:  # a plan in each, posted in this order
        await store.journal.commit(cid, proposed_plan())
    await deliverer.drain()
    assert len(sender.sent) == len(cids)
    outbox.calls.clear()

    await store.journal.commit(cids[-1], closed_plan())  # posted lately: kept
    await deliverer.drain()
    assert outbox.reads() == {}
    await store.journal.commit(cids[0], closed_plan())  # posted before the last 8: read
    await deliverer.drain()
    assert outbox.reads() == {"request_message": 1}

    again = Deliverer(outbox=outbox, senders={"test": sender})  # type: ignore[arg-type]
    store.on_outbox = again.wake  # as after a restart: nothing kept
    await store.journal.commit(cids[-1], Change(events=(_closed("rejected"),)))
    await again.drain()
    assert outbox.reads()["request_message"] == 2
    edits = [a for a in sender.sent if isinstance(a, UpdateMessage)]
    assert [(e.ref.thread, e.ref.message) for e in edits] == [
        (f"t{POSTS_REMEMBERED}", f"m{POSTS_REMEMBERED + 1}"),
        ("t0", "m1"),
        (f"t{POSTS_REMEMBERED}", f"m{POSTS_REMEMBERED + 1}"),
    ]


async def test_a_status_mark_waits_for_the_next_mark_or_hold_marks_seconds(
    tmp_path: Path,
) -> None:
    """A session status changes nothing when sent twice: its mark goes with the
    conversation's next one, or alone ``hold_marks`` seconds later, or at a drain."""
    store = MemoryStore(render=render_event)
    outbox = CountingOutbox(store.outbox)
    sender = RecordingSender()
    clock = VirtualClock()  # stands still until advanced
    deliverer = Deliverer(
        outbox=outbox,  # type: ignore[arg-type]
        senders={"test": sender},
        clock=clock,
        hold_marks=1.0,
        poll_interval=3600,
    )
    store.on_outbox = deliverer.wake
    cid = await open_conversation(store, tmp_path)
    status = Outgoing(SetSessionStatus(ref=THREAD, status="processing"), purpose="session")

    async def states() -> list[tuple[str, str | None]]:
        return [(r.state, r.platform_message_id) for r in await store.outbox.rows(cid)]

    running = asyncio.create_task(deliverer.run())
    try:
        await wait_for(lambda: outbox.calls["pending_conversations"])  # run() looks at start
        await store.outbox.enqueue(cid, [status])
        await wait_for(lambda: len(sender.sent) == 1)
        due = clock.now() + 1.0
        await wait_for(lambda: clock.next_deadline() == due)  # asleep until the mark is due
        assert await states() == [("pending", None)] and outbox.calls["mark_sent"] == 0

        await store.outbox.enqueue(cid, [Outgoing(PostReply(ref=THREAD, text="a notice"))])
        await wait_for(lambda: outbox.calls["mark_sent"] == 1)  # one write for both
        assert await states() == [("sent", "m1"), ("sent", "m2")]  # each its own id

        await store.outbox.enqueue(cid, [status])
        await wait_for(lambda: len(sender.sent) == 3)
        due = clock.now() + 1.0
        await wait_for(lambda: clock.next_deadline() == due)
        clock.advance(0.5)  # the dispatcher sleeps on: nothing wakes it before ``due``
        assert clock.next_deadline() == due
        assert outbox.calls["mark_sent"] == 1  # held for a second
        clock.advance(0.5)
        await wait_for(lambda: outbox.calls["mark_sent"] == 2)  # then written alone
        assert (await states())[-1] == ("sent", "m3")

        await store.outbox.enqueue(cid, [status])
        await wait_for(lambda: len(sender.sent) == 4)
        await deliverer.drain()  # a drain writes what is held at once
        assert outbox.calls["mark_sent"] == 3
        assert [state for state, _ in await states()] == ["sent"] * 4
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


async def test_marks_held_at_the_end_of_the_deliverer_are_written(tmp_path: Path) -> None:
    store = MemoryStore(render=render_event)
    sender = RecordingSender()
    deliverer = Deliverer(outbox=store.outbox, senders={"test": sender}, hold_marks=3600)
    store.on_outbox = deliverer.wake
    cid = await open_conversation(store, tmp_path)
    running = asyncio.create_task(deliverer.run())
    status = Outgoing(SetSessionStatus(ref=THREAD, status="processing"), purpose="session")
    await store.outbox.enqueue(cid, [status])
    await wait_for(lambda: len(sender.sent) == 1)
    assert [r.state for r in await store.outbox.rows(cid)] == ["pending"]  # held an hour
    running.cancel()  # the bot shuts down
    await asyncio.gather(running, return_exceptions=True)
    assert [r.state for r in await store.outbox.rows(cid)] == ["sent"]


@pytest.mark.parametrize("until", ["a drain", "its time"])
async def test_a_plan_cards_waiting_edits_go_as_one_edit_to_its_newest_steps(
    until: str, tmp_path: Path
) -> None:
    store = MemoryStore(render=render_event)
    sender = RecordingSender()
    clock = VirtualClock()  # stands still until advanced
    deliverer = Deliverer(
        outbox=store.outbox, senders={"test": sender}, clock=clock, plan_interval=1.0
    )
    store.on_outbox = deliverer.wake
    cid = await open_conversation(store, tmp_path)
    steps = [
        Outgoing(UpdateMessage(ref=THREAD, text=f"step {n}"), PLAN_STEPS, request_id="r1")
        for n in (1, 2, 3)
    ]
    await store.journal.commit(cid, proposed_plan())
    await store.journal.commit(cid, closed_plan())  # an edit of the plan's message
    if until == "a drain":  # nobody delivers until the drain: every edit is due then
        await deliverer.drain()
        await store.outbox.enqueue(cid, steps)
        await deliverer.drain()
    else:
        running = asyncio.create_task(deliverer.run())
        try:
            await wait_for(lambda: len(sender.sent) == 2)
            for step in steps:  # each less than a second after the last edit: they wait
                await store.outbox.enqueue(cid, [step])
            await deliverer.pass_over()  # no edit on its way either
            assert len(sender.sent) == 2
            clock.advance(1.0)
            await wait_for(lambda: len(sender.sent) == 3)
            await deliverer.drain()
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)

    edits = [a for a in sender.sent if isinstance(a, UpdateMessage)]
    assert [e.text.split("\n")[0] for e in edits] == ["✅ Approved by alice (plan v1)", "step 3"]
    stored = [(r.purpose, r.state, r.platform_message_id) for r in await store.outbox.rows(cid)]
    assert stored[2:] == [(PLAN_STEPS, "sent", "m1")] * 3  # shown by the newest's edit


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


class Killed(Exception):
    """The process died here."""


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
            await deliverer.drain()  # the plan marked sent before the closing's commit
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
        "UPDATE pending_requests",  # the plan sent: its message linked to its request,
        "UPDATE outbox",  # then marked sent, each statement on its own
        "BEGIN IMMEDIATE",  # the commit of the closing
        "UPDATE conversations",
        "INSERT outbox",
        "COMMIT",
        "UPDATE outbox",  # the edit sent (the plan's message kept since it was posted)
    ]
    edit = sender.sent[2]
    assert isinstance(edit, UpdateMessage) and edit.ref.message == "m2"
    states = [(r.state, r.platform_message_id) for r in await sql_store.outbox.rows(cid)]
    assert states == [("sent", "m1"), ("sent", "m2"), ("sent", "m2")]


async def test_a_crash_between_link_and_mark_leaves_the_message_linked_and_its_row_pending(
    sql_store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    cid = await new_conversation(sql_store)
    await sql_store.journal.commit(cid, Change(open_request=plan_request()))
    [plan] = await enqueued(sql_store, cid, posted("📋 Plan (v1)", "req1"))
    [row] = [r.pending_send() for r in await sql_store.outbox.rows(cid)]
    db = sql_store.outbox._db  # type: ignore[attr-defined]
    write_alone = db.write_alone
    statements = 0

    async def dies_at_the_second(*args: Any, **kwargs: Any) -> Any:
        nonlocal statements
        statements += 1
        if statements == 2:
            raise Killed  # the process dies before it marks the row
        return await write_alone(*args, **kwargs)

    monkeypatch.setattr(db, "write_alone", dies_at_the_second)
    with pytest.raises(Killed):
        await sql_store.outbox.mark_sent([plan], "1.10", rows=[row])
    monkeypatch.setattr(db, "write_alone", write_alone)

    found = await sql_store.threads.find_by_message("slack", "C1", "1.10")
    assert found is not None and found.request_id == "req1"  # a reaction on it decides
    [(state, message)] = [(r.state, r.platform_message_id) for r in await sql_store.outbox.rows()]
    assert (state, message) == ("pending", None)  # sent again after the restart (or found)
    await sql_store.outbox.mark_sent([plan], "1.13", rows=[row])  # the post sent again
    found = await sql_store.threads.find_by_message("slack", "C1", "1.13")
    assert found is not None and found.request_id == "req1"
    [(state, message)] = [(r.state, r.platform_message_id) for r in await sql_store.outbox.rows()]
    assert (state, message) == ("sent", "1.13")


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
