"""The store's contract: every interface method, on each store backend.

These are the promises the rest of threadbot builds on, stated against the store's
interfaces only (``conversations.store.interfaces``), so a new backend runs the
same tests: a run's commit is refused once another process took its conversation
over (and writes nothing), a lease is acquired with a new epoch and renewed with
the same one, the first of two decisions wins, a gated call decided meanwhile
refuses the change that waited on it, a delivery key is taken once, outbox rows
keep their order and states, stop requests reach the holder, requests come due,
and pruning keeps what must stay. The last test checks that every method of
every interface is called here.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest

from conversations.events import PlatformRef, PostReply, SetSessionStatus, UpdateMessage
from conversations.render import render_event
from conversations.store import OutboxRecord, Outgoing, Pruned, Store, interfaces, migrate
from conversations.store.approvals import ApprovalRules
from conversations.store.audit import AuditTrail
from conversations.store.claims import DeliveryClaims
from conversations.store.feedback import Feedback
from conversations.store.forks import Forks
from conversations.store.health import StoreHealth
from conversations.store.inspection import Inspection
from conversations.store.installations import Installations, OAuthStates
from conversations.store.leases import Leases
from conversations.store.memory import MemoryStore
from conversations.store.operator_sessions import OperatorSessions
from conversations.store.records import Lease, opened_lease, opened_snapshot
from conversations.store.schedules import Schedules
from conversations.store.slots import SlotStore
from conversations.store.sql import SqlStore, create_engine
from conversations.store.usage import Usage
from conversations.store.wakeups import Wakeups
from core.outputs import OutputStore
from core.vocabulary import lifecycle
from core.vocabulary.entries import AssistantTurn, ToolCall, UserText
from core.vocabulary.errors import ConversationNotFound, LeaseLost, RequestConflict, StaleSnapshot
from core.vocabulary.fold import apply_change
from core.vocabulary.journal import Change, Committed, Journal, RequestResolution
from core.vocabulary.people import Person
from core.vocabulary.requests import PendingRequest, PlanApproval, RequestState
from core.vocabulary.run_events import PlanProposed, ProgressNote, Stopped
from core.vocabulary.tool_records import ToolCallRecord, ToolState
from core.vocabulary.verdicts import Approved, Rejected

ALICE = Person(id="U0ALICE001", name="alice")
BOB = Person(id="U0BOB00001", name="bob")
THREAD = PlatformRef(platform="slack", workspace="T1", channel="C1", thread="1.0")


@contextlib.asynccontextmanager
async def memory_store(_tmp_path: Path) -> AsyncIterator[Store]:
    store = MemoryStore(render=render_event)
    try:
        yield store
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def sql_store(url: str) -> AsyncIterator[Store]:
    engine = create_engine(url)
    await migrate.upgrade(engine)
    store = SqlStore(engine=engine, render=render_event)
    try:
        yield store
    finally:
        await store.close()


def sqlite_store(tmp_path: Path) -> contextlib.AbstractAsyncContextManager[Store]:
    """An ``SqlStore`` on a new SQLite file in ``tmp_path``."""
    return sql_store(f"sqlite+aiosqlite:///{tmp_path / 'contract.db'}")


BACKENDS = ("memory", "postgresql", "sqlite")
"""Every backend the contract runs on: the in-memory store, and an ``SqlStore`` on a
fresh SQLite file and on this session's PostgreSQL database, emptied
(``tests/postgres.py``; skipped where there is no PostgreSQL, failed under CI)."""


def opened_store(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> contextlib.AbstractAsyncContextManager[Store]:
    """A new, empty store of ``backend`` (one of :data:`BACKENDS`), to open with
    ``async with``; ``request`` gives the PostgreSQL fixture."""
    if backend == "memory":
        return memory_store(tmp_path)
    if backend == "sqlite":
        return sqlite_store(tmp_path)
    return sql_store(request.getfixturevalue("postgres_url"))


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A new, empty store of each backend."""
    async with opened_store(request.param, request, tmp_path) as store:
        yield store


async def new_conversation(
    store: Store, key: str = "Ev1", *, thread: str = "1.0", channel: str = "C1"
) -> str:
    binding = THREAD.model_copy(update={"thread": thread, "channel": channel})
    conversation_id = await store.threads.open_conversation(
        delivery_key=key,
        binding=binding,
        requester=ALICE,
        workspace_root=Path("workspaces"),
        position="planning",
    )
    assert conversation_id is not None
    return conversation_id


async def journal_length(store: Store, conversation_id: str) -> int:
    return len((await store.journal.load(conversation_id)).journal)


async def outbox_length(store: Store, conversation_id: str) -> int:
    return len(await store.outbox.rows(conversation_id))


def note(text: str) -> Change:
    return Change(
        entries=(UserText(author=ALICE, text=text, role="note"),),
        events=(ProgressNote(text=text),),
    )


def posted(
    text: str, request_id: str | None = None, purpose: str = "milestone", channel: str = "C1"
) -> Outgoing:
    ref = THREAD.model_copy(update={"channel": channel})
    return Outgoing(PostReply(ref=ref, text=text), purpose=purpose, request_id=request_id)


async def enqueued(store: Store, cid: str, *items: Outgoing) -> list[int]:
    """Ids of the rows ``items`` became (they are the newest)."""
    before = await store.outbox.last_outbox_id()
    await store.outbox.enqueue(cid, list(items))
    return [r.id for r in await store.outbox.rows() if r.id > before]


def gated(tool_use_id: str = "toolu_1", state: ToolState = ToolState.PENDING_APPROVAL) -> Any:
    return ToolCallRecord(
        tool_use_id=tool_use_id,
        name="run_command",
        input={"command": "rm -rf build"},
        read_only=False,
        state=state,
        turn_seq=1,
        index=0,
    )


# --- the journal -------------------------------------------------------------------------


