"""The outbox in SQL: rows written with the change that caused them, delivered at least once."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from conversations.events import PostReply, outbound_adapter
from conversations.store.records import (
    OutboxRecord,
    Outgoing,
    PendingSend,
    RequestMessage,
    outbox_row,
)
from conversations.store.schema import OutboxRow, utcnow
from conversations.store.sql.database import Database, changed
from conversations.store.sql.requests import link_request_posts, request_message_id

ERROR_CHARS = 2000
"""Characters of an error kept in ``last_error``."""


class SqlOutbox:
    """:class:`conversations.store.interfaces.Outbox` on the ``outbox`` table.

    ``ix_outbox_pending`` (state, conversation, id) serves the deliverer's reads.
    """

    def __init__(self, db: Database) -> None:
        self._db = db

    async def enqueue(self, conversation_id: str, items: Sequence[Outgoing]) -> None:
        """Write outbox rows that no state change goes with (notices to people)."""

        def enqueue(session: Session) -> None:
            session.add_all([outbox_row(conversation_id, out) for out in items])

        await self._db.write(enqueue)
        if items:
            self._db.on_outbox()

    async def pending_conversations(self, limit: int) -> list[tuple[str, bool]]:
        """Conversations with pending rows: ``(id, whether a non-note row is pending)``.

        At most ``limit``, the conversation whose oldest pending row is oldest first.
        The flag tells the deliverer that notes held back for their interval are to
        be flushed before a milestone.
        """
        others = func.count(OutboxRow.id).filter(OutboxRow.purpose != "note")
        stmt = (
            select(OutboxRow.conversation_id, others)
            .where(OutboxRow.state == "pending")
            .group_by(OutboxRow.conversation_id)
            .order_by(func.min(OutboxRow.id))
            .limit(limit)
        )
        rows = await self._db.read_in_thread(lambda session: session.execute(stmt).all())
        return [(str(cid), bool(count)) for cid, count in rows]

    async def pending_rows(
        self, conversation_id: str, *, after: int = 0, limit: int = 100
    ) -> list[PendingSend]:
        """Pending rows of one conversation with an id above ``after``: reports first, then
        the others oldest first (the interface says why)."""
        stmt = (
            select(OutboxRow)
            .where(
                OutboxRow.state == "pending",
                OutboxRow.conversation_id == conversation_id,
                OutboxRow.id > after,
            )
            .order_by(OutboxRow.purpose != "report", OutboxRow.id)
            .limit(limit)
        )
        rows = await self._db.read_in_thread(lambda session: list(session.scalars(stmt)))
        return [
            PendingSend(
                id=r.id,
                conversation_id=r.conversation_id,
                purpose=r.purpose,
                action=outbound_adapter.validate_python(r.action),
                request_id=r.request_id,
            )
            for r in rows
        ]

    async def request_message(self, conversation_id: str, request_id: str) -> RequestMessage | None:
        """The message a request was posted as (see the interface); None if none."""
        stmt = (
            select(OutboxRow)
            .where(OutboxRow.conversation_id == conversation_id, OutboxRow.request_id == request_id)
            .order_by(OutboxRow.id)
        )
        async with self._db.read() as session:
            linked = await request_message_id(session, request_id)
            for row in (await session.execute(stmt)).scalars():
                action = outbound_adapter.validate_python(row.action)
                if isinstance(action, PostReply) and linked is not None:
                    return RequestMessage(action, "sent", linked)
                if isinstance(action, PostReply):
                    return RequestMessage(action, row.state, row.platform_message_id)
        return None

    async def settle_unsent(self, ids: Sequence[int], reason: str) -> None:
        """Pending rows of ``ids`` become ``dropped``; ``reason`` is kept in ``last_error``."""
        stmt = (
            update(OutboxRow)
            .where(OutboxRow.id.in_(ids), OutboxRow.state == "pending")
            .values(state="dropped", last_error=reason[:ERROR_CHARS])
        )
        await self._db.write(lambda session: session.execute(stmt))

    async def has_pending_milestone(self, conversation_id: str, *, after: int) -> bool:
        """Whether a pending row other than a note, with an id above ``after``, waits."""
        stmt = select(OutboxRow.id).where(
            OutboxRow.state == "pending",
            OutboxRow.conversation_id == conversation_id,
            OutboxRow.id > after,
            OutboxRow.purpose != "note",
        )
        async with self._db.read() as session:
            return (await session.scalar(stmt.limit(1))) is not None

    async def has_pending_in(self, platform: str, channel: str, *, up_to: int) -> bool:
        """Whether a pending row of ``platform``'s ``channel`` with an id up to ``up_to`` waits."""
        stmt = select(OutboxRow.id).where(
            OutboxRow.state == "pending",
            OutboxRow.platform == platform,
            OutboxRow.channel == channel,
            OutboxRow.id <= up_to,
        )
        async with self._db.read() as session:
            return (await session.scalar(stmt.limit(1))) is not None

    async def still_pending(self, ids: Collection[int]) -> set[int]:
        """Which of ``ids`` are still pending (not sent, failed, or dropped by a stop)."""
        if not ids:
            return set()
        stmt = select(OutboxRow.id).where(OutboxRow.id.in_(ids), OutboxRow.state == "pending")
        async with self._db.read() as session:
            return set((await session.execute(stmt)).scalars())

    async def last_outbox_id(self) -> int:
        """The id of the newest outbox row, 0 for an empty outbox."""
        async with self._db.read() as session:
            return int(await session.scalar(select(func.max(OutboxRow.id))) or 0)

    async def mark_sent(self, ids: Sequence[int], platform_message_id: str | None) -> None:
        """Rows delivered; a request's own post also links the message to its request
        (:func:`conversations.store.sql.requests.link_request_posts`), in one write."""

        def mark_sent(session: Session) -> None:
            link_request_posts(session, ids, platform_message_id)
            session.execute(
                update(OutboxRow)
                .where(OutboxRow.id.in_(ids), OutboxRow.state == "pending")
                .values(state="sent", platform_message_id=platform_message_id, sent_at=utcnow())
            )

        await self._db.write(mark_sent)

    async def record_failure(self, send_id: int, error: str) -> int:
        """Count a failed attempt of a row and keep its error; returns the attempts so far.

        A rate limit is not a failed attempt: the deliverer does not call this for one.
        """
        stmt = (
            update(OutboxRow)
            .where(OutboxRow.id == send_id)
            .values(attempts=OutboxRow.attempts + 1, last_error=error[:ERROR_CHARS])
            .returning(OutboxRow.attempts)
        )
        attempts = await self._db.write(lambda session: session.scalar(stmt))
        return int(attempts or 0)

    async def fail_for_good(
        self,
        conversation_id: str,
        ids: Sequence[int],
        error: str,
        report: Outgoing | None = None,
    ) -> bool:
        """Stop retrying ``ids`` and write ``report`` (a row telling the thread), in one go.

        Only pending rows change; the report is written only when one did, so a
        row failed twice (two processes) is reported once. Returns whether any did.
        """

        def fail(session: Session) -> bool:
            result = session.execute(
                update(OutboxRow)
                .where(OutboxRow.id.in_(ids), OutboxRow.state == "pending")
                .values(state="failed", last_error=error[:ERROR_CHARS])
            )
            failed = bool(changed(result))
            if failed and report is not None:
                session.add(outbox_row(conversation_id, report))
            return failed

        failed = await self._db.write(fail)
        if failed and report is not None:
            self._db.on_outbox()
        return failed

    async def rows(self, conversation_id: str | None = None) -> list[OutboxRecord]:
        """Every row as stored, of one conversation or all, oldest first."""
        stmt = select(OutboxRow).order_by(OutboxRow.id)
        if conversation_id is not None:
            stmt = stmt.where(OutboxRow.conversation_id == conversation_id)
        async with self._db.read() as session:
            return [
                OutboxRecord(
                    id=r.id,
                    conversation_id=r.conversation_id,
                    purpose=r.purpose,
                    action=outbound_adapter.validate_python(r.action),
                    state=r.state,
                    request_id=r.request_id,
                    platform_message_id=r.platform_message_id,
                    attempts=r.attempts,
                    last_error=r.last_error,
                )
                for r in (await session.execute(stmt)).scalars()
            ]


def drop_pending_notes(session: Session, conversation_id: str) -> None:
    """Pending notes of the conversation become ``dropped`` (a stop made them moot)."""
    session.execute(
        update(OutboxRow)
        .where(
            OutboxRow.conversation_id == conversation_id,
            OutboxRow.state == "pending",
            OutboxRow.purpose == "note",
        )
        .values(state="dropped")
    )
