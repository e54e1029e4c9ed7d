"""Pending requests in memory: their state, reminders and expiry."""

from __future__ import annotations

from datetime import datetime

from conversations.store.memory._tables import Tables, checkpoint
from conversations.store.records import DueRequest
from core.vocabulary.requests import RequestState


class MemoryRequests:
    """:class:`conversations.store.interfaces.Requests` in memory."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    async def request_state(self, request_id: str) -> RequestState | None:
        """The state of a pending request, or None if there is no such request."""
        await checkpoint()
        found = self._t.requests.get(request_id)
        return found.request.state if found else None

    async def request_conversation(self, request_id: str) -> str | None:
        """The conversation a pending request belongs to, if the request exists."""
        await checkpoint()
        found = self._t.requests.get(request_id)
        return found.conversation_id if found else None

    async def due_requests(self, now: datetime) -> list[DueRequest]:
        """Open requests whose reminder or expiry time has come, oldest first."""
        await checkpoint()
        due: list[DueRequest] = []
        for r in self._t.requests.values():
            request = r.request
            if request.state is not RequestState.OPEN:
                continue
            remind = request.remind_at is not None and request.remind_at <= now
            expired = request.expires_at is not None and request.expires_at <= now
            if (remind and r.reminded_at is None) or expired:
                due.append(DueRequest(r.conversation_id, request.id, expired))
        return due

    async def mark_reminded(self, request_id: str, now: datetime) -> bool:
        """Record the one reminder of a request; False when it was reminded already."""
        await checkpoint()
        found = self._t.requests.get(request_id)
        if found is None or found.reminded_at is not None:
            return False
        found.reminded_at = now
        return True
