"""The audit trail in SQL: one ``audit`` row per decision or refused attempt.

A decision's row is inserted by the journal's commit (:func:`insert_audit`, in the
commit's transaction); a refused attempt's by :meth:`SqlAudit.record`, with the outbox
rows of the notice that answers it, in one transaction. See
:mod:`conversations.store.audit`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import cast

from sqlalchemy import Table, insert, select
from sqlalchemy.orm import Session

from conversations.events import PlatformRef
from conversations.store.audit import AuditEntry, entry_of
from conversations.store.records import OutboxRecord, Outgoing, as_utc, outbox_values
from conversations.store.schema import AuditRow, RequestRow, utcnow
from conversations.store.sql.database import Database, conversation_row_sync
from conversations.store.sql.outbox import insert_outbox
from core.vocabulary.audit import Audited

AUDIT = cast(Table, AuditRow.__table__)
_INSERT = insert(AUDIT).returning(AUDIT.c.id)


class SqlAudit:
    """:class:`conversations.store.audit.AuditTrail` on the ``audit`` table."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def record(
        self,
        audited: Audited,
        *,
        where: PlatformRef,
        conversation_id: str | None = None,
        notices: Sequence[Outgoing] = (),
    ) -> AuditEntry:
        """Store ``audited`` and write ``notices``, in one transaction; raises
        :class:`core.vocabulary.errors.ConversationNotFound`."""
        now = utcnow()

        def write(session: Session) -> tuple[AuditEntry, list[OutboxRecord]]:
            if conversation_id is not None:
                conversation_row_sync(session, conversation_id)
            entry = insert_audit(session, conversation_id, where, audited, now)
            if not notices or conversation_id is None:
                return entry, []
            rows = [outbox_values(conversation_id, out) for out in notices]
            return entry, insert_outbox(session, rows, [out.action for out in notices])

        def then(result: tuple[AuditEntry, list[OutboxRecord]]) -> None:
            if result[1]:
                self._db.on_outbox(result[1])

        entry, _ = await self._db.write(write, then=then)
        return entry

    async def entries(
        self,
        *,
        conversation_id: str | None = None,
        channel: str | None = None,
        since: datetime | None = None,
    ) -> list[AuditEntry]:
        """The rows the filters let through, oldest first (by time, then id)."""
        stmt = select(AuditRow).order_by(AuditRow.at, AuditRow.id)
        if conversation_id is not None:
            stmt = stmt.where(AuditRow.conversation_id == conversation_id)
        if channel is not None:
            stmt = stmt.where(AuditRow.channel == channel)
        if since is not None:
            stmt = stmt.where(AuditRow.at >= since)
        async with self._db.read() as session:
            rows = (await session.execute(stmt)).scalars().all()
        return [_entry(row) for row in rows]


def insert_audit(
    session: Session,
    conversation_id: str | None,
    where: PlatformRef,
    audited: Audited,
    now: datetime,
) -> AuditEntry:
    """Insert the row of ``audited`` at ``now`` (the kind and plan version of its request
    read first when it names a request but not its kind); the row as stored."""
    found: tuple[str, int | None] | None = None
    if audited.request_kind is None and audited.request_id is not None:
        read = select(RequestRow.kind, RequestRow.plan_version).where(
            RequestRow.id == audited.request_id
        )
        row = session.execute(read).first()
        found = (row.kind, row.plan_version) if row is not None else None
    entry = entry_of(0, now, conversation_id, where, audited, found)
    values = dataclasses.asdict(entry)
    del values["id"]
    new_id = session.execute(_INSERT, values).scalar_one()
    return dataclasses.replace(entry, id=new_id)


def _entry(row: AuditRow) -> AuditEntry:
    return AuditEntry(
        id=row.id,
        at=as_utc(row.at) or row.at,
        conversation_id=row.conversation_id,
        platform=row.platform,
        workspace=row.workspace,
        channel=row.channel,
        request_kind=row.request_kind,
        request_id=row.request_id,
        version=row.version,
        user_id=row.user_id,
        means=row.means,
        outcome=row.outcome,
        reason=row.reason,
    )
