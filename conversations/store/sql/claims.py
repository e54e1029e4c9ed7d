"""Delivery claims in SQL: four columns of ``conversations`` (:mod:`conversations.store.claims`).

``delivery_owner``, ``delivery_until`` (UTC), ``delivery_epoch`` and
``delivery_taken_from``. Taking the claim is one ``UPDATE ... WHERE`` that checks and
changes it at once (as the run lease's, :mod:`conversations.store.sql.leases`), so two
processes never both take it; it sets ``delivery_taken_from`` to the owner it
replaces, read back with ``RETURNING`` (SQL's ``SET`` sees the row as it was), so the
same statement tells whether another process held it last. A fenced ``mark_sent``
adds :func:`claim_holds` to its ``WHERE``.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, exists, select, tuple_, update
from sqlalchemy.orm import Session

from conversations.store.claims import Claim, ClaimLost
from conversations.store.schema import ConversationRow, utcnow
from conversations.store.sql.database import Database
from conversations.store.sql.leases import RENEW_BATCH


class SqlClaims:
    """:class:`conversations.store.claims.DeliveryClaims` on the ``conversations`` table."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def claim_delivery(
        self,
        conversation_id: str,
        owner: str,
        *,
        ttl: float,
        now: datetime | None = None,
        dead: str | None = None,
    ) -> Claim | None:
        """Take the claim (see the interface): one statement on its own."""
        now = now or utcnow()
        takeable = (
            ConversationRow.delivery_owner.is_(None)
            | (ConversationRow.delivery_owner == owner)
            | (ConversationRow.delivery_until < now)
        )
        if dead is not None:
            takeable = takeable | (ConversationRow.delivery_owner == dead)
        stmt = (
            update(ConversationRow)
            .where(ConversationRow.id == conversation_id, takeable)
            .values(
                delivery_owner=owner,
                delivery_until=now + timedelta(seconds=ttl),
                delivery_epoch=ConversationRow.delivery_epoch + 1,
                delivery_taken_from=ConversationRow.delivery_owner,
            )
            .returning(ConversationRow.delivery_epoch, ConversationRow.delivery_taken_from)
        )

        def taken(result: Any) -> Claim | None:
            row = result.one_or_none()
            if row is None:
                return None
            before = row[1]
            return Claim(conversation_id, owner, int(row[0]), before not in (None, owner))

        return await self._db.write_alone(stmt, taken)

    async def release_claims(self, held: Collection[Claim]) -> None:
        """Give ``held`` up (one owner's); those taken over meanwhile are left alone."""
        if not held:
            return

        def release(session: Session) -> None:
            owner = next(iter(held)).owner
            pairs = [(c.conversation_id, c.epoch) for c in held]
            for start in range(0, len(pairs), RENEW_BATCH):
                session.execute(
                    update(ConversationRow)
                    .where(
                        ConversationRow.delivery_owner == owner,
                        tuple_(ConversationRow.id, ConversationRow.delivery_epoch).in_(
                            pairs[start : start + RENEW_BATCH]
                        ),
                    )
                    .values(delivery_owner=None, delivery_until=None)
                )

        await self._db.write(release)

    async def claim_owner(self, conversation_id: str) -> str | None:
        """Who holds the conversation's delivery claim now (lapsed or not), if anyone."""
        stmt = select(ConversationRow.delivery_owner).where(ConversationRow.id == conversation_id)
        async with self._db.read() as session:
            return (await session.execute(stmt)).scalar_one_or_none()


def claim_holds(claim: Claim, conversation_id: Any) -> ColumnElement[bool]:
    """The condition a fenced write adds: ``claim`` is still its conversation's delivery
    claim (``conversation_id``: the column naming the conversation in that write)."""
    return exists().where(
        ConversationRow.id == conversation_id,
        ConversationRow.delivery_owner == claim.owner,
        ConversationRow.delivery_epoch == claim.epoch,
    )


def still_held(session: Session, claim: Claim) -> None:
    """Raise :class:`ClaimLost` (rolling the write back) unless ``claim`` still holds."""
    holds = session.execute(select(claim_holds(claim, claim.conversation_id))).scalar()
    if not holds:
        raise ClaimLost(claim)
