"""The run inspector's sessions in memory (:mod:`conversations.store.operator_sessions`)."""

from __future__ import annotations

from datetime import datetime

from conversations.store.memory._tables import Tables, checkpoint
from conversations.store.operator_sessions import OperatorSession


class MemoryOperatorSessions:
    """:class:`conversations.store.operator_sessions.OperatorSessions` in memory."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    async def open(self, session: OperatorSession) -> None:
        """Keep ``session``; those expired by its ``opened_at`` are dropped."""
        await checkpoint()
        kept = self._t.operator_sessions
        for old in [k for k, s in kept.items() if s.expires_at <= session.opened_at]:
            del kept[old]
        kept[session.id_sha256] = session

    async def find(self, id_sha256: str, *, at: datetime) -> OperatorSession | None:
        """The session when kept and not expired at ``at``."""
        await checkpoint()
        found = self._t.operator_sessions.get(id_sha256)
        return found if found is not None and at < found.expires_at else None

    async def close(self, id_sha256: str) -> bool:
        """End the session; True when there was one."""
        await checkpoint()
        return self._t.operator_sessions.pop(id_sha256, None) is not None
