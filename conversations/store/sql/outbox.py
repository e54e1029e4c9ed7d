"""The outbox in SQL: rows written with the change that caused them, delivered at least once."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    Row,
    String,
    case,
    func,
    insert,
    literal,
    null,
    select,
    update,
)
from sqlalchemy.orm import Session

from conversations.events import OutboundAction, PostReply, outbound_adapter
from conversations.store.claims import current_claim
from conversations.store.records import (
    NO_EARLIER,
    OutboxRecord,
    Outgoing,
    PendingSend,
    RequestMessage,
    outbox_values,
)
from conversations.store.schema import OUTBOX, OutboxRow, RequestRow, utcnow
from conversations.store.sql.claims import claim_holds, still_held
from conversations.store.sql.database import Database, changed
from conversations.store.sql.requests import (
    is_request_post,
    link_post,
    link_request_posts,
)

ERROR_CHARS = 2000
"""Characters of an error kept in ``last_error``."""

_RECORD = (
    OUTBOX.c.id,
    OUTBOX.c.conversation_id,
    OUTBOX.c.purpose,
    OUTBOX.c.action,
    OUTBOX.c.state,
    OUTBOX.c.request_id,
    OUTBOX.c.platform_message_id,
    OUTBOX.c.attempts,
    OUTBOX.c.last_error,
)
"""The columns of an :class:`OutboxRecord`, in its fields' order (for ``RETURNING``)."""
_INSERT_IDS = insert(OUTBOX).returning(OUTBOX.c.id)
"""New outbox rows, executed with a list of rows: their ids (see :func:`insert_outbox`)."""
_DROPPED = "threadbot_outbox_dropped"
"""``session.info`` key: records of the notes :func:`drop_pending_notes` dropped in the
session's transaction, handed on with the rows it inserts (:func:`insert_outbox`)."""


def _record(row: Row[Any]) -> OutboxRecord:
    values: tuple[Any, ...] = tuple(row)
    return OutboxRecord(
        id=values[0],
        conversation_id=values[1],
        purpose=values[2],
        action=outbound_adapter.validate_python(values[3]),
        state=values[4],
        request_id=values[5],
        platform_message_id=values[6],
        attempts=values[7] or 0,
        last_error=values[8],
    )


def insert_outbox(
    session: Session, rows: Sequence[dict[str, Any]], actions: Sequence[OutboundAction]
) -> list[OutboxRecord]:
    """Insert ``rows`` (:func:`conversations.store.records.outbox_values`; ``actions``:
    the action of each, as the objects they were rendered from) in one ``INSERT ...
    RETURNING id`` (nothing for none); the records the transaction wrote, oldest first:
    those rows with their new ids, and the notes :func:`drop_pending_notes` dropped in
    the same transaction. For :data:`Database.on_outbox` once it committed.

    Only the ids come back: the records are built from what was inserted, since reading
    each action back (its JSON parsed, then validated) cost more than the whole write.
    The rows go as one statement (SQLAlchemy's "insertmanyvalues",
    https://docs.sqlalchemy.org/en/20/core/connections.html#engine-insertmanyvalues),
    whose rows take ascending ids in their order (SQLite and PostgreSQL insert the
    rows of a ``VALUES`` list in order, each taking the table's next id): sorted, the
    ids returned match the rows. (Asking SQLAlchemy to sort them,
    ``sort_by_parameter_order``, sends one statement per row on SQLite.)"""
    written = list(session.info.pop(_DROPPED, []))
    if rows:
        ids = session.execute(_INSERT_IDS, list(rows)).scalars()
        written += outbox_records(ids, rows, actions)
    return sorted(written, key=lambda r: r.id)


