"""Conversations and their thread bindings in memory."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from conversations.events import PlatformRef
from conversations.store.claims import OPENED_CLAIM_EPOCH
from conversations.store.memory._tables import Conversation, Tables, checkpoint
from conversations.store.memory.inbox import add_delivery
from conversations.store.records import (
    OPENED_EPOCH,
    ConversationInfo,
    MessageLink,
    new_conversation_id,
)
from conversations.store.schedules import awaits_thread
from core.vocabulary.lifecycle import IDLE, Lifecycle
from core.vocabulary.people import Person

_ACTIVE = (Lifecycle.RUNNING, Lifecycle.WAITING)
_ENDED = (Lifecycle.DONE, Lifecycle.FAILED, Lifecycle.CANCELLED)


class MemoryThreads:
    """:class:`conversations.store.interfaces.Threads` in memory."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    async def open_conversation(
        self,
        *,
        delivery_key: str,
        binding: PlatformRef,
        requester: Person,
        workspace_root: Path,
        position: str,
        event: dict[str, Any] | None = None,
        lease: tuple[str, float] | None = None,
    ) -> str | None:
        """Record a delivery and create a conversation bound to ``binding.thread``; None
        when the delivery was seen before. Raises ``ValueError`` for a bound thread."""
        await checkpoint()
        bound = _binding(binding).model_copy(update={"parent": binding.parent})
        if delivery_key in self._t.deliveries:
            return None
        key = _thread_key(bound)
        if any(_thread_key(c.binding) == key for c in self._t.conversations.values()):
            raise ValueError(f"thread {bound.thread} of {bound.channel} is bound already")
        conversation_id = new_conversation_id()
        add_delivery(self._t, delivery_key, conversation_id, event)
        now = self._t.clock()
        self._t.conversations[conversation_id] = Conversation(
            id=conversation_id,
            binding=bound,
            requester=requester,
            status=IDLE,
            position=position,
            workspace_dir=str(workspace_root / conversation_id),
            created_at=now,
            updated_at=now,
        )
        if lease is not None:
            found = self._t.conversations[conversation_id]
            found.lease_owner, found.lease_until = lease[0], now + timedelta(seconds=lease[1])
            found.lease_epoch = OPENED_EPOCH
            found.delivery_owner, found.delivery_until = found.lease_owner, found.lease_until
            found.delivery_epoch = OPENED_CLAIM_EPOCH
        return conversation_id

    async def find_by_thread(self, ref: PlatformRef) -> ConversationInfo | None:
        """The conversation bound to ``ref``'s thread, if any."""
        await checkpoint()
        if ref.thread is None:
            return None
        key = _thread_key(ref)
        found = next(
            (c for c in self._t.conversations.values() if _thread_key(c.binding) == key), None
        )
        return found.info() if found else None

    async def find_by_message(
        self, platform: str, channel: str, message: str
    ) -> MessageLink | None:
        """The request posted as ``message`` (the newest), else its outbox row's conversation."""
        await checkpoint()
        posted = (platform, channel, message)
        for r in reversed(self._t.requests.values()):
            if r.message == posted:
                conversation = self._t.conversations.get(r.conversation_id)
                info = conversation.info() if conversation is not None else None
                return MessageLink(r.conversation_id, r.request.id, r.request.state, info)
        for row in self._t.outbox.values():
            if (row.platform, row.channel, row.platform_message_id) == posted:
                return MessageLink(row.conversation_id, row.request_id)
        return None

    async def find(self, conversation_id: str) -> ConversationInfo | None:
        """One conversation, or None if there is no such conversation."""
        await checkpoint()
        found = self._t.conversations.get(conversation_id)
        return found.info() if found else None

    async def info(self, conversation_id: str) -> ConversationInfo:
        """One conversation; raises :class:`core.vocabulary.errors.ConversationNotFound`."""
        await checkpoint()
        return self._t.conversation(conversation_id).info()

    async def active(
        self, *, platform: str, workspace: str | None = None, channel: str | None = None
    ) -> list[ConversationInfo]:
        """Conversations running or waiting, oldest first, optionally in one channel."""
        await checkpoint()
        return [
            c.info()
            for c in self._t.conversations.values()
            if c.binding.platform == platform
            and c.status.lifecycle in _ACTIVE
            and workspace in (None, c.binding.workspace)
            and channel in (None, c.binding.channel)
        ]

    async def started_by(
        self, *, platform: str, requester_id: str, since: datetime
    ) -> tuple[int, int]:
        """``(active, started)`` of ``requester_id``'s conversations on ``platform``."""
        await checkpoint()
        mine = [
            c
            for c in self._t.conversations.values()
            if c.binding.platform == platform and c.requester.id == requester_id
        ]
        active = sum(1 for c in mine if c.status.lifecycle in _ACTIVE)
        return active, sum(1 for c in mine if c.created_at >= since)

    async def ended_between(
        self, after: datetime | None, before: datetime
    ) -> list[tuple[str, str]]:
        """``(id, workspace_dir)`` of conversations ended in ``[after, before)``."""
        await checkpoint()
        ended = [
            c
            for c in self._t.conversations.values()
            if c.status.lifecycle in _ENDED
            and c.updated_at < before
            and (after is None or c.updated_at >= after)
        ]
        return [(c.id, c.workspace_dir) for c in sorted(ended, key=lambda c: c.updated_at)]

    async def running(self) -> list[str]:
        """Ids of conversations left ``running``, least recently changed first (not those
        waiting for their thread)."""
        await checkpoint()
        running = [
            c
            for c in self._t.conversations.values()
            if c.status.lifecycle is Lifecycle.RUNNING and not awaits_thread(c.binding)
        ]
        return [c.id for c in sorted(running, key=lambda c: c.updated_at)]

    async def conversations(self) -> list[ConversationInfo]:
        """Every conversation, oldest first."""
        await checkpoint()
        return [c.info() for c in self._t.conversations.values()]


def _binding(ref: PlatformRef) -> PlatformRef:
    """The thread part of ``ref``, as a conversation is found by it (the parent channel is
    kept with the conversation, but events need not carry it)."""
    return PlatformRef(
        platform=ref.platform, workspace=ref.workspace, channel=ref.channel, thread=ref.thread
    )


def _thread_key(ref: PlatformRef) -> tuple[str, str, str, str | None]:
    """What a conversation is found by, as :func:`_binding` keeps it, without a model."""
    return (ref.platform, ref.workspace, ref.channel, ref.thread)
