"""Slots in memory: the rows in a dict, each pass done with no ``await`` in between.

The pass is :func:`conversations.store.slot_pass.decide` over the category's rows (the
reference the SQL store's early-stopping pass is checked against)."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from datetime import datetime, timedelta

from conversations.store.memory._tables import Tables, checkpoint
from conversations.store.owners import holder_gone
from conversations.store.slot_pass import ahead_of, decide, live
from conversations.store.slots import (
    Category,
    Granted,
    Passed,
    Slot,
    SlotAsk,
    SlotState,
    Standing,
    Standings,
    rank_of,
)


class MemorySlots:
    """:class:`conversations.store.slots.SlotStore` in memory; ``tables`` gives the clock."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables
        self._rows: dict[int, Slot] = {}
        self._last_id = 0

    async def ask_slot(
        self,
        ask: SlotAsk,
        *,
        holder: str,
        ttl: float,
        aging: float | None,
        now: datetime | None = None,
    ) -> Passed:
        """Add a waiting row and run its category's pass, at once."""
        if not ask.limits.any:
            raise ValueError(f"a slot asked with no limit: {ask}")
        await checkpoint()
        now = now or self._t.clock()
        self._last_id += 1
        row = Slot(
            id=self._last_id,
            conversation_id=ask.conversation_id,
            category=ask.category,
            state=SlotState.WAITING,
            holder=holder,
            workspace=ask.workspace,
            user=ask.user,
            priority=ask.priority,
            limits=ask.limits,
            enqueued_at=now,
            until=now + timedelta(seconds=ttl),
            rank=rank_of(ask.priority, now, aging),
        )
        self._rows[row.id] = row
        return self._pass(ask.category, now, asked=row.id)

    async def release_slot(self, slot_id: int, *, now: datetime | None = None) -> Passed:
        """Drop the row and run its category's pass, at once."""
        await checkpoint()
        row = self._rows.pop(slot_id, None)
        if row is None:
            return Passed()
        return self._pass(row.category, now or self._t.clock())

    async def grant_slots(self, category: Category, *, now: datetime | None = None) -> Passed:
        """Run the category's pass alone."""
        await checkpoint()
        return self._pass(category, now or self._t.clock())

    async def renew_slots(
        self, holder: str, ids: Collection[int], *, ttl: float, now: datetime | None = None
    ) -> set[int]:
        """Extend ``holder``'s rows ``ids``; the ids still there."""
        await checkpoint()
        until = (now or self._t.clock()) + timedelta(seconds=ttl)
        kept: set[int] = set()
        for slot_id in ids:
            row = self._rows.get(slot_id)
            if row is not None and row.holder == holder:
                self._rows[slot_id] = dataclasses.replace(row, until=until)
                kept.add(slot_id)
        return kept

    async def slot_standings(
        self, ids: Collection[int], *, counted: Collection[int] = (), now: datetime | None = None
    ) -> Standings:
        """Where the rows stand, as a pass would see them; the runs ahead of ``counted``."""
        await checkpoint()
        now = now or self._t.clock()
        found = [self._rows[i] for i in ids if i in self._rows]
        categories = {row.category for row in found}
        rows = [row for row in self._rows.values() if row.category in categories]
        stale: set[Category] = set()
        for category in categories:
            decision = decide(
                [r for r in rows if r.category is category], now=now, gone=holder_gone
            )
            if decision.dropped or decision.granted:
                stale.add(category)
        found = [row for row in found if live(row, now, holder_gone)]
        wanted = {row.id for row in found if row.state is SlotState.WAITING} & set(counted)
        aheads = ahead_of(rows, wanted, now=now, gone=holder_gone) if wanted else {}
        of: dict[int, Standing] = {}
        for row in found:
            held = row.state is SlotState.HELD
            of[row.id] = Standing(row.id, held, 0 if held else aheads.get(row.id), row.enqueued_at)
        return Standings(of=of, stale=frozenset(stale))

    async def slots(self, category: Category | None = None) -> list[Slot]:
        """Every row (of ``category``), oldest first."""
        await checkpoint()
        return [r for r in self._rows.values() if category is None or r.category is category]

    def _pass(self, category: Category, now: datetime, asked: int | None = None) -> Passed:
        rows = [row for row in self._rows.values() if row.category is category]
        decision = decide(rows, now=now, gone=holder_gone)
        for slot_id in decision.dropped:
            del self._rows[slot_id]
        granted: list[Granted] = []
        for slot_id in decision.granted:
            row = self._rows[slot_id]
            self._rows[slot_id] = dataclasses.replace(row, state=SlotState.HELD, granted_at=now)
            granted.append(Granted(slot_id, row.conversation_id, row.holder))
        standing = None
        if asked is not None and (new := self._rows.get(asked)) is not None:
            held = new.state is SlotState.HELD
            standing = Standing(asked, held, 0 if held else None, new.enqueued_at)
        return Passed(granted=tuple(granted), standing=standing)