def outbox_records(
    ids: Iterable[int], rows: Sequence[Mapping[str, Any]], actions: Sequence[OutboundAction]
) -> list[OutboxRecord]:
    """The records of new outbox ``rows`` (with ``actions``), given the ids their
    ``INSERT`` returned, in any order (ascending, they are the rows' order: see
    :func:`insert_outbox`)."""
    ids = sorted(ids)
    return [
        OutboxRecord(
            id=row_id,
            conversation_id=row["conversation_id"],
            purpose=row["purpose"],
            action=action,
            state=row["state"],
            request_id=row["request_id"],
        )
        for row_id, row, action in zip(ids, rows, actions, strict=True)
    ]


class SqlOutbox:
    """:class:`conversations.store.interfaces.Outbox` on the ``outbox`` table.

    ``ix_outbox_pending`` (state, conversation, id) serves the deliverer's reads.
    """

    def __init__(self, db: Database) -> None:
        self._db = db

    async def enqueue(self, conversation_id: str, items: Sequence[Outgoing]) -> None:
        """Write outbox rows that no state change goes with (notices to people): one
        ``INSERT ... RETURNING`` on its own (:meth:`Database.write_alone`), the rows
        handed to ``on_outbox``; nothing for no items."""
        if not items:
            return
        values = [outbox_values(conversation_id, out) for out in items]
        actions = [out.action for out in items]
        await self._db.write_alone(
            _INSERT_IDS,
            lambda result: outbox_records(result.scalars(), values, actions),
            params=values,
            then=self._db.on_outbox,
        )

    async def pending_conversations(self, limit: int) -> list[tuple[str, bool]]:
        """Conversations with pending rows: ``(id, whether a non-note row is pending)``.

        At most ``limit``, the conversation whose oldest pending row is oldest first.
        The flag tells the deliverer that notes held back for their interval are to
        be flushed before a milestone.
        """
        others = func.count(OutboxRow.id).filter(OutboxRow.purpose != "note")
        stmt = (
            select(OutboxRow.conversation_id, others)
            .where(OutboxRow.state == "pending")
            .group_by(OutboxRow.conversation_id)
            .order_by(func.min(OutboxRow.id))
            .limit(limit)
        )
        rows = await self._db.read_in_thread(lambda session: session.execute(stmt).all())
        return [(str(cid), bool(count)) for cid, count in rows]

    async def pending_rows(
        self, conversation_id: str, *, after: int = 0, limit: int = 100
    ) -> list[PendingSend]:
        """Pending rows of one conversation with an id above ``after``: reports first, then
        the others oldest first (the interface says why)."""
        stmt = (
            select(OutboxRow)
            .where(
                OutboxRow.state == "pending",
                OutboxRow.conversation_id == conversation_id,
                OutboxRow.id > after,
            )
            .order_by(OutboxRow.purpose != "report", OutboxRow.id)
            .limit(limit)
        )
        rows = await self._db.read_in_thread(lambda session: list(session.scalars(stmt)))
        return [
            PendingSend(
                id=r.id,
                conversation_id=r.conversation_id,
                purpose=r.purpose,
                action=outbound_adapter.validate_python(r.action),
                request_id=r.request_id,
            )
            for r in rows
        ]

    async def request_message(self, conversation_id: str, request_id: str) -> RequestMessage | None:
        """The message a request was posted as (see the interface); None if none. One
        ``SELECT``: the request's rows with the message id linked to the request."""
        stmt = (
            select(OutboxRow, RequestRow.message_id)
            .outerjoin(RequestRow, RequestRow.id == OutboxRow.request_id)
            .where(OutboxRow.conversation_id == conversation_id, OutboxRow.request_id == request_id)
            .order_by(OutboxRow.id)
        )
        async with self._db.read() as session:
            for row, linked in (await session.execute(stmt)).all():
                action = outbound_adapter.validate_python(row.action)
                if isinstance(action, PostReply) and linked is not None:
                    return RequestMessage(action, "sent", linked)
                if isinstance(action, PostReply):
                    return RequestMessage(action, row.state, row.platform_message_id)
        return None

    async def settle_unsent(self, ids: Sequence[int], reason: str) -> None:
        """Pending rows of ``ids`` become ``dropped``; ``reason`` is kept in ``last_error``."""
        stmt = (
            update(OutboxRow)
            .where(OutboxRow.id.in_(ids), OutboxRow.state == "pending")
            .values(state="dropped", last_error=reason[:ERROR_CHARS])
        )
        await self._db.write_alone(stmt, changed)

    async def has_pending_milestone(self, conversation_id: str, *, after: int) -> bool:
        """Whether a pending row other than a note, with an id above ``after``, waits."""
        stmt = select(OutboxRow.id).where(
            OutboxRow.state == "pending",
            OutboxRow.conversation_id == conversation_id,
            OutboxRow.id > after,
            OutboxRow.purpose != "note",
        )
        async with self._db.read() as session:
            return (await session.scalar(stmt.limit(1))) is not None

    async def has_pending_in(self, platform: str, channel: str, *, up_to: int) -> bool:
        """Whether a pending row of ``platform``'s ``channel`` with an id up to ``up_to`` waits."""
        stmt = select(OutboxRow.id).where(
            OutboxRow.state == "pending",
            OutboxRow.platform == platform,
            OutboxRow.channel == channel,
            OutboxRow.id <= up_to,
        )
        async with self._db.read() as session:
            return (await session.scalar(stmt.limit(1))) is not None

    async def still_pending(self, ids: Collection[int]) -> set[int]:
        """Which of ``ids`` are still pending (not sent, failed, or dropped by a stop)."""
        if not ids:
            return set()
        stmt = select(OutboxRow.id).where(OutboxRow.id.in_(ids), OutboxRow.state == "pending")
        async with self._db.read() as session:
            return set((await session.execute(stmt)).scalars())

    async def last_outbox_id(self) -> int:
        """The id of the newest outbox row, 0 for an empty outbox."""
        async with self._db.read() as session:
            return int(await session.scalar(select(func.max(OutboxRow.id))) or 0)

    async def mark_sent(
        self,
        ids: Sequence[int],
        platform_message_id: str | None,
        *,
        rows: Sequence[PendingSend] | None = None,
        earlier: Mapping[int, str | None] = NO_EARLIER,
    ) -> None:
        """Rows delivered; a request's own post also links the message to its request
        (:func:`conversations.store.sql.requests.link_request_posts`).

        With ``rows`` (the deliverer's) nothing is read, and nothing waits for a
        ``BEGIN``: the rows of ``ids`` and ``earlier`` are marked in one ``UPDATE`` on
        its own (:meth:`Database.write_alone`; each row of ``earlier`` gets its own
        message id through a ``CASE``), and a request post among ``ids`` is linked
        first, by an ``UPDATE`` of its request of its own, made only while its row is
        pending. The link is the fact that the message was posted for the request,
        true once the platform took the post: a crash between the two statements
        leaves the message linked and its row pending, sent again or found
        (``maybe_sent``) after the restart, and linked again then. Under a delivery
        claim (:func:`conversations.store.claims.holding`) the marking ``UPDATE`` is
        fenced by it: raises :class:`~conversations.store.claims.ClaimLost`, marking
        nothing, once another process took the claim.
        """
        every = [*ids, *earlier]
        sent = (
            update(OutboxRow)
            .where(OutboxRow.id.in_(every), OutboxRow.state == "pending")
            .values(
                state="sent",
                platform_message_id=_message_ids(platform_message_id, earlier),
                sent_at=utcnow(),
            )
        )
        if rows is not None:
            claim = current_claim(rows[0].conversation_id) if rows else None
            if claim is not None:  # fenced: raises ClaimLost, writes nothing
                sent = sent.where(claim_holds(claim, OutboxRow.conversation_id))
            wanted = set(ids)
            if platform_message_id is not None:
                for post in (r for r in rows if r.id in wanted and is_request_post(r)):
                    await self._db.write_alone(link_post(post, platform_message_id), changed)
            if not await self._db.write_alone(sent, changed) and claim is not None:
                await self._db.write(lambda session: still_held(session, claim))
            return

        def mark_sent(session: Session) -> None:
            link_request_posts(session, ids, platform_message_id)
            session.execute(sent)

        await self._db.write(mark_sent)

    async def record_failure(self, send_id: int, error: str) -> int:
        """Count a failed attempt of a row and keep its error; returns the attempts so far.

        A rate limit is not a failed attempt: the deliverer does not call this for one.
        """
        stmt = (
            update(OutboxRow)
            .where(OutboxRow.id == send_id)
            .values(attempts=OutboxRow.attempts + 1, last_error=error[:ERROR_CHARS])
            .returning(OutboxRow.attempts)
        )
        attempts = await self._db.write_alone(stmt, lambda result: result.scalar())
        return int(attempts or 0)

    async def fail_for_good(
        self,
        conversation_id: str,
        ids: Sequence[int],
        error: str,
        report: Outgoing | None = None,
    ) -> bool:
        """Stop retrying ``ids`` and write ``report`` (a row telling the thread), in one go.

        Only pending rows change; the report is written only when one did, so a
        row failed twice (two processes) is reported once, and handed to
        ``on_outbox``. Returns whether any did.
        """
        failing = (
            update(OutboxRow)
            .where(OutboxRow.id.in_(ids), OutboxRow.state == "pending")
            .values(state="failed", last_error=error[:ERROR_CHARS])
        )
        if report is None:
            return bool(await self._db.write_alone(failing, changed))

        def fail(session: Session) -> list[OutboxRecord] | None:
            if not changed(session.execute(failing)):
                return None
            return insert_outbox(session, [outbox_values(conversation_id, report)], [report.action])

        def hand_on(written: list[OutboxRecord] | None) -> None:
            if written:
                self._db.on_outbox(written)

        return await self._db.write(fail, then=hand_on) is not None

    async def rows(self, conversation_id: str | None = None) -> list[OutboxRecord]:
        """Every row as stored, of one conversation or all, oldest first."""
        stmt = select(OutboxRow).order_by(OutboxRow.id)
        if conversation_id is not None:
            stmt = stmt.where(OutboxRow.conversation_id == conversation_id)
        async with self._db.read() as session:
            return [
                OutboxRecord(
                    id=r.id,
                    conversation_id=r.conversation_id,
                    purpose=r.purpose,
                    action=outbound_adapter.validate_python(r.action),
                    state=r.state,
                    request_id=r.request_id,
                    platform_message_id=r.platform_message_id,
                    attempts=r.attempts,
                    last_error=r.last_error,
                )
                for r in (await session.execute(stmt)).scalars()
            ]


def drop_pending_notes(session: Session, conversation_id: str) -> None:
    """Pending notes of the conversation become ``dropped`` (a stop made them moot).

    Their records are kept in the session for :func:`insert_outbox`, which hands them
    on with the rows the transaction inserts: the deliverer forgets them (one
    ``UPDATE ... RETURNING``, no read)."""
    result = session.execute(
        update(OUTBOX)
        .where(
            OUTBOX.c.conversation_id == conversation_id,
            OUTBOX.c.state == "pending",
            OUTBOX.c.purpose == "note",
        )
        .values(state="dropped")
        .returning(*_RECORD)
    )
    session.info.setdefault(_DROPPED, []).extend(_record(row) for row in result)


def _message_ids(message_id: str | None, earlier: Mapping[int, str | None]) -> Any:
    """The value of ``platform_message_id`` for a marking ``UPDATE``: ``message_id``, or,
    for the rows of ``earlier``, each one's own (a ``CASE`` on the id)."""
    if not earlier:
        return message_id
    whens = {row_id: (null() if mid is None else mid) for row_id, mid in earlier.items()}
    return case(whens, value=OutboxRow.id, else_=literal(message_id, String))
