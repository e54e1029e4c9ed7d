"""Stop requests: a stop handled by one instance for a run that another instance runs.

The instance that holds a conversation's lease runs it: only it can cancel the
model call or kill the command. Another instance that takes a stop (a Slack
event, a button, ``/stop`` can reach any instance) writes a stop request naming
the run it aims at (the holder's lease epoch); the holder polls for requests
aimed at the conversations it holds, about once a second in one query per
process, stops the run and marks the request handled. Because the request is
written only while that lease is live (one ``INSERT ... SELECT ... WHERE``
statement), a run that ended meanwhile is stopped by the asking instance itself
instead; a request left behind by a holder that died is picked up by any
instance once the lease has lapsed (:func:`orphans`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, exists, insert, literal, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from conversations.store.schema import ConversationRow, StopRequestRow
from core.journal import Person


@dataclass(frozen=True)
class StopRequest:
    """An open stop request: its id, the conversation, the run's epoch, who asked."""

    id: int
    conversation_id: str
    lease_epoch: int
    by: Person


async def request(
    session: AsyncSession,
    conversation_id: str,
    *,
    holder: str,
    epoch: int,
    by: Person,
    now: datetime,
) -> bool:
    """Write a stop request if ``holder`` still holds the lease at ``epoch``, unexpired.

    One statement, so it cannot race the holder's release: False means the run is
    not held there any more (the caller stops the conversation itself).
    """
    held = exists().where(
        ConversationRow.id == conversation_id,
        ConversationRow.lease_owner == holder,
        ConversationRow.lease_epoch == epoch,
        ConversationRow.lease_until > now,
    )
    values = select(
        literal(conversation_id),
        literal(epoch),
        literal(by.id),
        literal(by.name),
        literal(now),
    ).where(held)
    stmt = insert(StopRequestRow).from_select(
        ["conversation_id", "lease_epoch", "requested_by_id", "requested_by_name", "created_at"],
        values,
    )
    result = await session.execute(stmt)
    return bool(getattr(result, "rowcount", 0))


async def aimed_at(session: AsyncSession, conversation_ids: Collection[str]) -> list[StopRequest]:
    """Open stop requests for ``conversation_ids`` (the runs this instance holds)."""
    if not conversation_ids:
        return []
    stmt = (
        select(StopRequestRow)
        .where(
            StopRequestRow.handled_at.is_(None),
            StopRequestRow.conversation_id.in_(conversation_ids),
        )
        .order_by(StopRequestRow.id)
    )
    return [_request_of(row) for row in (await session.execute(stmt)).scalars()]


async def orphans(session: AsyncSession, now: datetime) -> list[StopRequest]:
    """Open stop requests whose conversation no instance holds now (free or lapsed lease)."""
    unheld = or_(ConversationRow.lease_owner.is_(None), ConversationRow.lease_until <= now)
    stmt = (
        select(StopRequestRow)
        .join(ConversationRow, ConversationRow.id == StopRequestRow.conversation_id)
        .where(StopRequestRow.handled_at.is_(None), unheld)
        .order_by(StopRequestRow.id)
    )
    return [_request_of(row) for row in (await session.execute(stmt)).scalars()]


async def handled(session: AsyncSession, conversation_id: str, now: datetime) -> int:
    """Mark every open stop request of the conversation handled; how many there were."""
    stmt = (
        update(StopRequestRow)
        .where(
            and_(
                StopRequestRow.conversation_id == conversation_id,
                StopRequestRow.handled_at.is_(None),
            )
        )
        .values(handled_at=now)
    )
    result = await session.execute(stmt)
    return int(getattr(result, "rowcount", 0))


def _request_of(row: StopRequestRow) -> StopRequest:
    return StopRequest(
        id=row.id,
        conversation_id=row.conversation_id,
        lease_epoch=row.lease_epoch,
        by=Person(id=row.requested_by_id, name=row.requested_by_name),
    )
