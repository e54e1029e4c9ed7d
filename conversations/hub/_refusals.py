"""Refused attempts, each recorded in the audit trail with the notice that answers it, in
one write (docs/architecture.md, "The audit trail").

An attempt that changes nothing commits nothing of its own: someone who may not decide
or stop, a decision on a plan version replaced meanwhile or on a request decided
already, a stop that found its run ended. Its row and the notice to the thread go in
one write (:meth:`conversations.store.audit.AuditTrail.record`), so the thread is never
told of a refusal the record does not hold, nor the reverse.
"""

from __future__ import annotations

from conversations.events import PlatformRef, PostReply
from conversations.store import ConversationInfo, Outgoing
from conversations.store.audit import AuditTrail
from core.vocabulary.audit import Audited


class Refusals:
    """Records refused attempts in ``audit``, with their notices."""

    def __init__(self, *, audit: AuditTrail) -> None:
        self._audit = audit

    async def refuse(
        self, conversation: ConversationInfo, audited: Audited, text: str = ""
    ) -> None:
        """Record ``audited`` in the conversation and post ``text`` (if any) in its thread,
        through the outbox, in one write."""
        binding = conversation.binding
        notices = (Outgoing(PostReply(ref=binding, text=text)),) if text else ()
        await self._audit.record(
            audited, where=binding, conversation_id=conversation.id, notices=notices
        )

    async def outside(self, where: PlatformRef, audited: Audited) -> None:
        """Record ``audited``, about no conversation, at ``where`` (a ``/stop`` in a channel
        that found nothing its sender may stop)."""
        await self._audit.record(audited, where=where)
