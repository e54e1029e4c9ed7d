"""Slots in the store (docs/architecture.md, "Limits and priorities"): the ``slots``
contract on each backend, ``test_store_contract.py`` checking that every method is called.

The contract: a row is granted while every limit it counts under has room, else it
waits, the runs ahead of it counted when its holder looks; freeing a slot grants the
next in order (higher priority first, oldest first within one, a waiting row's
priority rising with its age); a row held back under a full limit holds back those
behind it under that key, and nobody under a key where it has room; a holder that
stops renewing its rows, or a gone process of this host, loses them; and two stores on
one database (two processes) never hold more than the limit between them, however
many ask at once. That the SQL pass, which stops reading early, grants what the rule
grants on any rows: ``tests/test_slot_pass.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conversations.store import Store
from conversations.store.slots import Category, Limits, SlotAsk, SlotState, Standing
from tests.test_store_contract import BACKENDS, opened_store

T0 = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
TTL = 60.0
ONE = Limits(cluster=1)


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A new, empty store of each backend (as in the contract suite)."""
    async with opened_store(request.param, request, tmp_path) as new:
        yield new


def ask(
    cid: str,
    limits: Limits = ONE,
    *,
    user: str = "slack:U1",
    workspace: str = "slack:T1",
    priority: int = 0,
    category: Category = Category.RUN,
) -> SlotAsk:
    return SlotAsk(
        conversation_id=cid,
        category=category,
        limits=limits,
        workspace=workspace,
        user=user,
        priority=priority,
    )


async def asked(
    store: Store,
    what: SlotAsk,
    at: float = 0.0,
    *,
    holder: str = "a:1",
    aging: float | None = None,
    ttl: float = TTL,
) -> Standing:
    """Ask for ``what`` at ``at`` seconds past :data:`T0`; where it stands."""
    passed = await store.slots.ask_slot(
        what, holder=holder, ttl=ttl, aging=aging, now=T0 + timedelta(seconds=at)
    )
    assert passed.standing is not None
    return passed.standing


async def aheads(store: Store, *standings: Standing, at: float = 0.0) -> list[int | None]:
    """The runs ahead of each row, as its holder's look counts them at ``at`` seconds
    past :data:`T0` (0 for a held row)."""
    ids = [s.slot_id for s in standings]
    found = await store.slots.slot_standings(ids, counted=ids, now=T0 + timedelta(seconds=at))
    return [found.of[i].ahead for i in ids]


async def held(store: Store, category: Category = Category.RUN) -> list[str]:
    """The conversations holding a slot of ``category``, in the order they asked."""
    return [
        s.conversation_id for s in await store.slots.slots(category) if s.state is SlotState.HELD
    ]


async def release(store: Store, slot_id: int, at: float = 1.0) -> list[str]:
    """Release ``slot_id``; the conversations the pass granted."""
    passed = await store.slots.release_slot(slot_id, now=T0 + timedelta(seconds=at))
    return [g.conversation_id for g in passed.granted]


# --- granting ----------------------------------------------------------------------------


async def test_a_slot_with_room_is_held_at_once_and_the_next_waits_until_it_is_freed(
    store: Store,
) -> None:
    first = await asked(store, ask("c1"))
    second = await asked(store, ask("c2"), 1)
    third = await asked(store, ask("c3"), 2)
    assert (first.held, first.ahead) == (True, 0)
    assert (second.held, second.ahead) == (False, None)  # an ask counts nothing
    assert (third.held, third.ahead) == (False, None)
    standings = await store.slots.slot_standings(
        [second.slot_id, third.slot_id], counted=[third.slot_id], now=T0 + timedelta(seconds=3)
    )
    assert {i: s.ahead for i, s in standings.of.items()} == {second.slot_id: None, third.slot_id: 2}
    assert standings.stale == frozenset()
    assert await aheads(store, first, second, third, at=3) == [0, 1, 2]  # one run must end first

    assert await release(store, first.slot_id) == ["c2"]
    assert await held(store) == ["c2"]
    standings = await store.slots.slot_standings(
        [second.slot_id, third.slot_id], counted=[third.slot_id], now=T0 + timedelta(seconds=4)
    )
    assert standings.of[second.slot_id].held
    assert (standings.of[third.slot_id].held, standings.of[third.slot_id].ahead) == (False, 1)
    assert await release(store, second.slot_id) == ["c3"]
    assert await release(store, third.slot_id) == []
    assert await store.slots.slots() == []
    assert await release(store, third.slot_id) == []  # gone already: nothing


