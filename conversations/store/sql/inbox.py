"""Inbound deliveries in SQL: a delivery key is the primary key of ``deliveries``."""

from __future__ import annotations

from typing import Any, cast, get_args

from sqlalchemy import Table, select, update
from sqlalchemy.orm import Session

from conversations.channels import BusyMode
from conversations.store.schema import DeliveryRow, utcnow
from conversations.store.sql.database import Database, changed, conflict_insert


def add_delivery(
    session: Session,
    key: str,
    conversation_id: str | None,
    event: dict[str, Any] | None = None,
) -> bool:
    """Insert the delivery ``key`` in ``session``'s write transaction; False when it exists.

    One ``INSERT ... ON CONFLICT DO NOTHING``: the key is the primary key, so a
    duplicate changes no row (https://www.sqlite.org/lang_upsert.html).
    """
    stmt = delivery_insert(session.get_bind().dialect.name, key, conversation_id, event)
    return changed(session.execute(stmt)) == 1


def delivery_insert(
    dialect: str, key: str, conversation_id: str | None, event: dict[str, Any] | None
) -> Any:
    """The ``INSERT ... ON CONFLICT DO NOTHING`` of the delivery ``key`` (see
    :func:`add_delivery`)."""
    table = cast(Table, DeliveryRow.__table__)
    return (
        conflict_insert(dialect, table)
        .values(key=key, conversation_id=conversation_id, event=event, received_at=utcnow())
        .on_conflict_do_nothing(index_elements=["key"])
    )


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
        ``Change.handled``: at start, :meth:`unhandled` hands it back. One statement on
        its own (:meth:`Database.write_alone`).
        """
        dialect = self._db.engine.dialect.name
        stmt = delivery_insert(dialect, delivery_key, conversation_id, event)
        return await self._db.write_alone(stmt, lambda result: changed(result) == 1)

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

    async def keep_busy_mode(self, delivery_key: str, mode: BusyMode) -> None:
        """Keep ``mode`` with the delivery (see :class:`conversations.store.Inbox`): one
        ``UPDATE`` on its own (:meth:`Database.write_alone`)."""
        stmt = update(DeliveryRow).where(DeliveryRow.key == delivery_key).values(busy_mode=mode)
        await self._db.write_alone(stmt, changed)

    async def busy_mode(self, delivery_key: str) -> BusyMode | None:
        """The busy mode kept with the delivery, if any (a value no release wrote: None)."""
        stmt = select(DeliveryRow.busy_mode).where(DeliveryRow.key == delivery_key)
        async with self._db.read() as session:
            mode = (await session.execute(stmt)).scalar_one_or_none()
        return cast(BusyMode, mode) if mode in get_args(BusyMode) else None
