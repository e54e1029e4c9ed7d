"""Conversations and their thread bindings in SQL (the ``conversations`` table)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from conversations.events import PlatformRef
from conversations.store.claims import OPENED_CLAIM_EPOCH
from conversations.store.records import (
    OPENED_EPOCH,
    ConversationInfo,
    MessageLink,
    info_of,
    new_conversation_id,
)
from conversations.store.schedules import UNBOUND
from conversations.store.schema import CONVERSATIONS, ConversationRow, OutboxRow, utcnow
from conversations.store.sql.database import Database, conversation_row
from conversations.store.sql.inbox import add_delivery
from conversations.store.sql.requests import request_link
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.people import Person

_ENDED = (Lifecycle.DONE, Lifecycle.FAILED, Lifecycle.CANCELLED)


class SqlThreads:
    """:class:`conversations.store.interfaces.Threads` on the ``conversations`` table."""

    def __init__(self, db: Database) -> None:
        self._db = db

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
        """Record a delivery and create a conversation bound to ``binding.thread``.

        Returns the new id, or None when the delivery was seen before. ``event`` is
        kept until a change marks the delivery handled.
        """
        conversation_id = new_conversation_id()

        def open_(session: Session) -> str | None:
            if not add_delivery(session, delivery_key, conversation_id, event):
                return None
            insert_conversation(
                session,
                conversation_id,
                binding=binding,
                requester=requester,
                workspace_root=workspace_root,
                position=position,
                lease=lease,
            )
            return conversation_id

        return await self._db.write(open_)

    async def find_by_thread(self, ref: PlatformRef) -> ConversationInfo | None:
        """The conversation bound to ``ref``'s thread, if any (every message in a thread
        asks: read in the reader thread, like :meth:`find`)."""
        if ref.thread is None:
            return None
        stmt = select(ConversationRow).where(
            ConversationRow.platform == ref.platform,
            ConversationRow.workspace == ref.workspace,
            ConversationRow.channel == ref.channel,
            ConversationRow.thread == ref.thread,
        )
        return await self._db.read_in_thread(lambda session: _info(session.scalar(stmt)))

    async def find_by_message(
        self, platform: str, channel: str, message: str
    ) -> MessageLink | None:
        """What the bot's message ``message`` in ``channel`` is about: the request it was
        posted for (the link kept on the request), else its outbox row's conversation."""
        stmt = select(OutboxRow).where(
            OutboxRow.platform == platform,
            OutboxRow.channel == channel,
            OutboxRow.platform_message_id == message,
        )
        async with self._db.read() as session:
            link = await request_link(session, platform, channel, message)
            if link is not None:
                return link
            row = (await session.execute(stmt.limit(1))).scalar_one_or_none()
            return MessageLink(row.conversation_id, row.request_id) if row else None

    async def find(self, conversation_id: str) -> ConversationInfo | None:
        """One conversation, or None if there is no such conversation.

        Read in the reader thread (:meth:`Database.read_in_thread`), as a run's other
        reads are: every run and every delivery worker asks for its conversation's
        place (its settings), and on a loaded machine hundreds of them at once waited
        past the async pool's checkout timeout (SQLAlchemy's ``pool_timeout``, 30 s)
        for one of its connections, which raised before the run had written anything.
        """
        return await self._db.read_in_thread(
            lambda session: _info(session.get(ConversationRow, conversation_id))
        )

    async def info(self, conversation_id: str) -> ConversationInfo:
        """One conversation; raises :class:`core.vocabulary.errors.ConversationNotFound`."""
        async with self._db.read() as session:
            return info_of(await conversation_row(session, conversation_id))

    async def active(
        self, *, platform: str, workspace: str | None = None, channel: str | None = None
    ) -> list[ConversationInfo]:
        """Conversations running or waiting, oldest first, optionally in one channel."""
        stmt = select(ConversationRow).where(
            ConversationRow.platform == platform,
            ConversationRow.lifecycle.in_([Lifecycle.RUNNING.value, Lifecycle.WAITING.value]),
        )
        if workspace is not None:
            stmt = stmt.where(ConversationRow.workspace == workspace)
        if channel is not None:
            stmt = stmt.where(ConversationRow.channel == channel)
        async with self._db.read() as session:
            rows = (await session.execute(stmt.order_by(ConversationRow.created_at))).scalars()
            return [info_of(row) for row in rows]

    async def started_by(
        self, *, platform: str, requester_id: str, since: datetime
    ) -> tuple[int, int]:
        """``(active, started)`` of ``requester_id``'s conversations on ``platform``."""
        row = ConversationRow
        active = row.lifecycle.in_([Lifecycle.RUNNING.value, Lifecycle.WAITING.value])
        stmt = select(
            func.count().filter(active), func.count().filter(row.created_at >= since)
        ).where(row.platform == platform, row.requester_id == requester_id)
        async with self._db.read() as session:
            counts = (await session.execute(stmt)).one()
        return int(counts[0]), int(counts[1])

    async def ended_between(
        self, after: datetime | None, before: datetime
    ) -> list[tuple[str, str]]:
        """``(id, workspace_dir)`` of conversations ended in ``[after, before)``."""
        row = ConversationRow
        stmt = select(row.id, row.workspace_dir).where(
            row.lifecycle.in_([e.value for e in _ENDED]), row.updated_at < before
        )
        if after is not None:
            stmt = stmt.where(row.updated_at >= after)
        async with self._db.read() as session:
            found = await session.execute(stmt.order_by(row.updated_at))
            return [(str(cid), str(path)) for cid, path in found]

    async def running(self) -> list[str]:
        """Ids of conversations left ``running`` (to resume at start), oldest first; one
        still waiting for its thread (a fork's, :mod:`conversations.store.forks`) is not."""
        stmt = (
            select(ConversationRow.id)
            .where(
                ConversationRow.lifecycle == Lifecycle.RUNNING.value,
                ~ConversationRow.thread.startswith(UNBOUND, autoescape=True),
            )
            .order_by(ConversationRow.updated_at)
        )
        async with self._db.read() as session:
            return list((await session.execute(stmt)).scalars())

    async def conversations(self) -> list[ConversationInfo]:
        """Every conversation, oldest first."""
        stmt = select(ConversationRow).order_by(ConversationRow.created_at)
        async with self._db.read() as session:
            return [info_of(row) for row in (await session.execute(stmt)).scalars()]


