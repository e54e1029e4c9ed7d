"""Pending requests in SQL: their state, reminders and expiry, and the message links on them.

**Links.** A reaction, or ``/decide``, names a platform message; a request's own
message (the plan, the tool approval, the go-on or retry question) must lead back
to its request for as long as the request is kept, which is for good. So when the
request's original post is sent, :func:`link_request_posts` writes the message's
platform, channel and id onto its ``pending_requests`` row, in the transaction
that marks the outbox row sent. Only that post (``purpose`` ``milestone`` with a
request id) is linked: the closing edit and notes are not. :func:`request_link`
reads the link; migration 0005 copied it there from the outbox rows of older
databases.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Update, exists, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from conversations.store.records import (
    DueRequest,
    MessageLink,
    PendingSend,
    as_utc,
    info_of,
    verdict_json,
)
from conversations.store.schema import ConversationRow, OutboxRow, RequestRow, utcnow
from conversations.store.sql.database import Database, changed
from core.vocabulary.errors import RequestConflict
from core.vocabulary.journal import RequestResolution
from core.vocabulary.requests import RequestState

REQUEST_POST = "milestone"
"""``purpose`` of a request's own post (the default purpose of a milestone row)."""


class SqlRequests:
    """:class:`conversations.store.interfaces.Requests` on the ``pending_requests`` table."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def request_state(self, request_id: str) -> RequestState | None:
        """The state of a pending request, or None if there is no such request."""
        async with self._db.read() as session:
            row = await session.get(RequestRow, request_id)
            return RequestState(row.state) if row else None

    async def request_conversation(self, request_id: str) -> str | None:
        """The conversation a pending request belongs to, if the request exists."""
        async with self._db.read() as session:
            row = await session.get(RequestRow, request_id)
            return row.conversation_id if row else None

    async def due_requests(self, now: datetime) -> list[DueRequest]:
        """Open requests whose reminder or expiry time has come, oldest first."""
        stmt = (
            select(RequestRow)
            .where(
                RequestRow.state == RequestState.OPEN.value,
                ((RequestRow.remind_at <= now) & RequestRow.reminded_at.is_(None))
                | (RequestRow.expires_at <= now),
            )
            .order_by(RequestRow.created_at)
        )
        async with self._db.read() as session:
            rows = (await session.execute(stmt)).scalars()
            return [
                DueRequest(
                    conversation_id=r.conversation_id,
                    request_id=r.id,
                    expired=_at_or_before(r.expires_at, now),
                )
                for r in rows
            ]

    async def mark_reminded(self, request_id: str, now: datetime) -> bool:
        """Record the one reminder of a request; False when it was reminded already."""
        stmt = (
            update(RequestRow)
            .where(RequestRow.id == request_id, RequestRow.reminded_at.is_(None))
            .values(reminded_at=now)
        )
        return await self._db.write(lambda session: bool(changed(session.execute(stmt))))


def _at_or_before(moment: datetime | None, now: datetime) -> bool:
    moment = as_utc(moment)
    return moment is not None and moment <= now


# --- statements (run inside the store's write transactions) ---------------------------


def resolve(session: Session, res: RequestResolution) -> None:
    """Close request ``res.request_id``; with ``res.only_if_open``, a compare-and-set that
    raises :class:`core.vocabulary.errors.RequestConflict` when the request is no longer open."""
    stmt = update(RequestRow).where(RequestRow.id == res.request_id)
    if res.only_if_open:
        stmt = stmt.where(RequestRow.state == RequestState.OPEN.value)
    result = session.execute(
        stmt.values(
            state=res.state.value,
            verdict=verdict_json(res.verdict),
            decided_by_id=res.by.id if res.by else None,
            decided_by_name=res.by.name if res.by else None,
            decided_at=utcnow(),
        )
    )
    if res.only_if_open and changed(result) != 1:
        raise RequestConflict(f"request {res.request_id} is no longer open")


def link_request_posts(
    session: Session, ids: Sequence[int], platform_message_id: str | None
) -> None:
    """Write ``platform_message_id`` onto the requests whose own post is among ``ids``.

    Call in the transaction that marks ``ids`` sent, before their state changes:
    only rows still ``pending`` count (as in ``Outbox.mark_sent``). Nothing is
    written without a message id (a platform that gave none).
    """
    if platform_message_id is None or not ids:
        return
    posts = session.execute(
        select(OutboxRow.request_id, OutboxRow.platform, OutboxRow.channel).where(
            OutboxRow.id.in_(ids),
            OutboxRow.state == "pending",
            OutboxRow.purpose == REQUEST_POST,
            OutboxRow.request_id.is_not(None),
        )
    )
    for request_id, platform, channel in posts.all():
        session.execute(
            update(RequestRow)
            .where(RequestRow.id == request_id)
            .values(
                message_platform=platform, message_channel=channel, message_id=platform_message_id
            )
        )


def is_request_post(row: PendingSend) -> bool:
    """Whether ``row`` is a request's own post (the row whose message is linked to it)."""
    return row.purpose == REQUEST_POST and row.request_id is not None


def link_post(post: PendingSend, message_id: str) -> Update:
    """The ``UPDATE`` that links ``message_id`` to the request of ``post`` (a request post
    the caller holds), only while its row is pending (as :func:`link_request_posts`
    does, unread)."""
    still_pending = exists().where(OutboxRow.id == post.id, OutboxRow.state == "pending")
    return (
        update(RequestRow)
        .where(RequestRow.id == post.request_id, still_pending)
        .values(
            message_platform=post.action.ref.platform,
            message_channel=post.action.ref.channel,
            message_id=message_id,
        )
    )


async def request_link(
    session: AsyncSession, platform: str, channel: str, message: str
) -> MessageLink | None:
    """The request posted as ``message`` in ``platform``'s ``channel``, if any (the newest),
    with its state and its conversation, in one ``SELECT``."""
    stmt = (
        select(RequestRow.conversation_id, RequestRow.id, RequestRow.state, ConversationRow)
        .join(ConversationRow, ConversationRow.id == RequestRow.conversation_id)
        .where(
            RequestRow.message_platform == platform,
            RequestRow.message_channel == channel,
            RequestRow.message_id == message,
        )
        .order_by(RequestRow.created_at.desc())
        .limit(1)
    )
    found = (await session.execute(stmt)).first()
    if found is None:
        return None
    cid, request_id, state, row = found
    try:
        info = info_of(row)
    except ValueError:  # a row older data left unreadable: the caller reads it itself
        info = None
    return MessageLink(cid, request_id, RequestState(state), info)