async def test_a_commit_applies_its_whole_change_and_load_reads_it_back(store: Store) -> None:
    cid = await store.threads.open_conversation(
        delivery_key="Ev-mention",
        binding=THREAD,
        requester=ALICE,
        workspace_root=Path("workspaces"),
        position="planning",
        event={"kind": "message_posted", "text": "fix it"},
    )
    assert cid is not None and re.fullmatch(r"[0-9a-f]{32}", cid)
    call = ToolCall(id="toolu_1", name="run_command", input={"command": "rm -rf build"})
    plan = PlanApproval(id="req1", tool_use_id="toolu_plan", plan_version=1)

    first = await store.journal.commit(
        cid,
        Change(
            entries=(UserText(author=ALICE, text="fix it"), AssistantTurn(tool_calls=(call,))),
            tool_calls=(gated(),),
            open_request=plan,
            status=lifecycle.waiting(lifecycle.WaitKind.PLAN_APPROVAL),
            position="approval",
            plan_version=1,
            events=(PlanProposed(request_id="req1", version=1, steps=("Clean",)),),
            handled=("Ev-mention",),
        ),
    )
    second = await store.journal.commit(
        cid, Change(tool_calls=(gated(state=ToolState.APPROVED),), entries=(note("ok").entries))
    )

    assert (first.seqs, second.seqs) == ((1, 2), (3,))
    assert first.at <= second.at and first.at.tzinfo is not None
    snap = await store.journal.load(cid)
    assert (snap.id, snap.requester, str(snap.status)) == (cid, ALICE, "waiting(plan_approval)")
    assert (snap.position, snap.plan_version) == ("approval", 1)
    assert snap.workspace == str(Path("workspaces") / cid)
    assert [r.seq for r in snap.journal] == [1, 2, 3]
    assert [r.entry.kind for r in snap.journal] == ["user_text", "assistant_turn", "user_text"]
    assert all(r.at.tzinfo is not None for r in snap.journal)
    assert snap.tool_calls == {"toolu_1": gated(state=ToolState.APPROVED)}  # upserted
    assert snap.requests == (plan,)
    assert await store.inbox.unhandled() == []  # the mention is journaled
    [row] = await store.outbox.rows(cid)
    assert (row.purpose, row.request_id, row.state) == ("milestone", "req1", "pending")
    assert isinstance(row.action, PostReply) and row.action.text.startswith("📋 Plan (v1)")
    assert row.action.ref == THREAD


async def test_a_change_folded_into_a_snapshot_equals_the_reload(store: Store) -> None:
    """What a run keeps in memory (``core.vocabulary.fold.apply_change``) is what the store
    loads."""
    cid = await new_conversation(store)
    call = ToolCall(id="toolu_1", name="run_command", input={"command": "make"})
    changes = [
        Change(entries=(UserText(author=ALICE, text="fix it"),), status=lifecycle.RUNNING),
        Change(
            entries=(AssistantTurn(text="plan", tool_calls=(call,)),),
            tool_calls=(gated(),),
            open_request=plan_request(),
            status=lifecycle.waiting(lifecycle.WaitKind.PLAN_APPROVAL),
            position="approval",
            plan_version=1,
        ),
        decision(Person(id="U0NONAME01", name=""), "approve"),
        Change(tool_calls=(gated(state=ToolState.RUNNING),)),
        Change(entries=(note("done").entries), status=lifecycle.DONE, position="done"),
    ]
    snap = await store.journal.load(cid)
    for change in changes:
        committed = await store.journal.commit(cid, change, after_seq=snap.last_seq)
        snap = apply_change(snap, change, committed)
        assert snap == await store.journal.load(cid)
    assert snap.requests[0].decided_by == Person(id="U0NONAME01", name="U0NONAME01")


async def test_a_commit_after_a_taken_seq_is_stale_and_writes_nothing(store: Store) -> None:
    cid = await new_conversation(store)
    await store.inbox.record_delivery("Ev-late", cid, {"kind": "message_posted"})
    await store.journal.commit(cid, note("first"), after_seq=0)
    before, outbox = await store.journal.load(cid), await store.outbox.rows(cid)

    with pytest.raises(StaleSnapshot):
        await store.journal.commit(
            cid,
            Change(
                entries=(note("late").entries),
                tool_calls=(gated(),),
                status=lifecycle.DONE,
                events=(ProgressNote(text="never"),),
                handled=("Ev-late",),
            ),
            after_seq=0,
        )

    assert await store.journal.load(cid) == before
    assert await store.outbox.rows(cid) == outbox
    assert [d[0] for d in await store.inbox.unhandled()] == ["Ev-late"]
    # without entries nothing is numbered, so nothing is stale
    await store.journal.commit(cid, Change(tool_calls=(gated(),)), after_seq=0)
    assert "toolu_1" in (await store.journal.load(cid)).tool_calls


async def test_an_unknown_conversation_is_not_found(store: Store) -> None:
    with pytest.raises(ConversationNotFound):
        await store.journal.load("nobody")
    with pytest.raises(ConversationNotFound):
        await store.journal.commit("nobody", note("lost"))
    with pytest.raises(ConversationNotFound):
        await store.threads.info("nobody")
    assert await store.threads.find("nobody") is None


async def test_a_refused_commit_writes_nothing_at_all(store: Store) -> None:
    cid = await new_conversation(store)
    await store.inbox.record_delivery("Ev-reply", cid, {"kind": "message_posted"})
    await store.journal.commit(cid, Change(tool_calls=(gated(),), open_request=plan_request()))
    await store.journal.commit(cid, decision(ALICE, "approve"))
    before = await store.journal.load(cid)

    with pytest.raises(RequestConflict):
        await store.journal.commit(
            cid,
            decision(BOB, "reject").model_copy(
                update={
                    "tool_calls": (gated(state=ToolState.DENIED),),
                    "events": (ProgressNote(text="too late"),),
                    "handled": ("Ev-reply",),
                    "position": "answered",
                    "plan_version": 2,
                }
            ),
        )

    assert await store.journal.load(cid) == before
    assert await outbox_length(store, cid) == 0
    assert [key for key, _, _ in await store.inbox.unhandled()] == ["Ev-reply"]


async def test_a_resolution_without_compare_and_set_closes_whatever_state(store: Store) -> None:
    cid = await new_conversation(store)
    await store.journal.commit(cid, Change(open_request=plan_request()))
    await store.journal.commit(cid, decision(ALICE, "approve"))
    cancel = RequestResolution(
        request_id="req1", state=RequestState.CANCELLED, by=BOB, only_if_open=False
    )
    gone = cancel.model_copy(update={"request_id": "no-such-request"})

    await store.journal.commit(cid, Change(resolve=(cancel, gone)))

    (request,) = (await store.journal.load(cid)).requests
    assert (request.state, request.decided_by) == (RequestState.CANCELLED, BOB)


async def test_a_stop_drops_the_pending_notes_of_its_own_conversation(store: Store) -> None:
    cid = await new_conversation(store)
    other = await new_conversation(store, "Ev2", thread="2.0")
    await store.journal.commit(cid, note("one"))
    await store.outbox.enqueue(cid, [posted("a milestone")])
    await store.journal.commit(other, note("elsewhere"))

    await store.journal.commit(
        cid, Change(events=(ProgressNote(text="two"), Stopped(by_name="bob")))
    )

    rows = [(r.purpose, r.state) for r in await store.outbox.rows(cid)]
    assert rows == [
        ("note", "dropped"),
        ("milestone", "pending"),
        ("note", "dropped"),  # a note of the stopping change itself
        ("milestone", "pending"),  # "⏹ Stopped by bob."
    ]
    assert [r.state for r in await store.outbox.rows(other)] == ["pending"]


