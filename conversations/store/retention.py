"""Message links on requests, and pruning old outbox rows and deliveries.

**Links.** A reaction, or ``/decide``, names a platform message; a request's own
message (the plan, the tool approval, the go-on or retry question) must lead back
to its request for as long as the request is kept, which is for good. So when the
request's original post is sent, :func:`link_request_posts` writes the message's
platform, channel and id onto its ``pending_requests`` row, in the transaction
that marks the outbox row sent. Only that post (``purpose`` ``milestone`` with a
request id) is linked: the closing edit and notes are not. :func:`request_link`
reads the link; migration 0005 copied it there from the outbox rows of older
databases.

**Pruning.** Rows that only served delivery and dedupe go after a retention time
(``THREADBOT_RETENTION_DAYS``, counted back from the sweeper's clock); the
journal, tool records, requests and conversations stay.

- :func:`prune_outbox`: rows ``sent``, ``failed`` or ``dropped`` before the cutoff
  (a sent row by ``sent_at``; a failed or dropped one, which has no such time, by
  ``created_at``). Kept: pending rows; rows of a request still open, or of a
  request with a row still pending (its closing edit reads the original post);
  and the newest row of the table, so SQLite (whose ``INTEGER PRIMARY KEY``
  without ``AUTOINCREMENT`` reuses the largest id once it is deleted,
  https://www.sqlite.org/autoinc.html) never hands out an id again: outbox ids
  are the idempotency keys the platforms dedupe on (``tb-<id>``).
- :func:`prune_deliveries`: deliveries handled before the cutoff, and those kept
  only for dedupe (no event) received before it. Unhandled ones (an event kept,
  ``handled_at`` unset) are the durable inbox and always stay. A delivery key
  must outlive the platform's retries: Slack retries a failed event three times,
  at once, after a minute and after five minutes
  (https://docs.slack.dev/apis/events-api/#retries); Discord never redelivers. Any
  retention of an hour or more covers that.

:func:`prune_outbox` and :func:`prune_deliveries` delete one bounded batch each;
:func:`prune` commits between batches, so a large backlog never holds the write
lock for long.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import and_, delete, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from conversations.store.records import MessageLink
from conversations.store.schema import DeliveryRow, OutboxRow, RequestRow
from core.journal import RequestState

Write = Callable[[], AbstractAsyncContextManager[AsyncSession]]
"""Opens one write transaction (the store's): commits on a clean exit."""
Step = Callable[[AsyncSession, datetime, int], Awaitable[int]]

REQUEST_POST = "milestone"
"""``purpose`` of a request's own post (the default purpose of a milestone row)."""
SETTLED = ("sent", "failed", "dropped")
"""Outbox states a row never leaves."""


@dataclass(frozen=True)
class Pruned:
    """How many rows one prune deleted: outbox rows and deliveries."""

    outbox: int = 0
    deliveries: int = 0


async def prune(write: Write, before: datetime, *, batch: int = 500) -> Pruned:
    """Prune outbox rows, then deliveries, older than ``before``, ``batch`` rows at a time.

    Each batch is one write transaction of ``write``; the next begins after it
    committed, so other writers wait for one batch at most. ``before`` is made UTC
    (every stored time is). Returns how many rows of each went.
    """
    before, batch = before.astimezone(UTC), max(1, batch)
    outbox = await _in_batches(write, prune_outbox, before, batch)
    deliveries = await _in_batches(write, prune_deliveries, before, batch)
    return Pruned(outbox=outbox, deliveries=deliveries)


async def _in_batches(write: Write, step: Step, before: datetime, batch: int) -> int:
    total = 0
    while True:
        async with write() as session:
            count = await step(session, before, batch)
        total += count
        if count < batch:
            return total


async def link_request_posts(
    session: AsyncSession, ids: Sequence[int], platform_message_id: str | None
) -> None:
    """Write ``platform_message_id`` onto the requests whose own post is among ``ids``.

    Call in the transaction that marks ``ids`` sent, before their state changes:
    only rows still ``pending`` count (as in ``Store.mark_sent``). Nothing is
    written without a message id (a platform that gave none).
    """
    if platform_message_id is None or not ids:
        return
    posts = await session.execute(
        select(OutboxRow.request_id, OutboxRow.platform, OutboxRow.channel).where(
            OutboxRow.id.in_(ids),
            OutboxRow.state == "pending",
            OutboxRow.purpose == REQUEST_POST,
            OutboxRow.request_id.is_not(None),
        )
    )
    for request_id, platform, channel in posts.all():
        await session.execute(
            update(RequestRow)
            .where(RequestRow.id == request_id)
            .values(
                message_platform=platform, message_channel=channel, message_id=platform_message_id
            )
        )


async def request_link(
    session: AsyncSession, platform: str, channel: str, message: str
) -> MessageLink | None:
    """The request posted as ``message`` in ``platform``'s ``channel``, if any (the newest)."""
    stmt = (
        select(RequestRow.conversation_id, RequestRow.id)
        .where(
            RequestRow.message_platform == platform,
            RequestRow.message_channel == channel,
            RequestRow.message_id == message,
        )
        .order_by(RequestRow.created_at.desc())
        .limit(1)
    )
    found = (await session.execute(stmt)).first()
    return MessageLink(found[0], found[1]) if found else None


async def request_message_id(session: AsyncSession, request_id: str) -> str | None:
    """The platform message id linked to request ``request_id``, if its post was sent."""
    return await session.scalar(select(RequestRow.message_id).where(RequestRow.id == request_id))


async def prune_outbox(session: AsyncSession, before: datetime, limit: int) -> int:
    """Delete up to ``limit`` settled outbox rows older than ``before``; returns how many.

    Kept: see the module's docstring (pending rows, rows of open requests or of
    requests with a pending row, the newest row).
    """
    other = aliased(OutboxRow)
    newest = select(func.max(other.id)).scalar_subquery()
    waiting = aliased(OutboxRow)
    open_requests = select(RequestRow.id).where(RequestRow.state == RequestState.OPEN.value)
    edits_waiting = select(waiting.request_id).where(
        waiting.state == "pending", waiting.request_id.is_not(None)
    )
    held_requests = open_requests.union(edits_waiting)
    candidates = (
        select(OutboxRow.id)
        .where(
            OutboxRow.state.in_(SETTLED),
            func.coalesce(OutboxRow.sent_at, OutboxRow.created_at) < before,
            OutboxRow.id < newest,
            or_(OutboxRow.request_id.is_(None), OutboxRow.request_id.not_in(held_requests)),
        )
        .order_by(OutboxRow.id)
        .limit(limit)
    )
    ids = list((await session.execute(candidates)).scalars())
    if ids:
        await session.execute(delete(OutboxRow).where(OutboxRow.id.in_(ids)))
    return len(ids)


async def prune_deliveries(session: AsyncSession, before: datetime, limit: int) -> int:
    """Delete up to ``limit`` deliveries handled (or kept without an event) before ``before``.

    Unhandled deliveries are never deleted. Returns how many were.
    """
    candidates = (
        select(DeliveryRow.key)
        .where(
            or_(
                DeliveryRow.handled_at < before,
                and_(DeliveryRow.event.is_(None), DeliveryRow.received_at < before),
            )
        )
        .limit(limit)
    )
    keys = list((await session.execute(candidates)).scalars())
    if keys:
        await session.execute(delete(DeliveryRow).where(DeliveryRow.key.in_(keys)))
    return len(keys)
