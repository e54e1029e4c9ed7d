"""The store's health on SQL: :class:`conversations.store.health.StoreHealth`."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import func, select, text

from conversations.store.health import Levels
from conversations.store.schema import ConversationRow, DeliveryRow, OutboxRow
from conversations.store.sql.database import Database
from conversations.store.sql.failures import database_said
from core.vocabulary.lifecycle import Lifecycle


class SqlHealth:
    """:class:`~conversations.store.health.StoreHealth` over one SQL database."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._newest: str | None = None

    async def problem(self) -> str | None:
        """None when ``alembic_version`` holds the newest revision; else what is wrong
        (one round trip on a connection of the pool; a dead one is replaced)."""
        if self._newest is None:
            from conversations.store.migrate import newest_revision  # it imports this package

            self._newest = newest_revision()
        try:
            async with self._db.engine.connect() as connection:
                found = (
                    await connection.execute(text("SELECT version_num FROM alembic_version"))
                ).scalars()
                revisions = set(found)
        except Exception as exc:  # every failure of a database that is down or unreadable
            return database_said(str(self._db.engine.url), exc)
        if revisions != {self._newest}:
            at = ", ".join(sorted(revisions)) or "no revision"
            return f"the schema is at {at}, not {self._newest}: run threadbot db upgrade"
        return None

    async def levels(self, now: datetime) -> Levels:
        """The levels, read in one statement."""
        pending = OutboxRow.state == "pending"
        stmt = select(
            select(func.count())
            .where(DeliveryRow.event.is_not(None), DeliveryRow.handled_at.is_(None))
            .scalar_subquery(),
            select(func.count()).where(pending).scalar_subquery(),
            select(func.min(OutboxRow.created_at)).where(pending).scalar_subquery(),
            select(func.count())
            .where(ConversationRow.lifecycle == Lifecycle.WAITING.value)
            .scalar_subquery(),
            select(func.count())
            .where(ConversationRow.lifecycle == Lifecycle.RUNNING.value)
            .scalar_subquery(),
        )
        async with self._db.read() as session:
            inbox, outbox, oldest, waiting, running = (await session.execute(stmt)).one()
        age = 0.0
        if oldest is not None:
            age = max(0.0, (now - oldest.replace(tzinfo=oldest.tzinfo or UTC)).total_seconds())
        return Levels(
            inbox=inbox, outbox=outbox, oldest_outbox=age, waiting=waiting, running=running
        )