async def test_each_write_that_added_rows_hands_them_over_as_stored(store: Store) -> None:
    told: list[list[OutboxRecord]] = []
    store.on_outbox = lambda rows: told.append(list(rows))
    cid = await new_conversation(store)

    await store.journal.commit(cid, Change(position="executing"))  # no events, no rows
    assert told == []
    await store.journal.commit(cid, note("a note"))
    await store.outbox.enqueue(cid, [posted("a notice"), posted("another")])
    [first, *_] = await store.outbox.rows(cid)
    report = posted("⚠️ could not post", purpose="report")
    await store.outbox.fail_for_good(cid, [first.id], "gone", report)
    await store.outbox.fail_for_good(cid, [first.id], "gone", posted("⚠️ reported twice"))
    await store.outbox.enqueue(cid, [])

    assert [[(r.purpose, r.state, _text(r.action)) for r in rows] for rows in told] == [
        [("note", "pending", "⏳ a note")],
        [("milestone", "pending", "a notice"), ("milestone", "pending", "another")],
        [("report", "pending", "⚠️ could not post")],
    ]
    handed = {r.id: r for rows in told for r in rows}
    stored = {r.id: r for r in await store.outbox.rows(cid)}
    assert sorted(handed) == sorted(stored)  # every row, with the id it has in the store
    assert [handed[i].action for i in sorted(handed)] == [stored[i].action for i in sorted(stored)]
    assert all(r.conversation_id == cid for r in handed.values())


async def test_a_commit_whose_caller_was_cancelled_still_hands_its_rows_over(
    store: Store,
) -> None:
    """A stop cancels a run while its commit is in the writer: the commit goes through
    whole, and its rows (a plan, say) reach the deliverer, before the stop's own."""
    told: list[list[OutboxRecord]] = []
    store.on_outbox = lambda rows: told.append(list(rows))
    cid = await new_conversation(store)
    committing = asyncio.ensure_future(store.journal.commit(cid, note("the plan")))
    await asyncio.sleep(0)  # the commit has begun
    committing.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await committing
    went = len((await store.journal.load(cid)).journal)  # whole, or (not begun) nothing
    assert [[_text(r.action) for r in rows] for rows in told] == ([["⏳ the plan"]] if went else [])
    if isinstance(store, SqlStore):
        assert went == 1  # in the writer already when cancelled: it went through


async def test_a_stop_hands_over_the_notes_it_dropped_with_its_own_rows(store: Store) -> None:
    cid = await new_conversation(store)
    await store.journal.commit(cid, note("one"))
    [held] = await store.outbox.rows(cid)
    told: list[list[OutboxRecord]] = []
    store.on_outbox = lambda rows: told.append(list(rows))

    await store.journal.commit(
        cid, Change(events=(ProgressNote(text="two"), Stopped(by_name="bob")))
    )

    [rows] = told
    assert [(r.id, r.purpose, r.state) for r in rows] == [
        (held.id, "note", "dropped"),  # written before: the stop dropped it
        (rows[1].id, "note", "dropped"),  # a note of the stopping change itself
        (rows[2].id, "milestone", "pending"),  # "⏹ Stopped by bob."
    ]
    assert [r.id for r in rows] == sorted(r.id for r in rows)
    stored = {r.id: r.state for r in await store.outbox.rows(cid)}
    assert {r.id: r.state for r in rows} == stored


def _text(action: object) -> str:
    return str(getattr(action, "text", ""))


# --- leases --------------------------------------------------------------------------------


async def test_acquiring_a_lease_raises_its_epoch_and_renewing_keeps_it(store: Store) -> None:
    cid = await new_conversation(store)
    now = datetime.now(UTC)
    first = await store.leases.acquire_lease(cid, "host-a:1", ttl=60, now=now)
    assert first is not None and first.epoch == 1
    state = await store.leases.lease_state(cid)
    assert state is not None and (state.owner, state.epoch) == ("host-a:1", 1)
    assert state.live(now) and not state.live(now + timedelta(seconds=61))

    assert await store.leases.renew_leases([first], ttl=120, now=now) == {cid}
    renewed = await store.leases.lease_state(cid)
    assert renewed is not None and renewed.epoch == 1 and renewed.live(now + timedelta(seconds=61))
    assert await store.leases.renew_leases([], ttl=60) == set()
    assert await store.leases.release_lease(first)
    assert not await store.leases.release_lease(first)  # released already
    released = await store.leases.lease_state(cid)
    assert released is not None and released.owner is None and not released.live(now)
    again = await store.leases.acquire_lease(cid, "host-a:1", ttl=60)
    assert again is not None and again.epoch == 2  # acquired from free: a new epoch


async def test_a_conversation_opened_leased_is_held_at_epoch_1_and_loads_as_its_opened_snapshot(
    store: Store,
) -> None:
    """The mention's run starts from the conversation as opened, under the lease it was
    created with: both must be what the store holds."""
    cid = await store.threads.open_conversation(
        delivery_key="Ev1",
        binding=THREAD,
        requester=ALICE,
        workspace_root=Path("workspaces"),
        position="planning",
        lease=("host-a:1", 60.0),
    )
    assert cid is not None
    state = await store.leases.lease_state(cid)
    assert state is not None and (state.owner, state.epoch) == ("host-a:1", 1)
    assert state.live(datetime.now(UTC)) and not state.live(
        datetime.now(UTC) + timedelta(seconds=61)
    )
    assert opened_lease(cid, "host-a:1") == Lease(cid, "host-a:1", 1)
    opened = opened_snapshot(
        cid, requester=ALICE, position="planning", workspace_root=Path("workspaces")
    )
    assert await store.journal.load(cid) == opened
    # another owner cannot take it while it lives
    assert await store.leases.acquire_lease(cid, "host-b:2", ttl=60) is None


async def test_a_lease_taken_says_when_the_conversation_last_changed(store: Store) -> None:
    """A run handed a conversation as a commit left it starts from it only when the lease
    it takes says nothing changed since (:class:`core.run.state.Handover`)."""
    cid = await new_conversation(store)
    committed = await store.journal.commit(cid, note("one"))
    lease = await store.leases.acquire_lease(cid, "host-a:1", ttl=60)
    assert lease is not None and lease.changed_at == committed.at
    assert await store.leases.release_lease(lease)
    later = await store.journal.commit(cid, note("two"))
    again = await store.leases.acquire_lease(cid, "host-a:1", ttl=60)
    assert again is not None and again.changed_at == later.at != committed.at


async def test_a_busy_process_renews_a_thousand_and_more_leases_at_once(store: Store) -> None:
    """One owner holding 1,200 leases renews them all (an ``OR`` per lease once broke
    SQLite's expression depth at about 500); a lease taken over is not renewed."""
    now = datetime.now(UTC)
    held = []
    for n in range(1200):
        cid = await new_conversation(store, f"Ev-many-{n}", thread=f"{n}.0")
        lease = await store.leases.acquire_lease(cid, "host-a:1", ttl=60, now=now)
        assert lease is not None
        held.append(lease)
    later = now + timedelta(seconds=61)
    taken = await store.leases.acquire_lease(
        held[700].conversation_id, "host-b:2", ttl=60, now=later
    )
    assert taken is not None

    kept = await store.leases.renew_leases(held, ttl=120, now=later)

    assert kept == {lease.conversation_id for lease in held} - {taken.conversation_id}
    state = await store.leases.lease_state(held[1199].conversation_id)
    assert state is not None and state.live(later + timedelta(seconds=60))


