"""Scheduled runs in SQL: the ``schedule_runs`` table, keyed by ``(schedule, due_at)``.

A time is recorded by one ``INSERT ... ON CONFLICT DO NOTHING``: of two instances
recording it at once, one inserts the row and the other changes none (on PostgreSQL
the second waits for the first's transaction and then finds the key taken), so one
instance opens the conversation, in the same transaction
(:mod:`conversations.store.schedules`).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import Table, func, select, update
from sqlalchemy.orm import Session

from conversations.events import PlatformRef
from conversations.store.records import OutboxRecord, as_utc, new_conversation_id, outbox_values
from conversations.store.schedules import Opening, Outcome, ScheduleRun, unbound_thread
from conversations.store.schema import ConversationRow, ScheduleRunRow, utcnow
from conversations.store.sql.database import Database, changed, conflict_insert
from conversations.store.sql.inbox import add_delivery
from conversations.store.sql.outbox import insert_outbox
from conversations.store.sql.threads import insert_conversation

RUNS = cast(Table, ScheduleRunRow.__table__)

Started = tuple[str, list[OutboxRecord]] | None
"""A started time's conversation and the outbox rows written with it; None: taken before."""


def _utc(moment: datetime) -> datetime:
    """``moment`` in UTC, as every due time is stored (one key for one instant)."""
    return moment.astimezone(UTC)


class SqlSchedules:
    """:class:`conversations.store.schedules.Schedules` on the ``schedule_runs`` table."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def last_due(self, schedules: Collection[str]) -> dict[str, datetime]:
        """The newest due time recorded of each schedule named (one grouped read)."""
        if not schedules:
            return {}
        stmt = (
            select(ScheduleRunRow.schedule, func.max(ScheduleRunRow.due_at))
            .where(ScheduleRunRow.schedule.in_(list(schedules)))
            .group_by(ScheduleRunRow.schedule)
        )
        async with self._db.read() as session:
            rows = (await session.execute(stmt)).all()
        return {name: _read_utc(due) for name, due in rows}

    async def note(
        self, schedule: str, due: datetime, outcome: Outcome, *, by: str, at: datetime
    ) -> bool:
        """Record a time ``skipped`` or ``seen``; one statement on its own."""
        stmt = self._claim(self._db.engine.dialect.name, schedule, due, outcome, by, at, None)
        inserted: bool = await self._db.write_alone(stmt, lambda result: changed(result) == 1)
        return inserted

    async def start(
        self, schedule: str, due: datetime, *, by: str, at: datetime, opening: Opening
    ) -> str | None:
        """Record the time ``started`` and open its conversation, in one transaction; the
        outbox row goes to ``on_outbox`` once it committed."""
        conversation_id = new_conversation_id()
        announce = opening.announce

        def start_(session: Session) -> Started:
            dialect = session.get_bind().dialect.name
            claim = self._claim(dialect, schedule, due, Outcome.STARTED, by, at, conversation_id)
            if changed(session.execute(claim)) != 1:
                return None  # recorded before: another instance's, or this one's
            add_delivery(session, opening.delivery_key, conversation_id, opening.event)
            insert_conversation(
                session,
                conversation_id,
                binding=opening.place.in_thread(unbound_thread(conversation_id)),
                requester=opening.requester,
                workspace_root=opening.workspace_root,
                position=opening.position,
            )
            rows = insert_outbox(
                session, [outbox_values(conversation_id, announce)], [announce.action]
            )
            return conversation_id, rows

        def hand_on(started: Started) -> None:
            if started is not None:
                self._db.on_outbox(started[1])

        started = await self._db.write(start_, then=hand_on)
        return started[0] if started is not None else None

    async def bind_thread(self, conversation_id: str, binding: PlatformRef) -> bool:
        """One ``UPDATE`` of the conversation's channel, thread and parent, only while its
        thread is the placeholder."""
        stmt = (
            update(ConversationRow)
            .where(
                ConversationRow.id == conversation_id,
                ConversationRow.thread == unbound_thread(conversation_id),
            )
            .values(
                channel=binding.channel,
                thread=binding.thread or "",
                parent=binding.parent,
                updated_at=utcnow(),
            )
        )
        bound: bool = await self._db.write_alone(stmt, lambda result: changed(result) == 1)
        return bound

    async def runs(self, schedule: str | None = None) -> list[ScheduleRun]:
        """The records, by schedule, oldest time first."""
        stmt = select(ScheduleRunRow).order_by(ScheduleRunRow.schedule, ScheduleRunRow.due_at)
        if schedule is not None:
            stmt = stmt.where(ScheduleRunRow.schedule == schedule)
        async with self._db.read() as session:
            rows = (await session.execute(stmt)).scalars().all()
        return [
            ScheduleRun(
                schedule=row.schedule,
                due=_read_utc(row.due_at),
                outcome=Outcome(row.outcome),
                by=row.claimed_by,
                at=_read_utc(row.claimed_at),
                conversation_id=row.conversation_id,
            )
            for row in rows
        ]

    @staticmethod
    def _claim(
        dialect: str,
        schedule: str,
        due: datetime,
        outcome: Outcome,
        by: str,
        at: datetime,
        conversation_id: str | None,
    ) -> Any:
        """The ``INSERT ... ON CONFLICT DO NOTHING`` of one time's record."""
        return (
            conflict_insert(dialect, RUNS)
            .values(
                schedule=schedule,
                due_at=_utc(due),
                outcome=outcome.value,
                claimed_by=by,
                claimed_at=_utc(at),
                conversation_id=conversation_id,
            )
            .on_conflict_do_nothing(index_elements=["schedule", "due_at"])
        )


def _read_utc(value: datetime) -> datetime:
    """A stored time, timezone-aware UTC (SQLite hands it back naive)."""
    read = as_utc(value)
    assert read is not None
    return read
