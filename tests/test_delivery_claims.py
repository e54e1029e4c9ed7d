"""Delivery claims: the store's ``claims`` contract on each backend, one deliverer's tasks
taking a claim at once, and two deliverers on one store, each sending only the
conversations it holds the claim of.

(docs/architecture.md, "Several instances".) The claims interface's contract lives
here; ``test_store_contract.py`` checks that every method of it is called.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conversations.events import PlatformRef, PostReply, SetSessionStatus
from conversations.outbox import Deliverer
from conversations.outbox._claims import HeldClaims
from conversations.outbox._known import KnownRows
from conversations.render import render_event
from conversations.store import Outgoing, Store
from conversations.store.claims import ClaimLost, holding
from conversations.store.memory import MemoryStore
from core.vocabulary.people import Person
from tests.fakes.clock import VirtualClock
from tests.test_outbox import RecordingSender
from tests.test_store_contract import (
    BACKENDS,
    THREAD,
    enqueued,
    new_conversation,
    opened_store,
    posted,
)

T0 = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A new, empty store of each backend (as in the contract suite)."""
    async with opened_store(request.param, request, tmp_path) as new:
        yield new


# --- the contract ------------------------------------------------------------------------


async def test_a_claim_is_taken_once_until_it_lapses_then_taken_over(store: Store) -> None:
    cid = await new_conversation(store)
    first = await store.claims.claim_delivery(cid, "a:1", ttl=60, now=T0)
    assert first is not None and (first.epoch, first.taken_over) == (1, False)
    assert await store.claims.claim_owner(cid) == "a:1"
    assert await store.claims.claim_delivery(cid, "b:2", ttl=60, now=T0) is None
    assert (
        await store.claims.claim_delivery(cid, "b:2", ttl=60, now=T0 + timedelta(seconds=59))
        is None
    )
    again = await store.claims.claim_delivery(cid, "a:1", ttl=60, now=T0 + timedelta(seconds=30))
    assert again is not None and (again.epoch, again.taken_over) == (2, False)  # renewed
    later = T0 + timedelta(seconds=91)
    taken = await store.claims.claim_delivery(cid, "b:2", ttl=60, now=later)
    assert taken is not None and (taken.owner, taken.epoch, taken.taken_over) == ("b:2", 3, True)
    assert await store.claims.claim_owner(cid) == "b:2"
    # b's process is known to be gone (a process of this host): its claim is taken at once
    assert await store.claims.claim_delivery(cid, "c:3", ttl=60, now=later, dead="x:9") is None
    gone = await store.claims.claim_delivery(cid, "c:3", ttl=60, now=later, dead="b:2")
    assert gone is not None and (gone.owner, gone.epoch, gone.taken_over) == ("c:3", 4, True)
    assert await store.claims.claim_delivery("no-such-conversation", "a:1", ttl=60) is None


async def test_a_conversation_opened_leased_is_claimed_by_its_opener(store: Store) -> None:
    cid = await store.threads.open_conversation(
        delivery_key="ev-open",
        binding=PlatformRef(platform="slack", channel="C1", thread="9.0"),
        requester=Person(id="U1", name="alice"),
        workspace_root=Path("workspaces"),
        position="planning",
        lease=("a:1", 60.0),
    )
    assert cid is not None
    assert await store.claims.claim_owner(cid) == "a:1"
    assert await store.claims.claim_delivery(cid, "b:2", ttl=60) is None


async def test_released_claims_are_free_but_a_claim_taken_over_is_not_released(
    store: Store,
) -> None:
    one, two = (
        await new_conversation(store, "E1", thread="1.0"),
        await new_conversation(store, "E2", thread="2.0"),
    )
    a1 = await store.claims.claim_delivery(one, "a:1", ttl=60, now=T0)
    a2 = await store.claims.claim_delivery(two, "a:1", ttl=60, now=T0)
    assert a1 is not None and a2 is not None
    b2 = await store.claims.claim_delivery(two, "b:2", ttl=60, now=T0 + timedelta(minutes=5))
    assert b2 is not None
    await store.claims.release_claims([a1, a2])
    await store.claims.release_claims([])
    assert await store.claims.claim_owner(one) is None
    assert await store.claims.claim_owner(two) == "b:2"
    taken = await store.claims.claim_delivery(one, "b:2", ttl=60)
    assert taken is not None and not taken.taken_over  # released: nobody may be sending


async def test_a_send_marked_under_a_claim_taken_over_writes_nothing(store: Store) -> None:
    cid = await new_conversation(store)
    [row] = await enqueued(store, cid, posted("hello"))
    [pending] = await store.outbox.pending_rows(cid, after=0, limit=10)
    mine = await store.claims.claim_delivery(cid, "a:1", ttl=60, now=T0)
    assert mine is not None
    theirs = await store.claims.claim_delivery(cid, "b:2", ttl=60, now=T0 + timedelta(minutes=5))
    assert theirs is not None
    with holding(mine), pytest.raises(ClaimLost):
        await store.outbox.mark_sent([row], "1.1", rows=[pending])
    assert [(r.id, r.state) for r in await store.outbox.rows(cid)] == [(row, "pending")]
    with holding(theirs):
        await store.outbox.mark_sent([row], "1.1", rows=[pending])
    assert [(r.id, r.state) for r in await store.outbox.rows(cid)] == [(row, "sent")]


