"""Pruning old outbox rows and deliveries in SQL.

A request's own message stays findable after its outbox row goes: the link is kept
on the request (:mod:`conversations.store.sql.requests`).

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

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from sqlalchemy import and_, delete, func, or_, select
from sqlalchemy.orm import Session, aliased

from conversations.store.records import Pruned
from conversations.store.schema import DeliveryRow, OutboxRow, RequestRow
from conversations.store.sql.database import Database
from core.vocabulary.requests import RequestState

Write = Callable[[Callable[[Session], int]], Awaitable[int]]
"""Runs one write transaction (the store's :meth:`Database.write`): committed when it returns."""
Step = Callable[[Session, datetime, int], int]

SETTLED = ("sent", "failed", "dropped")
"""Outbox states a row never leaves."""


class SqlRetention:
    """:class:`conversations.store.interfaces.Retention` on the ``outbox`` and
    ``deliveries`` tables."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def prune(self, before: datetime, *, batch: int = 500) -> Pruned:
        """Delete settled outbox rows and handled deliveries older than ``before``.

        The journal, tool records and requests stay, and so do pending rows, rows of
        open requests and unhandled deliveries (see the module's docstring). At most
        ``batch`` rows per write transaction. Returns how many rows went.
        """
        return await prune(self._db.write, before, batch=batch)


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
        count = await write(lambda session: step(session, before, batch))
        total += count
        if count < batch:
            return total


def prune_outbox(session: Session, before: datetime, limit: int) -> int:
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
    ids = list(session.execute(candidates).scalars())
    if ids:
        session.execute(delete(OutboxRow).where(OutboxRow.id.in_(ids)))
    return len(ids)


def prune_deliveries(session: Session, before: datetime, limit: int) -> int:
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
    keys = list(session.execute(candidates).scalars())
    if keys:
        session.execute(delete(DeliveryRow).where(DeliveryRow.key.in_(keys)))
    return len(keys)
