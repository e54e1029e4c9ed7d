"""Feedback in SQL: one row per (conversation, person), replaced by their later feedback.

One ``INSERT ... ON CONFLICT DO UPDATE`` on the primary key (``conversation_id``,
``user_id``), so two presses by one person at once leave one row, the later write's
(https://www.sqlite.org/lang_upsert.html; PostgreSQL's ``ON CONFLICT``). See
:mod:`conversations.store.feedback`.
"""

from __future__ import annotations

from typing import cast

from sqlalchemy import Table, case, func, select
from sqlalchemy.orm import Session

from conversations.store.feedback import FeedbackCounts, FeedbackGiven
from conversations.store.records import as_utc
from conversations.store.schema import FeedbackRow, utcnow
from conversations.store.sql.database import Database, conflict_insert, conversation_row_sync


class SqlFeedback:
    """:class:`conversations.store.feedback.Feedback` on the ``feedback`` table."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def give(self, conversation_id: str, user_id: str, *, positive: bool) -> FeedbackGiven:
        """Record ``user_id``'s feedback, replacing theirs; raises
        :class:`core.vocabulary.errors.ConversationNotFound`."""
        given = FeedbackGiven(conversation_id, user_id, positive, utcnow())
        await self._db.write(lambda session: _upsert(session, given))
        return given

    async def of(self, conversation_id: str) -> list[FeedbackGiven]:
        """The conversation's feedback, one per person, oldest first."""
        stmt = (
            select(FeedbackRow)
            .where(FeedbackRow.conversation_id == conversation_id)
            .order_by(FeedbackRow.given_at, FeedbackRow.user_id)
        )
        async with self._db.read() as session:
            rows = (await session.execute(stmt)).scalars().all()
        return [
            FeedbackGiven(
                r.conversation_id, r.user_id, r.positive, as_utc(r.given_at) or r.given_at
            )
            for r in rows
        ]

    async def counts(self) -> dict[str, FeedbackCounts]:
        """👍 and 👎 counts of every conversation with feedback."""
        positive = func.sum(case((FeedbackRow.positive, 1), else_=0))
        stmt = select(FeedbackRow.conversation_id, positive, func.count()).group_by(
            FeedbackRow.conversation_id
        )
        async with self._db.read() as session:
            rows = (await session.execute(stmt)).all()
        return {cid: FeedbackCounts(int(good), int(n) - int(good)) for cid, good, n in rows}


def _upsert(session: Session, given: FeedbackGiven) -> None:
    conversation_row_sync(session, given.conversation_id)  # ConversationNotFound, before the FK
    table = cast(Table, FeedbackRow.__table__)
    stmt = (
        conflict_insert(session.get_bind().dialect.name, table)
        .values(
            conversation_id=given.conversation_id,
            user_id=given.user_id,
            positive=given.positive,
            given_at=given.at,
        )
        .on_conflict_do_update(
            index_elements=["conversation_id", "user_id"],
            set_={"positive": given.positive, "given_at": given.at},
        )
    )
    session.execute(stmt)
