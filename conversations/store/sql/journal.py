"""Core's ``Journal`` in SQL: load a conversation, commit a ``Change`` in one transaction.

A ``Change`` from the engine and the outbox rows for its run events go in the same
transaction, so a message is never posted for a state change that did not happen,
nor lost for one that did (docs/architecture.md, "Durability and exactly-once"); so do
the audit trail's rows of the decisions it records (``Change.audit``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import datetime
from typing import cast

from pydantic import TypeAdapter
from sqlalchemy import bindparam, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from conversations.events import PlatformRef
from conversations.store import leases, legacy
from conversations.store.interfaces import Renderer, SessionRenderer, no_sessions
from conversations.store.records import (
    Bound,
    Lease,
    as_utc,
    binding_of,
    request_of,
    request_row,
    status_of,
    status_values,
    tool_record_of,
    tool_values,
)
from conversations.store.schema import (
    CONVERSATIONS,
    DELIVERIES,
    JOURNAL,
    MODEL_CALLS,
    TOOL_CALLS,
    JournalRow,
    RequestRow,
    ToolCallRow,
    utcnow,
)
from conversations.store.sql import one_statement
from conversations.store.sql.approvals import RULES, rule_values
from conversations.store.sql.audit import insert_audit
from conversations.store.sql.change_rows import (
    BoundThread,
    Outgoing,
    Written,
    journal_rows,
    model_call_rows,
    numbered,
    outgoing,
)
from conversations.store.sql.database import (
    Database,
    conversation_row_sync,
    insert_rows,
)
from conversations.store.sql.outbox import drop_pending_notes, insert_outbox
from conversations.store.sql.requests import resolve
from core.vocabulary.entries import Entry, JournalRecord
from core.vocabulary.errors import AlreadyHandled, LeaseLost, RequestConflict, StaleSnapshot
from core.vocabulary.journal import Change, Committed
from core.vocabulary.people import Person
from core.vocabulary.run_events import Stopped
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolState

_entry_adapter: TypeAdapter[Entry] = TypeAdapter(Entry)


_c = CONVERSATIONS.c
_TOUCH = (
    update(CONVERSATIONS)
    .where(_c.id == bindparam("b_id"))
    .returning(_c.platform, _c.workspace, _c.channel, _c.thread, _c.parent)
)
"""The conversation's ``UPDATE``: its columns to set come with the parameters."""
_TOUCH_FENCED = _TOUCH.where(
    _c.lease_owner == bindparam("b_owner"), _c.lease_epoch == bindparam("b_epoch")
)
"""The same, fenced by the lease (owner and epoch)."""
_INSERT_JOURNAL = insert(JOURNAL)
_INSERT_MODEL_CALL = insert(MODEL_CALLS)
_INSERT_RULE = insert(RULES)


