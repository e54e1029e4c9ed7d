"""Pruning in memory: the same rules as :mod:`conversations.store.sql.retention`."""

from __future__ import annotations

from datetime import UTC, datetime

from conversations.store.memory._tables import Tables, checkpoint
from conversations.store.records import Pruned
from core.vocabulary.requests import RequestState

SETTLED = ("sent", "failed", "dropped")
"""Outbox states a row never leaves."""


class MemoryRetention:
    """:class:`conversations.store.interfaces.Retention` in memory."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    async def prune(self, before: datetime, *, batch: int = 500) -> Pruned:
        """Delete settled outbox rows and handled deliveries older than ``before``; the
        newest row, rows of held requests and unhandled deliveries stay. ``batch`` is
        accepted for the interface (memory deletes in one go)."""
        await checkpoint()
        before = before.astimezone(UTC)
        return Pruned(outbox=self._prune_outbox(before), deliveries=self._prune_deliveries(before))

    def _prune_outbox(self, before: datetime) -> int:
        t = self._t
        newest = max(t.outbox, default=0)
        held = {r.request.id for r in t.requests.values() if r.request.state is RequestState.OPEN}
        held |= {r.request_id for r in t.outbox.values() if r.state == "pending" and r.request_id}
        gone = [
            row.id
            for row in t.outbox.values()
            if row.state in SETTLED
            and (row.sent_at or row.created_at) < before
            and row.id < newest
            and (row.request_id is None or row.request_id not in held)
        ]
        for row_id in gone:
            del t.outbox[row_id]
        return len(gone)

    def _prune_deliveries(self, before: datetime) -> int:
        gone = [
            d.key
            for d in self._t.deliveries.values()
            if (d.handled_at is not None and d.handled_at < before)
            or (d.event is None and d.received_at < before)
        ]
        for key in gone:
            del self._t.deliveries[key]
        return len(gone)
