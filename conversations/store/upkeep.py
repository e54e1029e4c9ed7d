"""The store's interfaces for upkeep: pending requests as the hub and sweeper see them,
and pruning (re-exported by :mod:`conversations.store.interfaces`, with the others)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from conversations.store.records import DueRequest, Pruned
from core.vocabulary.requests import RequestState


class Requests(Protocol):
    """Pending requests as the hub and the sweeper see them (the engine opens and
    decides them through the journal)."""

    async def request_state(self, request_id: str) -> RequestState | None:
        """The state of a request, or None if there is no such request."""
        ...

    async def request_conversation(self, request_id: str) -> str | None:
        """The conversation a request belongs to, if the request exists."""
        ...

    async def due_requests(self, now: datetime) -> list[DueRequest]:
        """Open requests whose reminder (not yet given) or expiry time is at or before
        ``now``, oldest first; ``expired`` tells which."""
        ...

    async def mark_reminded(self, request_id: str, now: datetime) -> bool:
        """Record the one reminder of a request; False when it was reminded already."""
        ...


class Retention(Protocol):
    """Pruning rows that only served delivery and dedupe (the journal, tool records,
    requests and conversations stay for good)."""

    async def prune(self, before: datetime, *, batch: int = 500) -> Pruned:
        """Delete settled outbox rows and handled deliveries older than ``before``.

        Kept: pending rows; rows of a request still open or with a row still pending;
        the newest outbox row (ids are never handed out twice); unhandled deliveries.
        At most ``batch`` rows per write. Returns how many rows went.
        """
        ...
