"""The run inspector's sessions in SQL (see :mod:`conversations.store.operator_sessions`).

A session is looked up by its primary key, one ``SELECT`` a request (and one ``DELETE``
when it is found expired); closing it is one ``DELETE``, whose row count says whether it
was there (with the expired ones, in the same transaction, when a time is given).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from conversations.store.operator_sessions import OperatorSession
from conversations.store.records import as_utc
from conversations.store.schema import OperatorSessionRow
from conversations.store.sql.database import Database, changed


class SqlOperatorSessions:
    """:class:`conversations.store.operator_sessions.OperatorSessions` on ``operator_sessions``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def open(self, session: OperatorSession) -> None:
        """Keep ``session``; those expired by its ``opened_at`` are dropped."""

        def opened(db: Session) -> None:
            expired = OperatorSessionRow.expires_at <= session.opened_at
            db.execute(delete(OperatorSessionRow).where(expired))
            db.add(
                OperatorSessionRow(
                    id_sha256=session.id_sha256,
                    operator=session.operator,
                    opened_at=session.opened_at,
                    expires_at=session.expires_at,
                    token_digest=session.token_digest,
                )
            )

        await self._db.write(opened)

    async def find(self, id_sha256: str, *, at: datetime) -> OperatorSession | None:
        """The session when kept and not expired at ``at``; one found expired is dropped."""
        stmt = select(OperatorSessionRow).where(OperatorSessionRow.id_sha256 == id_sha256)
        async with self._db.read() as db:
            row = (await db.execute(stmt)).scalar_one_or_none()
        if row is None:
            return None
        expires = as_utc(row.expires_at)
        if expires is None or at >= expires:
            await self.close(id_sha256, at=at)
            return None
        return OperatorSession(
            id_sha256=row.id_sha256,
            operator=row.operator,
            opened_at=as_utc(row.opened_at) or row.opened_at,
            expires_at=expires,
            token_digest=row.token_digest,
        )

    async def close(self, id_sha256: str, *, at: datetime | None = None) -> bool:
        """End the session; True when there was one. With ``at``, the sessions expired by
        then are dropped too."""
        by_id = OperatorSessionRow.id_sha256 == id_sha256
        if at is None:
            return await self._db.write_alone(delete(OperatorSessionRow).where(by_id), changed) > 0

        def closed(db: Session) -> bool:
            ended = changed(db.execute(delete(OperatorSessionRow).where(by_id))) > 0
            db.execute(delete(OperatorSessionRow).where(OperatorSessionRow.expires_at <= at))
            return ended

        return await self._db.write(closed)
