"""The dedupe step: the delivery key is recorded; a duplicate stops here, in the database.

A mention's key is recorded with the conversation it opens, in one write
(:meth:`conversations.store.Threads.open_conversation`); a message in a thread is
kept in the inbox with its conversation until its effect is journaled (a crash
before that hands it back at start: :meth:`conversations.hub.Hub.resume_unhandled`).
"""

from __future__ import annotations

from pathlib import Path

from conversations.events import MessagePosted, inbound_adapter
from conversations.hub._chain import Answer, Begin, Inbound, Next, Open, person_of
from conversations.store import Inbox, Threads


class Dedupe:
    """Records each delivery once; new conversations start at ``position``."""

    def __init__(
        self, *, inbox: Inbox, threads: Threads, workspace_root: Path, position: str
    ) -> None:
        self._inbox = inbox
        self._threads = threads
        self._workspace_root = workspace_root
        self._position = position

    async def __call__(self, inbound: Inbound, next: Next) -> None:
        """Go on with a delivery seen for the first time; an :class:`Open` becomes a
        :class:`Begin` of the conversation it opened."""
        event, intent = inbound.event, inbound.intent
        if isinstance(intent, Open):
            conversation_id = await self._threads.open_conversation(
                delivery_key=event.delivery_key,
                binding=intent.binding,
                requester=person_of(intent.event.author),
                workspace_root=self._workspace_root,
                position=self._position,
                event=inbound_adapter.dump_python(intent.event, mode="json"),
            )
            if conversation_id is None:
                return
            inbound.intent = Begin(conversation_id, intent.event)
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
