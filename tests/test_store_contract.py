"""The store's contract: fenced leases and every compare-and-set, on each store backend.

These are the promises the rest of threadbot builds on, stated against the store's
public methods only, so a new backend (or a rewrite of the SQL) runs the same
tests: a run's commit is refused once another process took its conversation over
(and writes nothing), a lease is acquired with a new epoch and renewed with the
same one, the first of two decisions wins, a gated call decided meanwhile refuses
the change that waited on it, and a delivery key is taken once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text as sql

from conversations import migrate
from conversations.events import PlatformRef
from conversations.render import render_event
from conversations.store import Store
from conversations.store.leases import Leases
from conversations.store.store import create_engine
from core import lifecycle
from core.errors import LeaseLost, RequestConflict
from core.journal import (
    AssistantTurn,
    Change,
    PendingRequest,
    Person,
    RequestKind,
    RequestResolution,
    RequestState,
    ToolCall,
    ToolCallRecord,
    ToolState,
    UserText,
)
from core.run_events import ProgressNote

ALICE = Person(id="U0ALICE001", name="alice")
BOB = Person(id="U0BOB00001", name="bob")


@pytest.fixture(params=["sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A migrated store of each backend (SQLite, the embedded default, for now)."""
    assert request.param == "sqlite"
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'contract.db'}")
    await migrate.upgrade(engine)
    store = Store(engine=engine, render=render_event)
    yield store
    await store.close()


async def new_conversation(store: Store, key: str = "Ev1") -> str:
    conversation_id = await store.open_conversation(
        delivery_key=key,
        binding=PlatformRef(platform="slack", workspace="T1", channel="C1", thread="1.0"),
        requester=ALICE,
        workspace_root=Path("workspaces"),
        position="planning",
    )
    assert conversation_id is not None
    return conversation_id


async def count(store: Store, table: str, conversation_id: str) -> int:
    async with store.engine.connect() as connection:
        result = await connection.execute(
            sql(f"select count(*) from {table} where conversation_id = :c"),
            {"c": conversation_id},
        )
        return int(result.scalar_one())


def note(text: str) -> Change:
    return Change(
        entries=(UserText(author=ALICE, text=text, role="note"),),
        events=(ProgressNote(text=text),),
    )


# --- leases ---------------------------------------------------------------------------


async def test_acquiring_a_lease_raises_its_epoch_and_renewing_keeps_it(store: Store) -> None:
    cid = await new_conversation(store)
    first = await store.acquire_lease(cid, "host-a:1", ttl=60)
    assert first is not None and first.epoch == 1

    assert await store.renew_leases([first], ttl=60) == {cid}
    assert await store.release_lease(first)
    again = await store.acquire_lease(cid, "host-a:1", ttl=60)
    assert again is not None and again.epoch == 2  # acquired from free: a new epoch


async def test_a_live_lease_is_not_taken_but_an_expired_or_dead_one_is(store: Store) -> None:
    cid = await new_conversation(store)
    now = datetime.now(UTC)
    held = await store.acquire_lease(cid, "host-a:1", ttl=60, now=now)
    assert held is not None

    assert await store.acquire_lease(cid, "host-b:2", ttl=60, now=now) is None
    dead = await store.acquire_lease(cid, "host-b:2", ttl=60, now=now, dead="host-a:1")
    assert dead is not None and dead.epoch == held.epoch + 1
    later = now + timedelta(seconds=61)
    expired = await store.acquire_lease(cid, "host-c:3", ttl=60, now=later)
    assert expired is not None and expired.epoch == dead.epoch + 1
    assert await store.lease_owner(cid) == "host-c:3"


async def test_a_run_commit_after_a_takeover_is_refused_and_writes_nothing(store: Store) -> None:
    cid = await new_conversation(store)
    paused = Leases(store=store, owner="host-a:1", ttl=0.2)
    async with paused.held(cid) as lease:
        await store.commit(cid, note("before the pause"))  # holds: written
        await asyncio.sleep(0.3)  # paused past the lease's expiry
        taken = await store.acquire_lease(cid, "host-b:2", ttl=60)
        assert taken is not None and taken.epoch == lease.epoch + 1
        journal, outbox = await count(store, "journal", cid), await count(store, "outbox", cid)

        with pytest.raises(LeaseLost):
            await store.commit(
                cid, note("after the takeover").model_copy(update={"status": lifecycle.DONE})
            )

        assert await count(store, "journal", cid) == journal
        assert await count(store, "outbox", cid) == outbox
        assert (await store.load(cid)).status.lifecycle is lifecycle.Lifecycle.IDLE
    assert await store.lease_owner(cid) == "host-b:2"  # the stale holder's release did nothing


async def test_renewal_finds_a_lease_lost_to_a_takeover(store: Store) -> None:
    cid = await new_conversation(store)
    leases = Leases(store=store, owner="host-a:1", ttl=0.2)
    async with leases.held(cid):
        await asyncio.sleep(0.3)
        assert await store.acquire_lease(cid, "host-b:2", ttl=60) is not None
        assert await leases.renew_all() == {cid}