async def test_each_limit_counts_by_its_own_key(store: Store) -> None:
    per_user = Limits(user=1, workspace=3)
    assert (await asked(store, ask("alice-1", per_user, user="slack:UA"))).held
    alice_2 = await asked(store, ask("alice-2", per_user, user="slack:UA"), 1)
    bob = await asked(store, ask("bob-1", per_user, user="slack:UB"), 2)
    carol = await asked(store, ask("carol-1", per_user, user="slack:UC"), 3)
    dave = await asked(store, ask("dave-1", per_user, user="slack:UD"), 4)
    elsewhere = await asked(store, ask("erin-1", per_user, user="slack:UE", workspace="slack:T2"))
    # Alice waits for her own limit, and holds nobody else back; the workspace fills up.
    assert not alice_2.held and bob.held and carol.held and elsewhere.held
    assert not dave.held
    # Alice waits for one of her own to end; Dave for two of the workspace's to end (one
    # for Alice's next, which goes first, one for him)
    assert await aheads(store, alice_2, dave, at=5) == [1, 2]
    # process and cluster keys: the holder's process, and everyone
    by_process = Limits(process=1)
    one = await asked(store, ask("p-1", by_process, category=Category.COMMAND), holder="a:1")
    two = await asked(store, ask("p-2", by_process, category=Category.COMMAND), holder="b:2")
    three = await asked(store, ask("p-3", by_process, category=Category.COMMAND), holder="a:1")
    assert (one.held, two.held, three.held) == (True, True, False)
    assert await held(store, Category.COMMAND) == ["p-1", "p-2"]


async def test_a_row_held_back_under_a_full_limit_holds_back_a_looser_one_behind_it(
    store: Store,
) -> None:
    tight, loose = Limits(user=1), Limits(user=3)
    first = await asked(store, ask("c1", tight))
    waiting = await asked(store, ask("c2", tight), 1)
    behind = await asked(store, ask("c3", loose), 2)  # room under its own limit, but c2 waits
    assert first.held and not waiting.held and not behind.held
    assert await aheads(store, waiting, behind, at=3) == [1, 1]
    assert await release(store, first.slot_id) == ["c2", "c3"]


# --- priorities --------------------------------------------------------------------------


async def test_a_higher_priority_goes_first_and_the_oldest_first_within_one(store: Store) -> None:
    first = await asked(store, ask("running"))
    low_old = await asked(store, ask("low-old", priority=0), 1)
    high_new = await asked(store, ask("high-new", priority=5), 2)
    low_new = await asked(store, ask("low-new", priority=0), 3)
    high_newer = await asked(store, ask("high-newer", priority=5), 4)
    assert await aheads(store, high_new, high_newer, low_old, low_new, at=4) == [1, 2, 3, 4]
    order = []
    current = first.slot_id
    for at in range(5, 9):
        (granted,) = await release(store, current, at)
        order.append(granted)
        current = next(s.id for s in await store.slots.slots() if s.conversation_id == granted)
    assert order == ["high-new", "high-newer", "low-old", "low-new"]


async def test_a_waiting_row_s_priority_rises_with_its_age(store: Store) -> None:
    first = await asked(store, ask("running"), aging=60, ttl=3600)
    low_old = await asked(store, ask("low-old", priority=0), 0, aging=60, ttl=3600)
    # at 150 s low-old is worth 0 + 150/60 = 2.5: it passes a new 2, not a new 3
    await asked(store, ask("high-new", priority=2), 150, aging=60, ttl=3600)
    await asked(store, ask("higher-new", priority=3), 150, aging=60, ttl=3600)
    assert await aheads(store, low_old, at=150) == [2]
    order = []
    current = first.slot_id
    for at in (151, 152, 153):
        (granted,) = await release(store, current, at)
        order.append(granted)
        current = next(s.id for s in await store.slots.slots() if s.conversation_id == granted)
    assert order == ["higher-new", "low-old", "high-new"]