async def test_a_live_lease_is_not_taken_but_an_expired_or_dead_one_is(store: Store) -> None:
    cid = await new_conversation(store)
    now = datetime.now(UTC)
    held = await store.leases.acquire_lease(cid, "host-a:1", ttl=60, now=now)
    assert held is not None

    assert await store.leases.acquire_lease(cid, "host-b:2", ttl=60, now=now) is None
    dead = await store.leases.acquire_lease(cid, "host-b:2", ttl=60, now=now, dead="host-a:1")
    assert dead is not None and dead.epoch == held.epoch + 1
    later = now + timedelta(seconds=61)
    expired = await store.leases.acquire_lease(cid, "host-c:3", ttl=60, now=later)
    assert expired is not None and expired.epoch == dead.epoch + 1
    assert await store.leases.lease_owner(cid) == "host-c:3"
    assert await store.leases.renew_leases([dead], ttl=60) == set()  # taken over


async def test_lapsed_leases_of_running_conversations_are_taken_over_once(store: Store) -> None:
    now = datetime.now(UTC)
    lapsed, live, unleased, waiting = [
        await new_conversation(store, f"E{n}", thread=f"{n}.0") for n in range(4)
    ]
    for cid in (lapsed, live, unleased):
        await store.journal.commit(cid, Change(status=lifecycle.RUNNING))
    for cid in (lapsed, live, waiting):
        assert await store.leases.acquire_lease(cid, "host-a:1", ttl=60, now=now) is not None
    later = now + timedelta(seconds=30)
    assert await store.leases.take_lapsed("host-b:2", ttl=60, limit=10, now=later) == [
        Lease(unleased, "host-b:2", 1, changed_at=ANY)
    ]
    much_later = now + timedelta(seconds=61)
    taken = await store.leases.take_lapsed("host-c:3", ttl=60, limit=10, now=much_later)
    assert sorted((t.conversation_id, t.owner, t.epoch) for t in taken) == sorted(
        [(lapsed, "host-c:3", 2), (live, "host-c:3", 2)]
    )  # live lapsed too by then; a waiting conversation is nobody's to run
    assert await store.leases.take_lapsed("host-d:4", ttl=60, limit=10, now=much_later) == []
    # lapsed a while ago only: host-b's lapsed at +90 s, host-c's at +121 s
    for_a_while = dict(ttl=60, limit=10, lapsed_for=30.0)
    at = now + timedelta(seconds=140)
    taken = await store.leases.take_lapsed("host-d:4", **for_a_while, now=at)  # type: ignore[arg-type]
    assert [t.conversation_id for t in taken] == [unleased]
    at = now + timedelta(seconds=152)
    taken = await store.leases.take_lapsed("host-d:4", **for_a_while, now=at)  # type: ignore[arg-type]
    assert sorted(t.conversation_id for t in taken) == sorted([lapsed, live])
    state = await store.leases.lease_state(lapsed)
    assert state is not None and (state.owner, state.epoch) == ("host-d:4", 3)


async def test_a_lease_of_an_unknown_conversation_is_nobody_s(store: Store) -> None:
    assert await store.leases.acquire_lease("nobody", "host-a:1", ttl=60) is None
    assert await store.leases.lease_state("nobody") is None
    assert await store.leases.lease_owner("nobody") is None


async def test_a_run_commit_after_a_takeover_is_refused_and_writes_nothing(store: Store) -> None:
    cid = await new_conversation(store)
    paused = Leases(store=store.leases, owner="host-a:1", ttl=0.2)
    async with paused.held(cid) as lease:
        await store.journal.commit(cid, note("before the pause"))  # holds: written
        await asyncio.sleep(0.3)  # paused past the lease's expiry
        taken = await store.leases.acquire_lease(cid, "host-b:2", ttl=60)
        assert taken is not None and taken.epoch == lease.epoch + 1
        journal, outbox = await journal_length(store, cid), await outbox_length(store, cid)

        with pytest.raises(LeaseLost):
            await store.journal.commit(
                cid, note("after the takeover").model_copy(update={"status": lifecycle.DONE})
            )

        assert await journal_length(store, cid) == journal
        assert await outbox_length(store, cid) == outbox
        snap = await store.journal.load(cid)
        assert snap.status.lifecycle is lifecycle.Lifecycle.IDLE
    assert await store.leases.lease_owner(cid) == "host-b:2"  # the stale release did nothing


async def test_renewal_finds_a_lease_lost_to_a_takeover(store: Store) -> None:
    cid = await new_conversation(store)
    leases = Leases(store=store.leases, owner="host-a:1", ttl=0.2)
    async with leases.held(cid):
        await asyncio.sleep(0.3)
        assert await store.leases.acquire_lease(cid, "host-b:2", ttl=60) is not None
        assert await leases.renew_all() == {cid}


async def test_commits_outside_a_run_are_not_fenced(store: Store) -> None:
    """Decisions, stops and notices are guarded by their compare-and-set, not the lease."""
    cid = await new_conversation(store)
    assert await store.leases.acquire_lease(cid, "host-b:2", ttl=60) is not None

    await store.journal.commit(cid, note("a decision made by another instance"))

    assert await journal_length(store, cid) == 1


# --- compare-and-sets ----------------------------------------------------------------


def plan_request(request_id: str = "req1", **times: datetime) -> PendingRequest:
    return PlanApproval(id=request_id, tool_use_id="toolu_plan", plan_version=1, **times)


async def open_request(store: Store, cid: str) -> PendingRequest:
    request = plan_request()
    await store.journal.commit(
        cid,
        Change(open_request=request, status=lifecycle.waiting(lifecycle.WaitKind.PLAN_APPROVAL)),
    )
    return request


def decision(by: Person, words: str) -> Change:
    verdict = Approved() if words == "approve" else Rejected()
    return Change(
        entries=(UserText(author=by, text=words, role="answer"),),
        resolve=(
            RequestResolution(
                request_id="req1", state=RequestState.DECIDED, verdict=verdict, by=by
            ),
        ),
        status=lifecycle.RUNNING,
    )


async def test_the_first_of_two_racing_decisions_wins_and_the_second_writes_nothing(
    store: Store,
) -> None:
    cid = await new_conversation(store)
    await open_request(store, cid)

    results = await asyncio.gather(
        store.journal.commit(cid, decision(ALICE, "approve")),
        store.journal.commit(cid, decision(BOB, "reject")),
        return_exceptions=True,
    )

    assert [type(r) for r in results] == [Committed, RequestConflict]
    snap = await store.journal.load(cid)
    (request,) = snap.requests
    assert (request.state, request.verdict, request.decided_by) == (
        RequestState.DECIDED,
        Approved(),
        ALICE,
    )
    assert [r.entry.text for r in snap.journal if isinstance(r.entry, UserText)] == ["approve"]