async def test_commits_outside_a_run_are_not_fenced(store: Store) -> None:
    """Decisions, stops and notices are guarded by their compare-and-set, not the lease."""
    cid = await new_conversation(store)
    assert await store.acquire_lease(cid, "host-b:2", ttl=60) is not None

    await store.commit(cid, note("a decision made by another instance"))

    assert await count(store, "journal", cid) == 1


# --- compare-and-sets ----------------------------------------------------------------


async def open_request(store: Store, cid: str) -> PendingRequest:
    request = PendingRequest(id="req1", kind=RequestKind.PLAN_APPROVAL, plan_version=1)
    await store.commit(
        cid,
        Change(open_request=request, status=lifecycle.waiting(lifecycle.WaitKind.PLAN_APPROVAL)),
    )
    return request


def decision(by: Person, verdict: str) -> Change:
    return Change(
        entries=(UserText(author=by, text=verdict, role="answer"),),
        resolve=(
            RequestResolution(
                request_id="req1", state=RequestState.DECIDED, decision=verdict, by=by
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
        store.commit(cid, decision(ALICE, "approve")),
        store.commit(cid, decision(BOB, "reject")),
        return_exceptions=True,
    )

    assert [type(r) for r in results] == [list, RequestConflict]
    snap = await store.load(cid)
    (request,) = snap.requests
    assert (request.state, request.decision, request.decided_by) == (
        RequestState.DECIDED,
        "approve",
        ALICE,
    )
    assert [r.entry.text for r in snap.journal if isinstance(r.entry, UserText)] == ["approve"]


async def test_a_gated_call_decided_meanwhile_refuses_the_change_that_waited_on_it(
    store: Store,
) -> None:
    cid = await new_conversation(store)
    call = ToolCall(id="toolu_1", name="run_command", input={"command": "rm -rf build"})
    record = ToolCallRecord(
        tool_use_id="toolu_1",
        name="run_command",
        input=call.input,
        read_only=False,
        state=ToolState.PENDING_APPROVAL,
        turn_seq=1,
        index=0,
    )
    await store.commit(
        cid, Change(entries=(AssistantTurn(tool_calls=(call,)),), tool_calls=(record,))
    )
    approved = record.model_copy(update={"state": ToolState.APPROVED})
    await store.commit(cid, Change(tool_calls=(approved,)))

    with pytest.raises(RequestConflict):
        await store.commit(
            cid,
            Change(
                status=lifecycle.waiting(lifecycle.WaitKind.TOOL_APPROVAL),
                guard_pending=("toolu_1",),
            ),
        )

    snap = await store.load(cid)
    assert snap.status.lifecycle is lifecycle.Lifecycle.IDLE
    assert snap.tool_calls["toolu_1"].state is ToolState.APPROVED


async def test_a_delivery_key_is_taken_once(store: Store) -> None:
    cid = await new_conversation(store, key="Ev-mention")

    assert (
        await store.open_conversation(
            delivery_key="Ev-mention",
            binding=PlatformRef(platform="slack", workspace="T1", channel="C1", thread="2.0"),
            requester=BOB,
            workspace_root=Path("workspaces"),
            position="planning",
        )
        is None
    )
    assert await store.record_delivery("Ev-reply", cid) is True
    assert await store.record_delivery("Ev-reply", cid) is False
    racing = await asyncio.gather(*(store.record_delivery("Ev-race", cid) for _ in range(5)))
    assert sorted(racing) == [False, False, False, False, True]


# --- stop requests -------------------------------------------------------------------


async def test_a_stop_request_is_written_only_while_its_run_is_held(store: Store) -> None:
    cid = await new_conversation(store)
    lease = await store.acquire_lease(cid, "host-a:1", ttl=60)
    assert lease is not None

    assert await store.request_stop(cid, holder="host-a:1", epoch=lease.epoch, by=BOB)
    assert not await store.request_stop(cid, holder="host-a:1", epoch=lease.epoch + 1, by=BOB)
    assert [(r.conversation_id, r.by) for r in await store.stop_requests({cid})] == [(cid, BOB)]
    assert await store.stop_requests({"another"}) == []

    assert await store.release_lease(lease)
    assert not await store.request_stop(cid, holder="host-a:1", epoch=lease.epoch, by=BOB)
    assert await store.stop_requests_handled(cid) == 1
    assert await store.stop_requests({cid}) == []


async def test_a_stop_request_whose_holder_is_gone_is_an_orphan(store: Store) -> None:
    cid = await new_conversation(store)
    lease = await store.acquire_lease(cid, "host-a:1", ttl=0.2)
    assert lease is not None
    assert await store.request_stop(cid, holder="host-a:1", epoch=lease.epoch, by=BOB)
    assert await store.stop_requests(set(), orphans=True) == []  # its holder is alive

    await asyncio.sleep(0.3)  # the holder died: its lease lapsed

    (orphan,) = await store.stop_requests(set(), orphans=True)
    assert (orphan.conversation_id, orphan.lease_epoch) == (cid, lease.epoch)
