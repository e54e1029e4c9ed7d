"""The dedupe step: the delivery key is recorded; a duplicate stops here, in the database.

A mention's key is recorded with the conversation it opens, in one write
(:meth:`conversations.store.Threads.open_conversation`), which also gives this
process the conversation's lease (its run needs no write to take it) and from
which its run starts without reading the conversation back; a message in a thread is
kept in the inbox with its conversation until its effect is journaled (a crash
before that hands it back at start: :meth:`conversations.hub.Hub.resume_unhandled`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from conversations.events import MessagePosted, PlatformRef, inbound_adapter
from conversations.hub._chain import Answer, Begin, Inbound, Next, Open, person_of
from conversations.store import Inbox, Threads
from conversations.store.claims import Claim, opened_claim
from conversations.store.leases import Leases
from conversations.store.records import opened_lease, opened_snapshot


class Dedupe:
    """Records each delivery once; new conversations start at ``position``, leased to
    this process (``leases``) and claimed for its delivery (``on_claimed`` is given the
    claim: the deliverer's :meth:`~conversations.outbox.Deliverer.opened`); ``on_open``
    is told each conversation opened and its thread."""

    def __init__(
        self,
        *,
        inbox: Inbox,
        threads: Threads,
        workspace_root: Path,
        position: str,
        leases: Leases | None = None,
        on_open: Callable[[str, PlatformRef], None] | None = None,
        on_claimed: Callable[[Claim], None] | None = None,
    ) -> None:
        self._inbox = inbox
        self._threads = threads
        self._workspace_root = workspace_root
        self._position = position
        self._leases = leases
        self._on_open = on_open
        self._on_claimed = on_claimed

    async def __call__(self, inbound: Inbound, next: Next) -> None:
        """Go on with a delivery seen for the first time; an :class:`Open` becomes a
        :class:`Begin` of the conversation it opened."""
        event, intent = inbound.event, inbound.intent
        if isinstance(intent, Open):
            requester = person_of(intent.event.author)
            leases = self._leases
            conversation_id = await self._threads.open_conversation(
                delivery_key=event.delivery_key,
                binding=intent.binding,
                requester=requester,
                workspace_root=self._workspace_root,
                position=self._position,
                event=inbound_adapter.dump_python(intent.event, mode="json"),
                lease=(leases.owner, leases.ttl) if leases is not None else None,
            )
            if conversation_id is None:
                return
            if leases is not None:
                leases.opened(opened_lease(conversation_id, leases.owner))
                if self._on_claimed is not None:
                    self._on_claimed(opened_claim(conversation_id, leases.owner))
            if self._on_open is not None:
                self._on_open(conversation_id, intent.binding)
            snapshot = opened_snapshot(
                conversation_id,
                requester=requester,
                position=self._position,
                workspace_root=self._workspace_root,
            )
            inbound.intent = Begin(conversation_id, intent.event, snapshot)
        else:
            in_thread = inbound.conversation if isinstance(event, MessagePosted) else None
            kept = (
                inbound_adapter.dump_python(event, mode="json")
                if isinstance(intent, Answer)
                else None
            )
            conversation_id = in_thread.id if in_thread is not None else None
            if not await self._inbox.record_delivery(event.delivery_key, conversation_id, kept):
                return
        await next()