async def test_a_decision_on_a_request_that_never_existed_is_a_conflict(store: Store) -> None:
    cid = await new_conversation(store)

    with pytest.raises(RequestConflict):
        await store.journal.commit(cid, decision(ALICE, "approve"))

    assert await journal_length(store, cid) == 0


async def test_a_gated_call_decided_meanwhile_refuses_the_change_that_waited_on_it(
    store: Store,
) -> None:
    cid = await new_conversation(store)
    call = ToolCall(id="toolu_1", name="run_command", input={"command": "rm -rf build"})
    record = gated()
    await store.journal.commit(
        cid, Change(entries=(AssistantTurn(tool_calls=(call,)),), tool_calls=(record,))
    )
    approved = record.model_copy(update={"state": ToolState.APPROVED})
    await store.journal.commit(cid, Change(tool_calls=(approved,)))

    with pytest.raises(RequestConflict):
        await store.journal.commit(
            cid,
            Change(
                status=lifecycle.waiting(lifecycle.WaitKind.TOOL_APPROVAL),
                guard_pending=("toolu_1",),
            ),
        )
    with pytest.raises(RequestConflict):  # a call that was never recorded
        await store.journal.commit(cid, Change(guard_pending=("toolu_unknown",)))

    snap = await store.journal.load(cid)
    assert snap.status.lifecycle is lifecycle.Lifecycle.IDLE
    assert snap.tool_calls["toolu_1"].state is ToolState.APPROVED


# --- threads -------------------------------------------------------------------------------


async def test_a_conversation_is_found_by_its_thread_and_its_id(store: Store) -> None:
    cid = await new_conversation(store)

    info = await store.threads.info(cid)
    assert (info.id, info.binding, info.requester) == (cid, THREAD, ALICE)
    assert info.status.lifecycle is lifecycle.Lifecycle.IDLE
    assert await store.threads.find(cid) == info
    in_thread = THREAD.model_copy(update={"message": "1.5", "user": "U0BOB00001"})
    assert await store.threads.find_by_thread(in_thread) == info
    assert await store.threads.find_by_thread(THREAD.model_copy(update={"thread": None})) is None
    assert await store.threads.find_by_thread(THREAD.model_copy(update={"thread": "9.9"})) is None
    other_team = THREAD.model_copy(update={"workspace": "T2"})
    assert await store.threads.find_by_thread(other_team) is None


async def test_a_thread_s_parent_channel_is_kept_but_not_needed_to_find_it(store: Store) -> None:
    in_thread = THREAD.model_copy(update={"platform": "discord", "channel": "9", "thread": "9"})
    cid = await store.threads.open_conversation(
        delivery_key="Ev1",
        binding=in_thread.model_copy(update={"parent": "7"}),
        requester=ALICE,
        workspace_root=Path("workspaces"),
        position="planning",
    )
    assert cid is not None
    assert (await store.threads.info(cid)).binding.parent == "7"
    found = await store.threads.find_by_thread(in_thread)  # an event without the parent
    assert found is not None and found.id == cid and found.binding.home == "7"


async def test_active_running_and_every_conversation_in_their_order(store: Store) -> None:
    first = await new_conversation(store, "Ev1", thread="1.0")
    second = await new_conversation(store, "Ev2", thread="2.0")
    third = await new_conversation(store, "Ev3", thread="3.0", channel="C2")
    done = await new_conversation(store, "Ev4", thread="4.0")
    await store.journal.commit(third, Change(status=lifecycle.RUNNING))
    await store.journal.commit(first, Change(status=lifecycle.RUNNING))
    await store.journal.commit(
        second, Change(status=lifecycle.waiting(lifecycle.WaitKind.QUESTION))
    )
    await store.journal.commit(done, Change(status=lifecycle.DONE))

    active = await store.threads.active(platform="slack")
    assert [c.id for c in active] == [first, second, third]
    in_c1 = await store.threads.active(platform="slack", workspace="T1", channel="C1")
    assert [c.id for c in in_c1] == [first, second]
    assert await store.threads.active(platform="slack", workspace="T2") == []
    assert await store.threads.active(platform="discord") == []
    assert await store.threads.running() == [third, first]  # least recently changed first
    everything = await store.threads.conversations()
    assert [c.id for c in everything] == [first, second, third, done]
    assert str(everything[1].status) == "waiting(question)"


async def test_a_persons_conversations_are_counted_for_the_limits(store: Store) -> None:
    before = datetime.now(UTC) - timedelta(minutes=5)
    first = await new_conversation(store, "Ev1", thread="1.0")
    second = await new_conversation(store, "Ev2", thread="2.0")
    await new_conversation(store, "Ev3", thread="3.0", channel="C2")
    await store.journal.commit(first, Change(status=lifecycle.RUNNING))
    await store.journal.commit(
        second, Change(status=lifecycle.waiting(lifecycle.WaitKind.QUESTION))
    )

    mine = await store.threads.started_by(platform="slack", requester_id=ALICE.id, since=before)
    assert mine == (2, 3)  # running and waiting; every one opened in the last five minutes
    later = datetime.now(UTC) + timedelta(minutes=5)
    assert await store.threads.started_by(platform="slack", requester_id=ALICE.id, since=later) == (
        2,
        0,
    )
    await store.journal.commit(first, Change(status=lifecycle.DONE))
    assert (await store.threads.started_by(platform="slack", requester_id=ALICE.id, since=before))[
        0
    ] == 1
    assert await store.threads.started_by(
        platform="slack", requester_id="U0SOMEONE", since=before
    ) == (0, 0)
    assert await store.threads.started_by(
        platform="discord", requester_id=ALICE.id, since=before
    ) == (0, 0)


async def test_ended_conversations_are_listed_by_when_they_ended(store: Store) -> None:
    done = await new_conversation(store, "Ev1", thread="1.0")
    failed = await new_conversation(store, "Ev2", thread="2.0")
    waiting = await new_conversation(store, "Ev3", thread="3.0")
    await new_conversation(store, "Ev4", thread="4.0")  # idle: never ran
    await store.journal.commit(done, Change(status=lifecycle.DONE))
    await store.journal.commit(failed, Change(status=lifecycle.FAILED))
    await store.journal.commit(
        waiting, Change(status=lifecycle.waiting(lifecycle.WaitKind.QUESTION))
    )
    soon = datetime.now(UTC) + timedelta(minutes=5)

    ended = await store.threads.ended_between(None, soon)
    assert [cid for cid, _ in ended] == [done, failed]
    assert all(path.endswith(cid) for cid, path in ended)
    assert await store.threads.ended_between(soon, soon + timedelta(minutes=5)) == []
    past = datetime.now(UTC) - timedelta(minutes=5)
    assert await store.threads.ended_between(None, past) == []


