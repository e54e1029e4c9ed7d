"""Slots in SQL: the ``slots`` table, each pass one write transaction under a lock.

Every write that runs a pass (an ask, a release, a pass alone) and every renewal first
takes the slots' lock for its transaction: ``pg_advisory_xact_lock(SLOTS_LOCK)`` on
PostgreSQL (released at commit or rollback,
https://www.postgresql.org/docs/current/functions-admin.html#FUNCTIONS-ADVISORY-LOCKS),
so the passes of several processes go one at a time and each reads what the one
before wrote; on SQLite the write transaction's ``BEGIN IMMEDIATE`` holds the
database's write lock already. The pass reads the category's rows, decides in Python
(:func:`conversations.store.slots.decide`, the same for every backend) and writes what
it decided: a ``DELETE`` of the rows dropped, an ``UPDATE`` of the rows granted.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta

from sqlalchemy import delete, insert, select, text, update
from sqlalchemy.orm import Session

from conversations.store.owners import holder_gone
from conversations.store.records import as_utc
from conversations.store.schema import SlotRow, utcnow
from conversations.store.slots import (
    SLOTS_LOCK,
    Category,
    Granted,
    Limits,
    Passed,
    Slot,
    SlotAsk,
    SlotState,
    Standings,
    decide,
    standing_after,
    standings_of,
)
from conversations.store.sql.database import Database


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
        now = now or utcnow()
        values = {
            "conversation_id": ask.conversation_id,
            "category": ask.category.value,
            "state": SlotState.WAITING.value,
            "holder": holder,
            "workspace": ask.workspace,
            "user_key": ask.user,
            "priority": ask.priority,
            "enqueued_at": now,
            "until": now + timedelta(seconds=ttl),
            "cluster_limit": ask.limits.cluster,
            "process_limit": ask.limits.process,
            "workspace_limit": ask.limits.workspace,
            "user_limit": ask.limits.user,
        }

        def asked(session: Session) -> Passed:
            _lock(session)
            slot_id = session.execute(
                insert(SlotRow).values(values).returning(SlotRow.id)
            ).scalar_one()
            return _pass(session, ask.category, now, aging, asked=int(slot_id))

        return await self._db.write(asked)

    async def release_slot(
        self, slot_id: int, *, aging: float | None, now: datetime | None = None
    ) -> Passed:
        """Delete the row and run its category's pass, in one transaction."""
        now = now or utcnow()

        def released(session: Session) -> Passed:
            _lock(session)
            stmt = delete(SlotRow).where(SlotRow.id == slot_id).returning(SlotRow.category)
            category = session.execute(stmt).scalar_one_or_none()
            if category is None:
                return Passed()
            return _pass(session, Category(category), now, aging)

        return await self._db.write(released)

    async def grant_slots(
        self, category: Category, *, aging: float | None, now: datetime | None = None
    ) -> Passed:
        """Run the category's pass alone, in one transaction."""
        now = now or utcnow()

        def granted(session: Session) -> Passed:
            _lock(session)
            return _pass(session, category, now, aging)

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
        self, ids: Collection[int], *, aging: float | None, now: datetime | None = None
    ) -> Standings:
        """Two reads in one read transaction: the categories of ``ids``, then their rows."""
        if not ids:
            return Standings(of={})
        now = now or utcnow()
        wanted = list(ids)

        def read(session: Session) -> list[Slot]:
            categories = select(SlotRow.category).where(SlotRow.id.in_(wanted)).distinct()
            found = list(session.execute(categories).scalars())
            return _rows(session, found) if found else []

        rows = await self._db.read_in_thread(read, snapshot=True)
        return standings_of(rows, wanted, now=now, aging=aging, gone=holder_gone)

    async def slots(self, category: Category | None = None) -> list[Slot]:
        """Every row (of ``category``), oldest first."""
        stmt = select(SlotRow).order_by(SlotRow.id)
        if category is not None:
            stmt = stmt.where(SlotRow.category == category.value)
        async with self._db.read() as session:
            return [_slot(row) for row in (await session.execute(stmt)).scalars()]


def _lock(session: Session) -> None:
    """Take the slots' lock for this transaction (PostgreSQL; SQLite's write lock is held)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SLOTS_LOCK})


def _rows(session: Session, categories: Sequence[str]) -> list[Slot]:
    stmt = select(SlotRow).where(SlotRow.category.in_(list(categories))).order_by(SlotRow.id)
    return [_slot(row) for row in session.execute(stmt).scalars()]


def _pass(
    session: Session,
    category: Category,
    now: datetime,
    aging: float | None,
    asked: int | None = None,
) -> Passed:
    """Read the category's rows, decide, and write the decision (in the caller's
    transaction, under the lock)."""
    rows = _rows(session, [category.value])
    decision = decide(rows, now=now, aging=aging, gone=holder_gone)
    if decision.dropped:
        session.execute(delete(SlotRow).where(SlotRow.id.in_(decision.dropped)))
    granted: list[Granted] = []
    if decision.granted:
        session.execute(
            update(SlotRow)
            .where(SlotRow.id.in_(decision.granted))
            .values(state=SlotState.HELD.value, granted_at=now)
        )
        by_id = {row.id: row for row in rows}
        granted = [Granted(i, by_id[i].conversation_id, by_id[i].holder) for i in decision.granted]
    standing = None if asked is None else standing_after(rows, asked, decision)
    return Passed(granted=tuple(granted), standing=standing)


def _slot(row: SlotRow) -> Slot:
    enqueued, until = as_utc(row.enqueued_at), as_utc(row.until)
    assert enqueued is not None and until is not None
    return Slot(
        id=row.id,
        conversation_id=row.conversation_id,
        category=Category(row.category),
        state=SlotState(row.state),
        holder=row.holder,
        workspace=row.workspace,
        user=row.user_key,
        priority=row.priority,
        limits=Limits(
            cluster=row.cluster_limit,
            process=row.process_limit,
            workspace=row.workspace_limit,
            user=row.user_limit,
        ),
        enqueued_at=enqueued,
        until=until,
        granted_at=as_utc(row.granted_at),
    )
