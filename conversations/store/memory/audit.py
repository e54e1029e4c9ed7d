"""The audit trail in memory (see :mod:`conversations.store.sql.audit` for the rules)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from conversations.events import PlatformRef
from conversations.store.audit import AuditEntry
from conversations.store.memory._tables import Tables, checkpoint
from conversations.store.records import Outgoing
from core.vocabulary.audit import Audited


class MemoryAudit:
    """:class:`conversations.store.audit.AuditTrail` in memory."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    async def record(
        self,
        audited: Audited,
        *,
        where: PlatformRef,
        conversation_id: str | None = None,
        notices: Sequence[Outgoing] = (),
    ) -> AuditEntry:
        """Store ``audited`` and write ``notices``, all at once; raises
        :class:`core.vocabulary.errors.ConversationNotFound`."""
        await checkpoint()
        if conversation_id is not None:
            self._t.conversation(conversation_id)
        entry = self._t.add_audit(conversation_id, where, audited)
        if conversation_id is not None and notices:
            added = [
                self._t.add_outbox(conversation_id, out.action, out.purpose, out.request_id)
                for out in notices
            ]
            self._t.on_outbox([row.record() for row in added])
        return entry

    async def entries(
        self,
        *,
        conversation_id: str | None = None,
        channel: str | None = None,
        since: datetime | None = None,
    ) -> list[AuditEntry]:
        """The rows the filters let through, oldest first (by time, then id)."""
        await checkpoint()
        found = [
            e
            for e in self._t.audit
            if (conversation_id is None or e.conversation_id == conversation_id)
            and (channel is None or e.channel == channel)
            and (since is None or e.at >= since)
        ]
        return sorted(found, key=lambda e: (e.at, e.id))