@pytest.mark.parametrize("held", [False, True], ids=["ids", "rows held"])
async def test_a_bot_message_leads_to_its_request_or_its_conversation(
    store: Store, held: bool
) -> None:
    """Marked sent by id (the store finds the request posts) or with the rows the
    deliverer holds (nothing read): the same links."""
    cid = await new_conversation(store)
    await store.journal.commit(cid, Change(open_request=plan_request()))
    plan, notice, edit = await enqueued(
        store,
        cid,
        posted("📋 Plan (v1)", "req1"),
        posted("⏳ working"),
        Outgoing(UpdateMessage(ref=THREAD, text="edited"), purpose="closed", request_id="req1"),
    )
    assert await store.threads.find_by_message("slack", "C1", "1.10") is None
    records = {r.id: r.pending_send() for r in await store.outbox.rows(cid)}

    async def mark_sent(row_id: int, message_id: str) -> None:
        rows = [records[row_id]] if held else None
        await store.outbox.mark_sent([row_id], message_id, rows=rows)

    await mark_sent(plan, "1.10")
    await mark_sent(notice, "1.11")
    await mark_sent(edit, "1.99")  # an edit is not the request's own post
    await mark_sent(plan, "1.12")  # sent already: neither the row nor the link changes

    assert await store.threads.find_by_message("slack", "C1", "1.12") is None
    found = await store.threads.find_by_message("slack", "C1", "1.10")
    assert found is not None and (found.conversation_id, found.request_id) == (cid, "req1")
    found = await store.threads.find_by_message("slack", "C1", "1.11")
    assert found is not None and (found.conversation_id, found.request_id) == (cid, None)
    assert await store.threads.find_by_message("slack", "C2", "1.10") is None
    assert await store.threads.find_by_message("discord", "C1", "1.10") is None


# --- the inbox -----------------------------------------------------------------------------


async def test_a_delivery_key_is_taken_once(store: Store) -> None:
    cid = await new_conversation(store, key="Ev-mention")

    assert (
        await store.threads.open_conversation(
            delivery_key="Ev-mention",
            binding=THREAD,  # the same mention delivered again
            requester=BOB,
            workspace_root=Path("workspaces"),
            position="planning",
        )
        is None
    )
    assert await store.inbox.record_delivery("Ev-reply", cid) is True
    assert await store.inbox.record_delivery("Ev-reply", cid) is False
    assert await store.inbox.record_delivery("Ev-mention") is False
    racing = await asyncio.gather(*(store.inbox.record_delivery("Ev-race", cid) for _ in range(5)))
    assert sorted(racing) == [False, False, False, False, True]
    assert [c.id for c in await store.threads.conversations()] == [cid]


async def test_kept_events_wait_in_the_inbox_until_a_change_handles_them(store: Store) -> None:
    cid = await new_conversation(store)
    first, second = {"kind": "first"}, {"kind": "second"}
    assert await store.inbox.record_delivery("Ev-a", cid, first)
    assert await store.inbox.record_delivery("Ev-dedupe-only", cid)
    assert await store.inbox.record_delivery("Ev-b", None, second)

    assert await store.inbox.unhandled() == [("Ev-a", cid, first), ("Ev-b", "", second)]
    await store.journal.commit(cid, Change(handled=("Ev-a", "Ev-unknown")))
    assert await store.inbox.unhandled() == [("Ev-b", "", second)]


async def test_a_kept_reply_keeps_the_busy_mode_its_acknowledgement_told(store: Store) -> None:
    """What a reply sent while a run worked became is stored with it, for a restart
    (docs/architecture.md, "What a person sees"); a reply no mode was decided for has none."""
    cid = await new_conversation(store)
    assert await store.inbox.record_delivery("Ev-queued", cid, {"kind": "queued"})
    assert await store.inbox.record_delivery("Ev-plain", cid, {"kind": "plain"})
    await store.inbox.keep_busy_mode("Ev-queued", "queue")
    await store.inbox.keep_busy_mode("Ev-never-recorded", "interrupt")  # changes nothing

    assert await store.inbox.busy_mode("Ev-queued") == "queue"
    assert await store.inbox.busy_mode("Ev-plain") is None
    assert await store.inbox.busy_mode("Ev-never-recorded") is None
    await store.inbox.keep_busy_mode("Ev-plain", "interrupt")
    assert await store.inbox.busy_mode("Ev-plain") == "interrupt"
    assert [key for key, _, _ in await store.inbox.unhandled()] == ["Ev-queued", "Ev-plain"]


# --- the outbox ----------------------------------------------------------------------------


async def test_pending_rows_keep_their_order_per_conversation(store: Store) -> None:
    assert await store.outbox.last_outbox_id() == 0
    first = await new_conversation(store)
    second = await new_conversation(store, "Ev2", thread="2.0", channel="C2")
    [a1] = await enqueued(store, first, posted("note 1", purpose="note"))
    [b1] = await enqueued(store, second, posted("answer", channel="C2"))
    a2, a3 = await enqueued(store, first, posted("note 2", purpose="note"), posted("plan"))

    assert a1 < b1 < a2 < a3 == await store.outbox.last_outbox_id()
    assert await store.outbox.pending_conversations(10) == [(first, True), (second, True)]
    assert await store.outbox.pending_conversations(1) == [(first, True)]
    rows = await store.outbox.pending_rows(first)
    assert [(r.id, r.conversation_id, r.purpose) for r in rows] == [
        (a1, first, "note"),
        (a2, first, "note"),
        (a3, first, "milestone"),
    ]
    assert isinstance(rows[0].action, PostReply) and rows[0].action.text == "note 1"
    assert [r.id for r in await store.outbox.pending_rows(first, after=a1, limit=1)] == [a2]
    assert await store.outbox.has_pending_milestone(first, after=a1)
    assert not await store.outbox.has_pending_milestone(first, after=a3)
    assert await store.outbox.has_pending_in("slack", "C2", up_to=b1)
    assert not await store.outbox.has_pending_in("slack", "C2", up_to=b1 - 1)
    assert not await store.outbox.has_pending_in("discord", "C2", up_to=a3)

    await store.outbox.mark_sent([a3], "1.20")
    assert await store.outbox.pending_conversations(10) == [(first, False), (second, True)]
    assert await store.outbox.still_pending([a1, a3, b1, 999]) == {a1, b1}
    assert await store.outbox.still_pending([]) == set()


async def test_a_report_takes_the_place_of_the_row_it_tells_about(store: Store) -> None:
    cid = await new_conversation(store)
    other = await new_conversation(store, "Ev2", thread="2.0")
    failed, later, held = await enqueued(
        store, cid, posted("answer"), posted("later"), posted("held", purpose="note")
    )
    [elsewhere] = await enqueued(store, other, posted("another thread"))
    assert await store.outbox.fail_for_good(
        cid, [failed], "gone", posted("⚠️ not posted", purpose="report")
    )
    report = await store.outbox.last_outbox_id()
    assert report > elsewhere > held

    rows = await store.outbox.pending_rows(cid)
    assert [(r.id, r.purpose) for r in rows] == [
        (report, "report"),
        (later, "milestone"),
        (held, "note"),
    ]
    assert [r.id for r in await store.outbox.pending_rows(cid, limit=2)] == [report, later]
    assert [r.id for r in await store.outbox.pending_rows(cid, after=later)] == [report, held]
    assert [r.id for r in await store.outbox.pending_rows(other)] == [elsewhere]


