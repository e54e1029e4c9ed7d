"""Forks in memory: the new conversation and everything it holds, at once."""

from __future__ import annotations

from conversations.store.forks import ForkOpening
from conversations.store.memory._tables import Conversation, Request, Tables, checkpoint
from conversations.store.schedules import unbound_thread


class MemoryForks:
    """:class:`conversations.store.forks.Forks` in memory."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    async def open_fork(self, opening: ForkOpening) -> None:
        """Write the fork with no ``await`` in between (all or nothing, as a transaction)."""
        await checkpoint()
        t, cid, forked = self._t, opening.conversation_id, opening.forked
        if cid in t.conversations or any(r.id in t.requests for r in forked.requests):
            raise ValueError(f"conversation {cid} (or a request id of it) exists already")
        now = t.clock()
        binding = opening.place.in_thread(unbound_thread(cid)).model_copy(update={"user": None})
        t.conversations[cid] = Conversation(
            id=cid,
            binding=binding,
            requester=opening.requester,
            status=forked.status,
            position=forked.position,
            plan_version=forked.plan_version,
            workspace_dir=str(opening.workspace_root / cid),
            created_at=now,
            updated_at=now,
            journal=list(forked.journal),
            tool_calls={r.tool_use_id: r for r in forked.tool_calls},
        )
        for request in forked.requests:
            t.requests[request.id] = Request(
                cid, request, created_at=now, decided_at=now if request.decided_by else None
            )
        t.add_audit(opening.original, opening.where, opening.audited, now)
        out = opening.announce
        row = t.add_outbox(cid, out.action, out.purpose, out.request_id)
        t.on_outbox([row.record()])
