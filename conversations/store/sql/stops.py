"""Stop requests in SQL: a stop handled by one instance for a run that another instance runs.

The instance that holds a conversation's lease runs it: only it can cancel the
model call or kill the command. Another instance that takes a stop (a Slack
event, a button, ``/stop`` can reach any instance) writes a stop request naming
the holder's lease epoch and the run it aims at (``run_seq``: the seq of its
request, so a later run is never stopped by it); the holder polls for requests
aimed at the conversations it holds, about once a second in one query per
process, stops the run and marks the request handled. Because the request is
written only while that lease is live (one ``INSERT ... SELECT ... WHERE``
statement), a run that ended meanwhile is stopped by the asking instance itself
instead; a request left behind by a holder that died is picked up by any
instance once the lease has lapsed (:func:`orphaned`).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import cast

from sqlalchemy import Integer, String, and_, exists, insert, literal, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from conversations.store.schema import ConversationRow, StopRequestRow, utcnow
from conversations.store.sql.database import Database, changed
from conversations.store.stops import StopRequest
from core.vocabulary.audit import Means
from core.vocabulary.people import Person


class SqlStopRequests:
    """:class:`conversations.store.interfaces.StopRequests` on the ``stop_requests`` table."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def request_stop(
        self,
        conversation_id: str,
        *,
        holder: str,
        epoch: int,
        by: Person,
        run: int | None = None,
        means: Means | None = None,
    ) -> bool:
        """Ask ``holder``, holding the lease at ``epoch``, to stop ``run`` (as ``by`` asked,
        by ``means``); False if it holds the lease no more."""
        now = utcnow()
        return await self._db.write(
            lambda session: request(
                session,
                conversation_id,
                holder=holder,
                epoch=epoch,
                by=by,
                now=now,
                run=run,
                means=means,
            )
        )

    async def stop_requests(
        self, conversation_ids: Collection[str], *, orphans: bool = False
    ) -> list[StopRequest]:
        """Open stop requests for ``conversation_ids``; with ``orphans``, also those of
        conversations whose lease nobody holds now (their holder died or ended)."""
        async with self._db.read() as session:
            found = await aimed_at(session, conversation_ids)
            if orphans:
                seen = {r.id for r in found}
                found += [r for r in await orphaned(session, utcnow()) if r.id not in seen]
            return found

    async def stop_requests_handled(self, conversation_id: str) -> int:
        """Close the conversation's open stop requests (its run was stopped or had ended)."""
        now = utcnow()
        return await self._db.write(lambda session: handled(session, conversation_id, now))


# --- statements -----------------------------------------------------------------------


def request(
    session: Session,
    conversation_id: str,
    *,
    holder: str,
    epoch: int,
    by: Person,
    now: datetime,
    run: int | None = None,
    means: Means | None = None,
) -> bool:
    """Write a stop request aimed at ``run`` (asked by ``means``) if ``holder`` still holds
    the lease at ``epoch``, unexpired.

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
        literal(run, type_=Integer),
        literal(by.id),
        literal(by.name),
        literal(now),
        literal(means, type_=String),
    ).where(held)
    stmt = insert(StopRequestRow).from_select(
        [
            "conversation_id",
            "lease_epoch",
            "run_seq",
            "requested_by_id",
            "requested_by_name",
            "created_at",
            "means",
        ],
        values,
    )
    return bool(changed(session.execute(stmt)))


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


async def orphaned(session: AsyncSession, now: datetime) -> list[StopRequest]:
    """Open stop requests whose conversation no instance holds now (free or lapsed lease)."""
    unheld = or_(ConversationRow.lease_owner.is_(None), ConversationRow.lease_until <= now)
    stmt = (
        select(StopRequestRow)
        .join(ConversationRow, ConversationRow.id == StopRequestRow.conversation_id)
        .where(StopRequestRow.handled_at.is_(None), unheld)
        .order_by(StopRequestRow.id)
    )
    return [_request_of(row) for row in (await session.execute(stmt)).scalars()]


def handled(session: Session, conversation_id: str, now: datetime) -> int:
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
    return changed(session.execute(stmt))


def _request_of(row: StopRequestRow) -> StopRequest:
    return StopRequest(
        id=row.id,
        conversation_id=row.conversation_id,
        lease_epoch=row.lease_epoch,
        by=Person(id=row.requested_by_id, name=row.requested_by_name),
        run=row.run_seq,
        means=cast(Means | None, row.means),
    )
