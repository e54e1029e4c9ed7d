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
        """The session when kept and not expired at ``at``; one found expired is dropped."""
        await checkpoint()
        found = self._t.operator_sessions.get(id_sha256)
        if found is not None and at >= found.expires_at:
            del self._t.operator_sessions[id_sha256]
            return None
        return found

    async def close(self, id_sha256: str, *, at: datetime | None = None) -> bool:
        """End the session; True when there was one. With ``at``, the sessions expired by
        then are dropped too."""
        await checkpoint()
        kept = self._t.operator_sessions
        ended = kept.pop(id_sha256, None) is not None
        if at is not None:
            for old in [k for k, s in kept.items() if s.expires_at <= at]:
                del kept[old]
        return ended
