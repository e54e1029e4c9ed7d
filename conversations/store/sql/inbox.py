"""Inbound deliveries in SQL: a delivery key is the primary key of ``deliveries``."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from conversations.store.schema import DeliveryRow
from conversations.store.sql.database import Database


async def add_delivery(
    session: AsyncSession,
    key: str,
    conversation_id: str | None,
    event: dict[str, Any] | None = None,
) -> bool:
    """Insert the delivery ``key`` in ``session``'s transaction; False when it exists."""
    if await session.get(DeliveryRow, key) is not None:
        return False
    session.add(DeliveryRow(key=key, conversation_id=conversation_id, event=event))
    try:
        await session.flush()
    except IntegrityError:
        return False
    return True


class SqlInbox:
    """:class:`conversations.store.interfaces.Inbox` on the ``deliveries`` table."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def record_delivery(
        self,
        delivery_key: str,
        conversation_id: str | None = None,
        event: dict[str, Any] | None = None,
    ) -> bool:
        """Record an inbound delivery; False when the key was seen before.

        With ``event``, the delivery stays unhandled until a change names its key in
        ``Change.handled``: at start, :meth:`unhandled` hands it back.
        """
        async with self._db.write() as session:
            return await add_delivery(session, delivery_key, conversation_id, event)

    async def unhandled(self) -> list[tuple[str, str, dict[str, Any]]]:
        """``(key, conversation id, event)`` of kept deliveries not yet handled, oldest first."""
        stmt = (
            select(DeliveryRow)
            .where(DeliveryRow.event.is_not(None), DeliveryRow.handled_at.is_(None))
            .order_by(DeliveryRow.received_at)
        )
        async with self._db.read() as session:
            rows = (await session.execute(stmt)).scalars()
            return [(r.key, r.conversation_id or "", r.event) for r in rows if r.event]
