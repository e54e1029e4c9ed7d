"""The store's health in memory: always reachable, levels counted from the tables."""

from __future__ import annotations

from datetime import datetime

from conversations.store.health import Levels
from conversations.store.memory._tables import Tables, checkpoint
from core.vocabulary.lifecycle import Lifecycle


class MemoryHealth:
    """:class:`~conversations.store.health.StoreHealth` in memory."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    async def problem(self) -> str | None:
        """None: memory is always there."""
        return None

    async def levels(self, now: datetime) -> Levels:
        """The levels, counted."""
        await checkpoint()
        t = self._t
        pending = [row.created_at for row in t.outbox.values() if row.state == "pending"]
        lifecycles = [c.status.lifecycle for c in t.conversations.values()]
        oldest = min(pending, default=None)
        return Levels(
            inbox=sum(1 for d in t.deliveries.values() if d.event and d.handled_at is None),
            outbox=len(pending),
            oldest_outbox=0.0 if oldest is None else max(0.0, (now - oldest).total_seconds()),
            waiting=lifecycles.count(Lifecycle.WAITING),
            running=lifecycles.count(Lifecycle.RUNNING),
        )