def _info(row: ConversationRow | None) -> ConversationInfo | None:
    return info_of(row) if row is not None else None


def insert_conversation(
    session: Session,
    conversation_id: str,
    *,
    binding: PlatformRef,
    requester: Person,
    workspace_root: Path,
    position: str,
    lease: tuple[str, float] | None = None,
) -> None:
    """Insert an ``idle`` conversation ``conversation_id`` bound to ``binding`` in
    ``session``'s write transaction (see :meth:`SqlThreads.open_conversation`)."""
    session.connection().execute(  # Core, not the ORM's unit of work
        insert(CONVERSATIONS).values(
            id=conversation_id,
            platform=binding.platform,
            workspace=binding.workspace,
            channel=binding.channel,
            thread=binding.thread or "",
            parent=binding.parent,
            requester_id=requester.id,
            requester_name=requester.name,
            lifecycle=Lifecycle.IDLE.value,
            position=position,
            workspace_dir=str(workspace_root / conversation_id),
            **_leased(lease),
        )
    )


def _leased(lease: tuple[str, float] | None) -> dict[str, Any]:
    """The lease and delivery claim columns of a conversation created leased (see
    ``open_conversation``): its opener runs it and delivers its first rows."""
    if lease is None:
        return {}
    owner, ttl = lease
    until = utcnow() + timedelta(seconds=ttl)
    return {
        "lease_owner": owner,
        "lease_until": until,
        "lease_epoch": OPENED_EPOCH,
        "delivery_owner": owner,
        "delivery_until": until,
        "delivery_epoch": OPENED_CLAIM_EPOCH,
    }