class SqlJournal:
    """:class:`core.vocabulary.journal.Journal` on the ``journal``, ``tool_calls``,
    ``pending_requests`` and ``conversations`` tables; ``render`` turns run events into
    outbox rows, ``sessions`` a change into its thread's session rows
    (:mod:`conversations.sessions`)."""

    def __init__(
        self, db: Database, render: Renderer, sessions: SessionRenderer = no_sessions
    ) -> None:
        self._db = db
        self._render = render
        self._sessions = sessions
        self._one_statement = db.engine.dialect.name == "postgresql"
        """Whether a fenced commit may be one statement (data-modifying ``WITH`` queries:
        PostgreSQL's, not SQLite's)."""

    async def load(self, conversation_id: str) -> ConversationSnapshot:
        """Everything about one conversation, read in one transaction (in the reader
        thread); raises :class:`ConversationNotFound`."""
        return await self._db.read_in_thread(
            lambda session: _load(session, conversation_id), snapshot=True
        )

    async def commit(
        self, conversation_id: str, change: Change, *, after_seq: int | None = None
    ) -> Committed:
        """Apply ``change`` and write its events to the outbox, in one transaction.

        A few SQLAlchemy Core statements: one ``UPDATE`` of the conversation (its
        status, and the lease fence), one ``INSERT`` per table that gets rows
        (journal, tool calls as an upsert, approvals remembered, model calls, outbox,
        audit), an ``UPDATE`` per resolution. ``after_seq`` numbers the entries; without it
        the newest ``seq`` is read first. On PostgreSQL, a commit under the lease of a
        turn's or a tool call's shape is one statement instead, once the holder knows
        the conversation's thread (:mod:`~conversations.store.sql.one_statement`).

        Raises :class:`StaleSnapshot` when the entries' ``seq`` numbers are taken,
        :class:`RequestConflict` when a compare-and-set resolution finds its request
        no longer open, :class:`AlreadyHandled` when an input it journals
        (``handled``) was journaled already, :class:`ConversationNotFound`; a commit
        made while holding the conversation's lease (a run's, see
        :mod:`conversations.store.leases`) is fenced: it raises :class:`LeaseLost`
        when another process has taken the lease over since (its ``lease_epoch`` went
        up). Each applies nothing. A
        commit that ends the run while its worker has nothing queued gives the lease
        up in the same ``UPDATE`` (:func:`conversations.store.leases.releases_with`).
        """
        holding = leases.current_holding(conversation_id)  # the writer thread has no context
        lease = holding.lease if holding is not None else None
        releasing = leases.releases_with(conversation_id, change)

        def committed_now(result: Written) -> None:
            # in the loop as soon as the commit went through, even if the run was
            # cancelled meanwhile (a stop): its rows still reach the deliverer, in order
            if releasing is not None:
                releasing.released = True
            if result[1]:
                self._db.on_outbox(result[1])

        if (
            self._one_statement
            and holding is not None
            and isinstance(holding.bound, BoundThread)
            and one_statement.fits(change, after_seq)
        ):
            outgoing = self._outgoing(conversation_id, holding.bound.ref, change)
            one = one_statement.prepare(
                conversation_id, change, after_seq, holding.lease, holding.bound, outgoing
            )
            statement, params = one.statement(release=bool(releasing))
            with contextlib.suppress(IntegrityError):  # a taken seq: said the general way
                written = await self._db.write_alone(
                    statement,
                    one.written,
                    params=params,
                    then=lambda result: committed_now(result) if result is not None else None,
                )
                if written is not None:
                    return written[0]
            # nothing written: the general way says why (or writes it)
        committed, _, found = await self._db.write(
            lambda session: self._commit(
                session, conversation_id, change, after_seq, lease, release=bool(releasing)
            ),
            then=committed_now,
        )
        if holding is not None:
            holding.bound = found
        return committed

    def _commit(
        self,
        session: Session,
        conversation_id: str,
        change: Change,
        after_seq: int | None,
        lease: Lease | None,
        *,
        release: bool = False,
    ) -> Written:
        """The statements of :meth:`commit`, in its transaction: what it wrote.
        ``release``: the conversation's ``UPDATE`` also gives ``lease`` up."""
        conn = session.connection()  # Core on the connection: no ORM in the way
        now = utcnow()
        bound = _touch(session, conn, conversation_id, change, lease, now, release=release)
        _check_pending(conn, conversation_id, change.guard_pending)
        if change.handled:
            _handle(conn, change.handled, now)
        committed = _append(conn, conversation_id, change.entries, after_seq, now)
        if change.tool_calls:
            insert_rows(
                conn,
                self._db.upsert(TOOL_CALLS, ("conversation_id", "tool_use_id")),
                [tool_values(conversation_id, r) for r in change.tool_calls],
            )
        for res in change.resolve:
            resolve(session, res)
        if change.open_request is not None:
            session.add(request_row(conversation_id, change.open_request))
        if change.remember:
            rules = [rule_values(conversation_id, bound.ref, r, now) for r in change.remember]
            insert_rows(conn, _INSERT_RULE, rules)
        calls = model_call_rows(conversation_id, change, committed)
        if calls:
            insert_rows(conn, _INSERT_MODEL_CALL, calls)
        if any(isinstance(event, Stopped) for event in change.events):
            drop_pending_notes(session, conversation_id)  # notes before it are moot
        outbox, actions = self._outgoing(conversation_id, bound.ref, change)
        for audited in change.audit:
            insert_audit(session, conversation_id, bound.ref, audited, now)
        return committed, insert_outbox(session, outbox, actions), bound  # and notes dropped

    def _outgoing(self, conversation_id: str, binding: PlatformRef, change: Change) -> Outgoing:
        """``change``'s outbox rows, rendered for ``binding``."""
        return outgoing(self._render, self._sessions, conversation_id, binding, change)