async def test_a_mark_held_back_is_written_under_the_claim_held_when_it_is_written(
    store: Store,
) -> None:
    status = Outgoing(SetSessionStatus(ref=THREAD, status="processing"), purpose="session")
    for taken_over in (False, True):
        cid = await new_conversation(store, f"E{taken_over}", thread=f"{taken_over:d}.0")
        [row] = await enqueued(store, cid, status)
        [pending] = await store.outbox.pending_rows(cid, after=0, limit=10)
        mine = await store.claims.claim_delivery(cid, "a:1", ttl=60, now=T0)
        assert mine is not None
        known = KnownRows(store.outbox)
        with holding(mine):  # the worker's send: its mark held back
            await known.mark_sent([pending], None, later=True)
        later = T0 + timedelta(seconds=30 if not taken_over else 300)
        now = await store.claims.claim_delivery(
            cid, "b:2" if taken_over else "a:1", ttl=60, now=later
        )
        assert now is not None  # renewed by us at a new epoch, or taken over by b
        if taken_over:
            with pytest.raises(ClaimLost):  # fenced: nothing written
                await known.mark_held(cid, mine)
            assert [(r.id, r.state) for r in await store.outbox.rows(cid)] == [(row, "pending")]
        else:
            await known.mark_held(cid, now)  # the claim held now, not the one it was sent under
            assert [(r.id, r.state) for r in await store.outbox.rows(cid)] == [(row, "sent")]


async def test_two_tasks_of_one_deliverer_taking_a_claim_at_once_take_it_at_one_epoch(
    store: Store,
) -> None:
    # A worker and the answer's stream (conversations/outbox/_streams.py) of one process
    # ask at once: a second statement would take the claim again at a new epoch and fence
    # the first's send out.
    cid = await new_conversation(store)
    [row] = await enqueued(store, cid, posted("hello"))
    [pending] = await store.outbox.pending_rows(cid, after=0, limit=10)
    held = HeldClaims(store=store.claims, owner="a:1", ttl=60, clock=VirtualClock())
    one, two = await asyncio.gather(held.take(cid), held.take(cid))
    assert one is not None and two is not None
    assert one.claim == two.claim and one.claim.epoch == 1
    with holding(one.claim):
        await store.outbox.mark_sent([row], "1.1", rows=[pending])
    assert [(r.id, r.state) for r in await store.outbox.rows(cid)] == [(row, "sent")]
    again = await held.take(cid)  # held: no statement
    assert again is not None and again.claim == one.claim and not again.fresh


# --- two deliverers on one store ------------------------------------------------------------


class Instance:
    """One process's deliverer (``owner``) over the shared store, with its own platform."""

    def __init__(self, store: MemoryStore, owner: str, clock: VirtualClock) -> None:
        self.sender = RecordingSender()
        self.told: list[str] = []
        self.deliverer = Deliverer(
            outbox=store.outbox,
            senders={"test": self.sender},
            clock=clock,
            claims=store.claims,
            owner=owner,
            claim_ttl=60.0,
            claimed_elsewhere=self.told.append,
        )


async def test_each_conversation_is_sent_by_the_process_that_holds_its_claim(
    tmp_path: Path,
) -> None:
    wall = [T0]
    store = MemoryStore(render=render_event, clock=lambda: wall[0])
    clock = VirtualClock()
    a, b = Instance(store, "a:1", clock), Instance(store, "b:2", clock)
    ref = PlatformRef(platform="test", channel="c", thread="t")
    cid = await store.threads.open_conversation(
        delivery_key="k",
        binding=ref,
        requester=Person(id="u", name="alice"),
        workspace_root=tmp_path,
        position="executing",
        lease=("a:1", 60.0),
    )
    assert cid is not None
    await store.outbox.enqueue(cid, [Outgoing(PostReply(ref=ref, text="plan"), "milestone")])

    await clock.run(b.deliverer.drain())  # b looks, finds a holds it, leaves it and says so
    assert b.sender.sent == [] and b.told == [cid]
    await clock.run(a.deliverer.drain())
    assert a.sender.texts() == ["plan"]

    # a goes quiet past its claim; b writes the answer and takes the conversation over
    wall[0] += timedelta(minutes=2)
    clock.advance(120)
    await store.outbox.enqueue(cid, [Outgoing(PostReply(ref=ref, text="answer"), "milestone")])
    await clock.run(b.deliverer.drain())
    assert b.sender.texts() == ["answer"]
    assert b.sender.calls[0][2] is True  # taken over: a may have sent it, looked up first
    await clock.run(a.deliverer.drain())
    assert a.sender.texts() == ["plan"]  # nothing twice
    assert {r.state for r in await store.outbox.rows(cid)} == {"sent"}