async def test_rows_change_state_once_and_a_failure_is_reported_once(store: Store) -> None:
    cid = await new_conversation(store)
    sent, dropped, failed, retried = await enqueued(
        store, cid, posted("sent"), posted("dropped"), posted("failed"), posted("retried")
    )

    await store.outbox.mark_sent([sent], "1.10")
    await store.outbox.settle_unsent([dropped, sent], "nothing to edit")
    assert await store.outbox.record_failure(retried, "timeout") == 1
    assert await store.outbox.record_failure(retried, "x" * 3000) == 2
    assert await store.outbox.record_failure(12345, "no such row") == 0
    assert await store.outbox.fail_for_good(cid, [failed, sent], "gone", posted("⚠️ report"))
    assert not await store.outbox.fail_for_good(cid, [failed], "gone", posted("⚠️ again"))
    await store.outbox.mark_sent([dropped, failed], "1.11")  # settled rows stay as they are

    rows = {r.action.text: r for r in await store.outbox.rows(cid)}  # type: ignore[union-attr]
    assert [(text, r.state) for text, r in rows.items()] == [
        ("sent", "sent"),
        ("dropped", "dropped"),
        ("failed", "failed"),
        ("retried", "pending"),
        ("⚠️ report", "pending"),
    ]
    assert (rows["sent"].platform_message_id, rows["sent"].last_error) == ("1.10", None)
    assert rows["dropped"].last_error == "nothing to edit"
    assert rows["failed"].last_error == "gone"
    assert rows["retried"].attempts == 2 and rows["retried"].last_error == "x" * 2000
    assert [r.id for r in await store.outbox.rows()] == sorted(r.id for r in rows.values())


async def test_a_request_message_is_its_first_post_and_its_link_once_sent(store: Store) -> None:
    cid = await new_conversation(store)
    await store.journal.commit(cid, Change(open_request=plan_request()))
    plan = posted("📋 Plan (v1)", "req1")
    edit = Outgoing(UpdateMessage(ref=THREAD, text="edited"), purpose="closed", request_id="req1")
    [_, plan_id] = await enqueued(store, cid, edit, plan)  # the edit first: not a post

    waiting = await store.outbox.request_message(cid, "req1")
    assert waiting is not None and (waiting.action, waiting.state, waiting.message_id) == (
        plan.action,
        "pending",
        None,
    )
    await store.outbox.mark_sent([plan_id], "1.10")
    sent = await store.outbox.request_message(cid, "req1")
    assert sent is not None and (sent.state, sent.message_id) == ("sent", "1.10")
    assert await store.outbox.request_message(cid, "req-unknown") is None


async def test_marks_held_back_are_written_with_the_next_each_with_its_own_message(
    store: Store,
) -> None:
    """The deliverer holds back the marks of sends that change nothing when repeated
    (``earlier``): they go with the next mark, or alone, each keeping its message id."""
    cid = await new_conversation(store)
    await store.journal.commit(cid, Change(open_request=plan_request()))
    status = Outgoing(SetSessionStatus(ref=THREAD, status="processing"), purpose="session")
    edit = Outgoing(UpdateMessage(ref=THREAD, text="edited"), purpose="closed", request_id="req1")
    ids = await enqueued(store, cid, status, edit, posted("📋 Plan (v1)", "req1"), status)
    [status_id, edit_id, plan_id, last_id] = ids
    rows = {r.id: r.pending_send() for r in await store.outbox.rows(cid)}

    held = {status_id: None, edit_id: "1.09"}
    await store.outbox.mark_sent([plan_id], "1.10", rows=[rows[plan_id]], earlier=held)
    await store.outbox.mark_sent([], None, rows=[rows[last_id]], earlier={last_id: None})

    stored = {r.id: (r.state, r.platform_message_id) for r in await store.outbox.rows(cid)}
    assert stored == {
        status_id: ("sent", None),
        edit_id: ("sent", "1.09"),
        plan_id: ("sent", "1.10"),
        last_id: ("sent", None),
    }
    found = await store.threads.find_by_message("slack", "C1", "1.10")
    assert found is not None and found.request_id == "req1"  # the post, linked


# --- stop requests -------------------------------------------------------------------


async def test_a_stop_request_is_written_only_while_its_run_is_held(store: Store) -> None:
    cid = await new_conversation(store)
    lease = await store.leases.acquire_lease(cid, "host-a:1", ttl=60)
    assert lease is not None

    assert await store.stops.request_stop(cid, holder="host-a:1", epoch=lease.epoch, by=BOB)
    assert not await store.stops.request_stop(cid, holder="host-a:1", epoch=lease.epoch + 1, by=BOB)
    assert not await store.stops.request_stop(cid, holder="host-b:2", epoch=lease.epoch, by=BOB)
    assert not await store.stops.request_stop("nobody", holder="host-a:1", epoch=1, by=BOB)
    [stop] = await store.stops.stop_requests({cid})
    assert (stop.conversation_id, stop.lease_epoch, stop.by) == (cid, lease.epoch, BOB)
    assert await store.stops.stop_requests({"another"}) == []

    assert await store.leases.release_lease(lease)
    assert not await store.stops.request_stop(cid, holder="host-a:1", epoch=lease.epoch, by=BOB)
    assert await store.stops.stop_requests_handled(cid) == 1
    assert await store.stops.stop_requests_handled(cid) == 0
    assert await store.stops.stop_requests({cid}) == []


async def test_a_stop_request_keeps_the_run_it_was_aimed_at(store: Store) -> None:
    cid = await new_conversation(store)
    lease = await store.leases.acquire_lease(cid, "host-a:1", ttl=60)
    assert lease is not None

    assert await store.stops.request_stop(cid, holder="host-a:1", epoch=lease.epoch, by=BOB, run=7)
    assert await store.stops.request_stop(cid, holder="host-a:1", epoch=lease.epoch, by=BOB)

    aimed, unaimed = await store.stops.stop_requests({cid})
    assert (aimed.run, unaimed.run) == (7, None)  # None: aimed at whatever runs
    assert await store.stops.stop_requests({cid}, orphans=True) == [aimed, unaimed]


async def test_a_stop_request_whose_holder_is_gone_is_an_orphan(store: Store) -> None:
    cid = await new_conversation(store)
    lease = await store.leases.acquire_lease(cid, "host-a:1", ttl=0.2)
    assert lease is not None
    assert await store.stops.request_stop(cid, holder="host-a:1", epoch=lease.epoch, by=BOB)
    assert await store.stops.stop_requests(set(), orphans=True) == []  # its holder is alive

    await asyncio.sleep(0.3)  # the holder died: its lease lapsed

    (orphan,) = await store.stops.stop_requests(set(), orphans=True)
    assert (orphan.conversation_id, orphan.lease_epoch) == (cid, lease.epoch)
    assert await store.stops.stop_requests({cid}, orphans=True) == [orphan]  # listed once