def _load(session: Session, conversation_id: str) -> ConversationSnapshot:
    """The statements of :meth:`SqlJournal.load`, in its read transaction."""
    row = conversation_row_sync(session, conversation_id)
    journal = session.execute(
        select(JournalRow.seq, JournalRow.created_at, JournalRow.body)
        .where(JournalRow.conversation_id == conversation_id)
        .order_by(JournalRow.seq)
    )
    calls = session.execute(
        select(ToolCallRow).where(ToolCallRow.conversation_id == conversation_id)
    ).scalars()
    requests = session.execute(
        select(RequestRow)
        .where(RequestRow.conversation_id == conversation_id)
        .order_by(RequestRow.created_at)
    ).scalars()
    return ConversationSnapshot(
        id=row.id,
        requester=Person(id=row.requester_id, name=row.requester_name),
        status=status_of(row),
        position=row.position,
        plan_version=row.plan_version,
        workspace=row.workspace_dir,
        journal=tuple(
            JournalRecord(
                seq=seq,
                at=as_utc(at) or at,
                entry=_entry_adapter.validate_python(legacy.entry(body)),
            )
            for seq, at, body in journal
        ),
        tool_calls={c.tool_use_id: tool_record_of(c) for c in calls},
        requests=tuple(request_of(r) for r in requests),
    )


def _touch(
    session: Session,
    conn: Connection,
    conversation_id: str,
    change: Change,
    lease: Lease | None,
    now: datetime,
    *,
    release: bool = False,
) -> BoundThread:
    """Write the change's status, position and plan version (and ``updated_at``) in one
    ``UPDATE``, fenced by ``lease`` (and giving it up, with ``release``); return the
    conversation's thread.

    Raises :class:`LeaseLost` or :class:`ConversationNotFound` when no row matched.
    """
    params = {**status_values(change, now), "b_id": conversation_id}
    if lease is not None:
        params |= {"b_owner": lease.owner, "b_epoch": lease.epoch}
        if release:
            params |= {"lease_owner": None, "lease_until": None}
    found = conn.execute(_TOUCH_FENCED if lease is not None else _TOUCH, params).first()
    if found is not None:
        return BoundThread(columns=tuple(found), ref=binding_of(cast(Bound, found)))
    conversation_row_sync(session, conversation_id)  # raises ConversationNotFound
    assert lease is not None
    raise LeaseLost(
        f"conversation {conversation_id}: this process ({lease.owner}, epoch "
        f"{lease.epoch}) no longer holds its lease; nothing was written"
    )


def _append(
    conn: Connection,
    conversation_id: str,
    entries: Sequence[Entry],
    after_seq: int | None,
    now: datetime,
) -> Committed:
    """Add ``entries`` after ``after_seq`` (read when None), stamped ``now``, in one INSERT."""
    if not entries:
        return Committed(seqs=(), at=now)
    if after_seq is None:
        after_seq = (
            conn.scalar(
                select(func.max(JOURNAL.c.seq)).where(JOURNAL.c.conversation_id == conversation_id)
            )
            or 0
        )
    seqs = numbered(entries, after_seq)
    try:
        insert_rows(conn, _INSERT_JOURNAL, journal_rows(conversation_id, entries, seqs, now))
    except IntegrityError as exc:
        raise StaleSnapshot(
            f"conversation {conversation_id}: seq {seqs[0]} is taken; reload and commit again"
        ) from exc
    return Committed(seqs=seqs, at=now)


def _check_pending(conn: Connection, conversation_id: str, tool_use_ids: Sequence[str]) -> None:
    """Compare-and-set on tool records: raise :class:`RequestConflict` unless every one of
    ``tool_use_ids`` is still ``pending_approval``."""
    if not tool_use_ids:
        return
    states = (
        conn.execute(
            select(TOOL_CALLS.c.state).where(
                TOOL_CALLS.c.conversation_id == conversation_id,
                TOOL_CALLS.c.tool_use_id.in_(tool_use_ids),
            )
        )
    ).scalars()
    if list(states).count(ToolState.PENDING_APPROVAL.value) != len(set(tool_use_ids)):
        raise RequestConflict("a gated tool call was decided meanwhile")


def _handle(conn: Connection, keys: Sequence[str], now: datetime) -> None:
    """Mark the deliveries ``keys`` journaled (their events dropped: the journal holds
    them, redacted); raises :class:`AlreadyHandled` when one was journaled already. One
    ``UPDATE ... RETURNING``; a second statement only when it marked fewer keys than
    asked (a key never recorded, as in tests, or one handled already)."""
    wanted = set(keys)
    marked = conn.execute(
        update(DELIVERIES)
        .where(DELIVERIES.c.key.in_(wanted), DELIVERIES.c.handled_at.is_(None))
        .values(handled_at=now, event=None)
        .returning(DELIVERIES.c.key)
    )
    others = wanted - set(marked.scalars())
    if others:
        handled = select(DELIVERIES.c.key).where(
            DELIVERIES.c.key.in_(others), DELIVERIES.c.handled_at.is_not(None)
        )
        if conn.execute(handled.limit(1)).first() is not None:
            raise AlreadyHandled(f"an input of {sorted(wanted)} was journaled already")
