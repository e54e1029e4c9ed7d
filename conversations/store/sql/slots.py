"""Slots in SQL: the ``slots`` table, each pass one write transaction under a lock.

Every write that runs a pass (an ask, a release, a pass alone) and every renewal first
takes the slots' lock for its transaction: ``pg_advisory_xact_lock(SLOTS_LOCK)`` on
PostgreSQL (released at commit or rollback,
https://www.postgresql.org/docs/current/functions-admin.html#FUNCTIONS-ADVISORY-LOCKS),
so the passes of several processes go one at a time and each reads what the one
before wrote; on SQLite the write transaction's ``BEGIN IMMEDIATE`` holds the
database's write lock already. The pass reads the held rows' counts and the head of
the queue only, and writes what it decided (:mod:`conversations.store.sql.slot_pass`);
the runs ahead of a waiting row are counted when its holder looks, in the reader.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta

from sqlalchemy import delete, insert, select, text, update
from sqlalchemy.orm import Session

from conversations.store.records import as_utc
from conversations.store.schema import SlotRow, utcnow
from conversations.store.slots import (
    SLOTS_LOCK,
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
from conversations.store.sql.database import Database
from conversations.store.sql.slot_pass import Gone, Outcome, aheads, run_pass, slot_of, stale


class SqlSlots:
    """:class:`conversations.store.slots.SlotStore` on the ``slots`` table."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def ask_slot(
        self,
        ask: SlotAsk,
        *,
        holder: str,
        ttl: float,
        aging: float | None,
        now: datetime | None = None,
    ) -> Passed:
        """Insert the waiting row and run its category's pass, in one transaction."""
        if not ask.limits.any:
            raise ValueError(f"a slot asked with no limit: {ask}")
        now = now or utcnow()
        values = {
            "conversation_id": ask.conversation_id,
            "category": ask.category.value,
            "state": SlotState.WAITING.value,
            "holder": holder,
            "workspace": ask.workspace,
            "user_key": ask.user,
            "priority": ask.priority,
            "rank": rank_of(ask.priority, now, aging),
            "enqueued_at": now,
            "until": now + timedelta(seconds=ttl),
            "cluster_limit": ask.limits.cluster,
            "process_limit": ask.limits.process,
            "workspace_limit": ask.limits.workspace,
            "user_limit": ask.limits.user,
        }

        def asked(session: Session) -> Passed:
            _lock(session)
            stmt = insert(SlotRow).values(values).returning(SlotRow.id)
            slot_id = int(session.execute(stmt).scalar_one())
            outcome = run_pass(session, ask.category, now)
            if slot_id in outcome.dropped:
                return _passed(outcome)
            held = any(row.id == slot_id for row in outcome.granted)
            return _passed(outcome, Standing(slot_id, held, 0 if held else None, now))

        return await self._db.write(asked)

    async def release_slot(self, slot_id: int, *, now: datetime | None = None) -> Passed:
        """Delete the row and run its category's pass, in one transaction."""
        now = now or utcnow()

        def released(session: Session) -> Passed:
            _lock(session)
            stmt = delete(SlotRow).where(SlotRow.id == slot_id).returning(SlotRow.category)
            category = session.execute(stmt).scalar_one_or_none()
            if category is None:
                return Passed()
            return _passed(run_pass(session, Category(category), now))

        return await self._db.write(released)

    async def grant_slots(self, category: Category, *, now: datetime | None = None) -> Passed:
        """Drop the category's rows past their expiry or of gone holders, and run its pass,
        in one transaction."""
        now = now or utcnow()

        def granted(session: Session) -> Passed:
            _lock(session)
            return _passed(run_pass(session, category, now, sweep=True))

        return await self._db.write(granted)

    async def renew_slots(
        self, holder: str, ids: Collection[int], *, ttl: float, now: datetime | None = None
    ) -> set[int]:
        """One ``UPDATE ... RETURNING id`` of ``holder``'s rows, not queued behind this
        process's other writes (:meth:`Database.write_beside`), like a lease's renewal."""
        if not ids:
            return set()
        until = (now or utcnow()) + timedelta(seconds=ttl)
        stmt = (
            update(SlotRow)
            .where(SlotRow.holder == holder, SlotRow.id.in_(list(ids)))
            .values(until=until)
            .returning(SlotRow.id)
        )

        def renewed(session: Session) -> set[int]:
            _lock(session)
            return {int(i) for i in session.execute(stmt).scalars()}

        return await self._db.write_beside(renewed)

    async def slot_standings(
        self, ids: Collection[int], *, counted: Collection[int] = (), now: datetime | None = None
    ) -> Standings:
        """In one read transaction, in the reader: the rows ``ids``; for each of their
        categories whether a pass would change something (:func:`stale`); the runs ahead
        of the waiting rows among ``counted`` (:func:`aheads`, one query)."""
        if not ids:
            return Standings(of={})
        at = now or utcnow()
        wanted, counting = list(ids), set(counted)

        def read(session: Session) -> Standings:
            columns = (SlotRow.id, SlotRow.category, SlotRow.state, SlotRow.holder)
            stmt = select(*columns, SlotRow.enqueued_at, SlotRow.until)
            found = session.execute(stmt.where(SlotRow.id.in_(wanted))).all()
            categories = sorted({row.category for row in found})
            gone = Gone()
            holders = select(SlotRow.holder).where(SlotRow.category.in_(categories)).distinct()
            dead = [h for h in session.execute(holders).scalars() if gone(h)]
            changed = frozenset(
                Category(c) for c in categories if stale(session, Category(c), at, gone)
            )
            kept = [r for r in found if _as_utc(r.until) >= at and r.holder not in dead]
            waiting = [r.id for r in kept if r.state == SlotState.WAITING.value]
            ahead = [i for i in waiting if i in counting]
            counts = aheads(session, categories, ahead, at, dead) if ahead else {}
            of: dict[int, Standing] = {}
            for r in kept:
                held = r.state == SlotState.HELD.value
                enqueued = _as_utc(r.enqueued_at)
                of[r.id] = Standing(r.id, held, 0 if held else counts.get(r.id), enqueued)
            return Standings(of=of, stale=changed)

        return await self._db.read_in_thread(read, snapshot=True)

    async def slots(self, category: Category | None = None) -> list[Slot]:
        """Every row (of ``category``), oldest first."""
        stmt = select(SlotRow).order_by(SlotRow.id)
        if category is not None:
            stmt = stmt.where(SlotRow.category == category.value)
        async with self._db.read() as session:
            return [slot_of(row) for row in (await session.execute(stmt)).scalars()]


def _lock(session: Session) -> None:
    """Take the slots' lock for this transaction (PostgreSQL; SQLite's write lock is held)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SLOTS_LOCK})


def _passed(outcome: Outcome, standing: Standing | None = None) -> Passed:
    granted = tuple(Granted(row.id, row.conversation_id, row.holder) for row in outcome.granted)
    return Passed(granted=granted, standing=standing)


def _as_utc(value: datetime) -> datetime:
    found = as_utc(value)
    assert found is not None
    return found