async def test_without_aging_the_priority_decides(store: Store) -> None:
    year = 365 * 86_400.0
    first = await asked(store, ask("running"), ttl=2 * year)
    await asked(store, ask("low-old", priority=0), 0, ttl=2 * year)
    await asked(store, ask("high-new", priority=1), year, ttl=2 * year)
    assert await release(store, first.slot_id, year + 1) == ["high-new"]


# --- holders that are gone ---------------------------------------------------------------


async def test_a_holder_that_stops_renewing_loses_its_slots(store: Store) -> None:
    dead = await asked(store, ask("dead"), 0, holder="other-host:1")
    dead_waiting = await asked(store, ask("dead-2"), 1, holder="other-host:1")
    mine = await asked(store, ask("mine"), 2, holder="a:1")
    assert dead.held and not dead_waiting.held and not mine.held
    # a:1 renews its row; other-host:1 does not
    assert await store.slots.renew_slots(
        "a:1", [mine.slot_id, dead.slot_id], ttl=TTL, now=T0 + timedelta(seconds=50)
    ) == {mine.slot_id}
    late = T0 + timedelta(seconds=TTL + 5)
    standings = await store.slots.slot_standings([mine.slot_id], now=late)
    assert standings.stale == frozenset({Category.RUN})  # a pass would change something now
    passed = await store.slots.grant_slots(Category.RUN, now=late)
    assert [g.conversation_id for g in passed.granted] == ["mine"]
    assert [s.conversation_id for s in await store.slots.slots()] == ["mine"]
    assert await store.slots.renew_slots("other-host:1", [dead.slot_id], ttl=TTL) == set()


async def test_a_gone_process_of_this_host_loses_its_slots_at_once(store: Store) -> None:
    process = await asyncio.create_subprocess_exec("sleep", "60")
    try:
        holder = f"{socket.gethostname()}:{process.pid}"
        theirs = await asked(store, ask("theirs"), 0, holder=holder)
        assert theirs.held
        assert not (await asked(store, ask("waits"), 1, holder="a:1")).held  # alive: kept
    finally:
        process.kill()
        await process.wait()
    # the process is gone: the next pass drops its row before it expires
    mine = await asked(store, ask("mine"), 2, holder="a:1")
    assert [s.conversation_id for s in await store.slots.slots()] == ["waits", "mine"]
    assert await held(store) == ["waits"] and not mine.held


# --- several processes on one database ---------------------------------------------------


@contextlib.asynccontextmanager
async def second_store(
    backend: str, store: Store, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Store]:
    """Another store on ``store``'s database (another process's), or ``store`` in memory."""
    if backend == "memory":
        yield store
        return
    async with opened_store(backend, request, tmp_path) as other:
        yield other


@pytest.mark.parametrize("backend", BACKENDS)
async def test_two_stores_on_one_database_never_hold_more_than_the_limit(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with (
        opened_store(backend, request, tmp_path) as one,
        second_store(backend, one, request, tmp_path) as two,
    ):
        limits = Limits(cluster=3)
        stores = [one, two] * 6
        standings = await asyncio.gather(
            *(
                s.slots.ask_slot(
                    ask(f"c{i}", limits), holder=f"p:{i % 2}", ttl=TTL, aging=None, now=T0
                )
                for i, s in enumerate(stores)
            )
        )
        granted = [p.standing for p in standings if p.standing is not None and p.standing.held]
        assert len(granted) == 3
        assert len(await held(one)) == 3 == len(await held(two))
        # freeing them one by one, from either store, grants one each time
        for i, standing in enumerate(granted):
            passed = await stores[i].slots.release_slot(standing.slot_id, now=T0)
            assert len(passed.granted) == 1
        assert len(await held(two)) == 3
        waiting = [s for s in await one.slots.slots() if s.state is SlotState.WAITING]
        assert len(waiting) == 12 - 6