# --- requests ------------------------------------------------------------------------------


async def test_a_request_s_state_and_conversation(store: Store) -> None:
    cid = await new_conversation(store)
    assert await store.requests.request_state("req1") is None
    assert await store.requests.request_conversation("req1") is None

    await open_request(store, cid)
    assert await store.requests.request_state("req1") is RequestState.OPEN
    assert await store.requests.request_conversation("req1") == cid
    await store.journal.commit(cid, decision(ALICE, "approve"))
    assert await store.requests.request_state("req1") is RequestState.DECIDED


async def test_requests_come_due_for_one_reminder_then_for_expiry(store: Store) -> None:
    cid = await new_conversation(store)
    now = datetime.now(UTC)
    hour = timedelta(hours=1)
    timed = plan_request("req1", remind_at=now + hour, expires_at=now + 2 * hour)
    decided = plan_request("req2", remind_at=now, expires_at=now)
    untimed = plan_request("req3")
    for request in (timed, decided, untimed):
        await store.journal.commit(cid, Change(open_request=request))
    await store.journal.commit(
        cid, Change(resolve=(RequestResolution(request_id="req2", state=RequestState.DECIDED),))
    )

    assert await store.requests.due_requests(now) == []
    [remind] = await store.requests.due_requests(now + hour)
    assert (remind.conversation_id, remind.request_id, remind.expired) == (cid, "req1", False)
    assert await store.requests.mark_reminded("req1", now + hour)
    assert not await store.requests.mark_reminded("req1", now + hour)  # once
    assert not await store.requests.mark_reminded("req-unknown", now)
    assert await store.requests.due_requests(now + hour) == []
    [expiry] = await store.requests.due_requests(now + 2 * hour)
    assert (expiry.request_id, expiry.expired) == ("req1", True)


# --- retention -----------------------------------------------------------------------------


async def test_pruning_keeps_what_must_stay_and_ids_are_never_reused(store: Store) -> None:
    cid = await new_conversation(store, key="Ev-mention")
    await store.journal.commit(cid, Change(open_request=plan_request("req-open")))
    await store.journal.commit(cid, Change(open_request=plan_request("req-closed")))
    await store.journal.commit(
        cid,
        Change(resolve=(RequestResolution(request_id="req-closed", state=RequestState.DECIDED),)),
    )
    await store.inbox.record_delivery("Ev-dedupe", cid)
    await store.inbox.record_delivery("Ev-handled", cid, {"kind": "handled"})
    await store.inbox.record_delivery("Ev-unhandled", cid, {"kind": "waiting"})
    await store.journal.commit(cid, Change(handled=("Ev-handled",)))
    ids = await enqueued(
        store,
        cid,
        posted("sent"),
        posted("failed"),
        posted("dropped"),
        posted("pending"),
        posted("open request", "req-open"),
        posted("closed request", "req-closed"),
        posted("newest"),
    )
    sent, failed, dropped, _pending, of_open, of_closed, newest = ids
    await store.outbox.mark_sent([sent, of_open, of_closed, newest], "1.10")
    await store.outbox.fail_for_good(cid, [failed], "gone")
    await store.outbox.settle_unsent([dropped], "nothing to edit")
    snap = await store.journal.load(cid)

    assert await store.retention.prune(datetime.now(UTC) - timedelta(days=1)) == Pruned(0, 0)
    pruned = await store.retention.prune(datetime.now(UTC) + timedelta(seconds=1), batch=2)

    assert (pruned.outbox, pruned.deliveries) == (4, 3)  # sent, failed, dropped, closed request
    kept = [r.action.text for r in await store.outbox.rows(cid)]  # type: ignore[union-attr]
    assert kept == ["pending", "open request", "newest"]
    assert [key for key, _, _ in await store.inbox.unhandled()] == ["Ev-unhandled"]
    assert await store.inbox.record_delivery("Ev-dedupe")  # its key went with the retention
    assert await store.inbox.record_delivery("Ev-mention")  # and the mention's, once handled
    assert not await store.inbox.record_delivery("Ev-unhandled")
    assert await store.journal.load(cid) == snap  # the journal and requests stay
    [after] = await enqueued(store, cid, posted("after the prune"))
    assert after > newest


# --- coverage ------------------------------------------------------------------------------


INTERFACES: dict[str, type[Any]] = {
    "journal": Journal,
    "threads": interfaces.Threads,
    "inbox": interfaces.Inbox,
    "outbox": interfaces.Outbox,
    "leases": interfaces.LeaseStore,
    "stops": interfaces.StopRequests,
    "requests": interfaces.Requests,
    "retention": interfaces.Retention,
    "usage": Usage,
    "outputs": OutputStore,
    "claims": DeliveryClaims,
    "wakeups": Wakeups,
    "health": StoreHealth,
    "schedules": Schedules,
    "forks": Forks,
    "slots": SlotStore,
    "feedback": Feedback,
    "audit": AuditTrail,
    "installations": Installations,
    "oauth_states": OAuthStates,
    "approvals": ApprovalRules,
    "operator_sessions": OperatorSessions,
    "inspection": Inspection,
}


ELSEWHERE = (
    "test_store_usage.py",
    "test_delivery_claims.py",
    "test_wakeups.py",
    "test_store_health.py",
    "test_schedules.py",
    "test_forks_store.py",
    "test_slots_store.py",
    "test_feedback_store.py",
    "test_audit_store.py",
    "test_installations_store.py",
    "test_approval_rules_store.py",
    "test_operator_sessions_store.py",
    "test_inspection_store.py",
)
"""Modules holding the contract of ``usage`` and ``outputs``, of ``claims`` (beside the
deliverer's use of it), of ``wakeups``, of ``health``, of ``schedules``, of ``slots``, of
``feedback``, of ``audit``, of ``forks``, of ``installations`` and ``oauth_states``, of
``approvals``, of ``operator_sessions`` and of ``inspection``."""


def test_the_contract_calls_every_method_of_every_interface() -> None:
    """A method added to an interface needs a contract test here (or in one of
    :data:`ELSEWHERE`), for every backend."""
    here = Path(__file__)
    trees = [
        ast.parse(p.read_text(encoding="utf-8")) for p in (here, *map(here.with_name, ELSEWHERE))
    ]
    called = {
        (node.value.attr, node.attr)
        for tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute)
        and isinstance(node.value.value, ast.Name)
        and node.value.value.id == "store"
    }
    wanted = {
        (part, name)
        for part, protocol in INTERFACES.items()
        for name in vars(protocol)
        if not name.startswith("_") and callable(vars(protocol)[name])
    }
    assert set(INTERFACES) == {
        name
        for name in vars(interfaces.Store)
        if isinstance(vars(interfaces.Store)[name], property)
    }
    assert sorted(wanted - called) == []
