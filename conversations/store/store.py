"""The SQLAlchemy store: core's ``Journal``, thread bindings, deliveries and the outbox.

Every write is one transaction. Writes of one process are serialised by a lock
(SQLite has one writer anyway; WAL lets readers go on). A ``Change`` from the
engine and the outbox rows for its run events go in the same transaction, so a
message is never posted for a state change that did not happen, nor lost for
one that did (DESIGN.md, "Durability and exactly-once").
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic import TypeAdapter
from sqlalchemy import event, func, select, update
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from conversations.events import PlatformRef, PostReply, outbound_adapter
from conversations.store import leases, retention, stops
from conversations.store.leases import Lease, LeaseState
from conversations.store.records import (
    ConversationInfo,
    DueRequest,
    MessageLink,
    Outgoing,
    PendingSend,
    RequestMessage,
    apply_status,
    as_utc,
    binding_of,
    info_of,
    outbox_row,
    request_of,
    request_row,
    status_of,
    tool_record_of,
    tool_row,
)
from conversations.store.retention import Pruned
from conversations.store.schema import (
    ConversationRow,
    DeliveryRow,
    JournalRow,
    OutboxRow,
    RequestRow,
    ToolCallRow,
    UsageRow,
    utcnow,
)
from conversations.store.stops import StopRequest
from core.errors import ConversationNotFound, LeaseLost, RequestConflict
from core.journal import (
    AssistantTurn,
    Change,
    ConversationSnapshot,
    Entry,
    JournalRecord,
    Person,
    RequestResolution,
    RequestState,
    ToolState,
)
from core.lifecycle import Lifecycle
from core.run_events import RunEvent, Stopped

_entry_adapter: TypeAdapter[Entry] = TypeAdapter(Entry)


Renderer = Callable[[PlatformRef, RunEvent], Sequence[Outgoing]]
"""Turns a run event of a conversation bound to a thread into outbox rows."""


_BEGIN_MODE = "threadbot_sqlite_begin"
_BEGIN_MODES = frozenset({"DEFERRED", "IMMEDIATE", "EXCLUSIVE"})

BEGIN_IMMEDIATE: Mapping[str, str] = MappingProxyType({_BEGIN_MODE: "IMMEDIATE"})
"""Execution options for a connection whose transactions will write: on SQLite they
begin with ``BEGIN IMMEDIATE`` (see :func:`create_engine`); other databases ignore them."""


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    """On each new connection: the driver's own transaction handling off, then the pragmas.

    With ``isolation_level = None`` the sqlite3 driver (under aiosqlite) emits no
    BEGIN of its own; :func:`_sqlite_begin` emits it instead (SQLAlchemy's recipe,
    https://docs.sqlalchemy.org/en/20/dialects/sqlite.html#serializable-isolation-savepoints-transactional-ddl).
    The pragmas run here, before any transaction: ``journal_mode`` cannot change
    inside one (https://www.sqlite.org/pragma.html#pragma_journal_mode) and
    ``foreign_keys`` is a no-op inside one
    (https://www.sqlite.org/pragma.html#pragma_foreign_keys).
    """
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout=10000")  # first: turning WAL on may wait for a lock
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _sqlite_begin(connection: Connection) -> None:
    """Emit the BEGIN of a SQLAlchemy transaction: ``BEGIN``, or ``BEGIN IMMEDIATE`` for
    a connection with :data:`BEGIN_IMMEDIATE`. Raises ``ValueError`` for another mode."""
    mode = connection.get_execution_options().get(_BEGIN_MODE)
    if mode is not None and mode not in _BEGIN_MODES:
        raise ValueError(f"{_BEGIN_MODE} must be one of {sorted(_BEGIN_MODES)}, not {mode!r}")
    connection.exec_driver_sql(f"BEGIN {mode}" if mode else "BEGIN")


def create_engine(url: str) -> AsyncEngine:
    """An async engine for ``url``; for SQLite, makes the file's folder and sets it up.

    SQLite gets WAL (readers go on while one process writes), ``synchronous=NORMAL``,
    foreign keys, a 10 s ``busy_timeout``, and real transactions: SQLAlchemy emits
    ``BEGIN`` when a transaction begins, so every statement of it, DDL included,
    commits or rolls back together (the sqlite3 driver's legacy mode emits BEGIN
    only before INSERT/UPDATE/DELETE, so each ``CREATE TABLE`` committed on its own:
    https://docs.sqlalchemy.org/en/20/dialects/sqlite.html#serializable-isolation-savepoints-transactional-ddl).
    A transaction on a connection with :data:`BEGIN_IMMEDIATE` takes the write lock
    at ``BEGIN`` (see :class:`_WriteTransaction` for why).
    """
    parsed = make_url(url)
    engine = create_async_engine(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        event.listen(engine.sync_engine, "begin", _sqlite_begin)
    return engine


class Store:
    """The store over one database; implements :class:`core.journal.Journal`.

    ``render`` turns run events into outbox rows; ``on_outbox`` is called after a
    commit that wrote any (the deliverer wakes up).
    """

    def __init__(
        self,
        *,
        engine: AsyncEngine,
        render: Renderer,
        on_outbox: Callable[[], None] = lambda: None,
    ) -> None:
        self.engine = engine
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)
        self._render = render
        self.on_outbox = on_outbox
        self._write_lock = asyncio.Lock()

    async def close(self) -> None:
        """Close every pooled connection."""
        await self.engine.dispose()

    # --- conversations ---------------------------------------------------------

    async def open_conversation(
        self,
        *,
        delivery_key: str,
        binding: PlatformRef,
        requester: Person,
        workspace_root: Path,
        position: str,
        event: dict[str, Any] | None = None,
    ) -> str | None:
        """Record a delivery and create a conversation bound to ``binding.thread``.

        Returns the new id, or None when the delivery was seen before. ``event`` is
        kept until a change marks the delivery handled (:meth:`unhandled`).
        """
        conversation_id = _new_id()
        async with self._write() as session:
            if not await self._add_delivery(session, delivery_key, conversation_id, event):
                return None
            session.add(
                ConversationRow(
                    id=conversation_id,
                    platform=binding.platform,
                    workspace=binding.workspace,
                    channel=binding.channel,
                    thread=binding.thread or "",
                    requester_id=requester.id,
                    requester_name=requester.name,
                    lifecycle=Lifecycle.IDLE.value,
                    position=position,
                    workspace_dir=str(workspace_root / conversation_id),
                )
            )
        return conversation_id

    async def record_delivery(
        self,
        delivery_key: str,
        conversation_id: str | None = None,
        event: dict[str, Any] | None = None,
    ) -> bool:
        """Record an inbound delivery; False when the key was seen before.

        With ``event``, the delivery stays unhandled until a change names its key in
        ``Change.handled``: at start, :meth:`unhandled` hands it back.
        """
        async with self._write() as session:
            return await self._add_delivery(session, delivery_key, conversation_id, event)

    async def unhandled(self) -> list[tuple[str, str, dict[str, Any]]]:
        """``(key, conversation id, event)`` of kept deliveries not yet handled, oldest first."""
        stmt = (
            select(DeliveryRow)
            .where(DeliveryRow.event.is_not(None), DeliveryRow.handled_at.is_(None))
            .order_by(DeliveryRow.received_at)
        )
        async with self._sessions() as session:
            rows = (await session.execute(stmt)).scalars()
            return [(r.key, r.conversation_id or "", r.event) for r in rows if r.event]

    async def find_by_thread(self, ref: PlatformRef) -> ConversationInfo | None:
        """The conversation bound to ``ref``'s thread, if any."""
        if ref.thread is None:
            return None
        stmt = select(ConversationRow).where(
            ConversationRow.platform == ref.platform,
            ConversationRow.workspace == ref.workspace,
            ConversationRow.channel == ref.channel,
            ConversationRow.thread == ref.thread,
        )
        async with self._sessions() as session:
            row = (await session.execute(stmt)).scalar_one_or_none()
            return info_of(row) if row else None

    async def info(self, conversation_id: str) -> ConversationInfo:
        """One conversation; raises :class:`ConversationNotFound`."""
        async with self._sessions() as session:
            return info_of(await _conversation(session, conversation_id))

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
        async with self._sessions() as session:
            rows = (await session.execute(stmt.order_by(ConversationRow.created_at))).scalars()
            return [info_of(row) for row in rows]

    async def find_by_message(
        self, platform: str, channel: str, message: str
    ) -> MessageLink | None:
        """What the bot's message ``message`` in ``channel`` is about, if the bot sent it.

        A request's own message is found through the link on its request, kept for
        good; any other message (a note, an answer, a notice) through its outbox
        row, which is pruned after the retention time (:meth:`prune`): a reaction
        on such a message older than that finds nothing (None), as if the bot had
        not sent it. None for a message the bot did not send.
        """
        stmt = select(OutboxRow).where(
            OutboxRow.platform == platform,
            OutboxRow.channel == channel,
            OutboxRow.platform_message_id == message,
        )
        async with self._sessions() as session:
            link = await retention.request_link(session, platform, channel, message)
            if link is not None:
                return link
            row = (await session.execute(stmt.limit(1))).scalar_one_or_none()
            return MessageLink(row.conversation_id, row.request_id) if row else None

    async def find(self, conversation_id: str) -> ConversationInfo | None:
        """One conversation, or None if there is no such conversation."""
        async with self._sessions() as session:
            row = await session.get(ConversationRow, conversation_id)
            return info_of(row) if row else None

    async def request_conversation(self, request_id: str) -> str | None:
        """The conversation a pending request belongs to, if the request exists."""
        async with self._sessions() as session:
            row = await session.get(RequestRow, request_id)
            return row.conversation_id if row else None

    async def request_state(self, request_id: str) -> RequestState | None:
        """The state of a pending request, or None if there is no such request."""
        async with self._sessions() as session:
            row = await session.get(RequestRow, request_id)
            return RequestState(row.state) if row else None

    async def running(self) -> list[str]:
        """Ids of conversations left ``running`` (to resume at start), oldest first."""
        stmt = (
            select(ConversationRow.id)
            .where(ConversationRow.lifecycle == Lifecycle.RUNNING.value)
            .order_by(ConversationRow.updated_at)
        )
        async with self._sessions() as session:
            return list((await session.execute(stmt)).scalars())

    # --- leases (fenced: conversations/store/leases.py) --------------------------

    async def acquire_lease(
        self,
        conversation_id: str,
        owner: str,
        *,
        ttl: float,
        now: datetime | None = None,
        dead: str | None = None,
    ) -> Lease | None:
        """Take the right to run a conversation for ``ttl`` seconds, with a new epoch.

        Succeeds when the lease is free, expired, already ``owner``'s, or held by
        ``dead`` (an owner the caller knows is gone); None otherwise.
        """
        now = now or utcnow()
        async with self._write() as session:
            return await leases.acquire(
                session,
                conversation_id,
                owner,
                until=now + timedelta(seconds=ttl),
                now=now,
                dead=dead,
            )

    async def renew_leases(
        self, held: Collection[Lease], *, ttl: float, now: datetime | None = None
    ) -> set[str]:
        """Extend ``held`` (one owner's) by ``ttl`` seconds, epoch unchanged; the ids kept."""
        if not held:
            return set()
        until = (now or utcnow()) + timedelta(seconds=ttl)
        async with self._write() as session:
            return await leases.renew(session, held, until=until)

    async def lease_owner(self, conversation_id: str) -> str | None:
        """Who holds the conversation's lease now (expired or not), if anyone."""
        async with self._sessions() as session:
            return await leases.holder(session, conversation_id)

    async def release_lease(self, lease: Lease) -> bool:
        """Give ``lease`` up; False when it was no longer held (taken over meanwhile)."""
        async with self._write() as session:
            return await leases.release(session, lease)

    async def lease_state(self, conversation_id: str) -> LeaseState | None:
        """Who holds the conversation's lease, at which epoch, until when (None: unknown id)."""
        async with self._sessions() as session:
            return await leases.state(session, conversation_id)

    # --- stop requests (conversations/store/stops.py) ------------------------------

    async def request_stop(
        self, conversation_id: str, *, holder: str, epoch: int, by: Person
    ) -> bool:
        """Ask ``holder`` to stop the run it holds at ``epoch``; False if it holds it no more."""
        async with self._write() as session:
            return await stops.request(
                session, conversation_id, holder=holder, epoch=epoch, by=by, now=utcnow()
            )

    async def stop_requests(
        self, conversation_ids: Collection[str], *, orphans: bool = False
    ) -> list[StopRequest]:
        """Open stop requests for ``conversation_ids``; with ``orphans``, also those of
        conversations whose lease nobody holds now (their holder died or ended)."""
        async with self._sessions() as session:
            found = await stops.aimed_at(session, conversation_ids)
            if orphans:
                seen = {r.id for r in found}
                found += [r for r in await stops.orphans(session, utcnow()) if r.id not in seen]
            return found

    async def stop_requests_handled(self, conversation_id: str) -> int:
        """Close the conversation's open stop requests (its run was stopped or had ended)."""
        async with self._write() as session:
            return await stops.handled(session, conversation_id, utcnow())

    # --- reminders and expiry ---------------------------------------------------

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
        async with self._sessions() as session:
            rows = (await session.execute(stmt)).scalars()
            return [
                DueRequest(
                    conversation_id=r.conversation_id,
                    request_id=r.id,
                    expired=r.expires_at is not None and as_utc(r.expires_at) <= now,  # type: ignore[operator]
                )
                for r in rows
            ]

    async def mark_reminded(self, request_id: str, now: datetime) -> bool:
        """Record the one reminder of a request; False when it was reminded already."""
        async with self._write() as session:
            result = await session.execute(
                update(RequestRow)
                .where(RequestRow.id == request_id, RequestRow.reminded_at.is_(None))
                .values(reminded_at=now)
            )
            return bool(getattr(result, "rowcount", 0))

    # --- core.journal.Journal --------------------------------------------------

    async def load(self, conversation_id: str) -> ConversationSnapshot:
        """Everything about one conversation; raises :class:`ConversationNotFound`."""
        async with self._sessions() as session:
            row = await _conversation(session, conversation_id)
            journal = (
                await session.execute(
                    select(JournalRow)
                    .where(JournalRow.conversation_id == conversation_id)
                    .order_by(JournalRow.seq)
                )
            ).scalars()
            calls = (
                await session.execute(
                    select(ToolCallRow).where(ToolCallRow.conversation_id == conversation_id)
                )
            ).scalars()
            requests = (
                await session.execute(
                    select(RequestRow)
                    .where(RequestRow.conversation_id == conversation_id)
                    .order_by(RequestRow.created_at)
                )
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
                        seq=j.seq,
                        at=as_utc(j.created_at) or j.created_at,
                        entry=_entry_adapter.validate_python(j.body),
                    )
                    for j in journal
                ),
                tool_calls={c.tool_use_id: tool_record_of(c) for c in calls},
                requests=tuple(request_of(r) for r in requests),
            )

    async def commit(self, conversation_id: str, change: Change) -> list[int]:
        """Apply ``change`` and write its events to the outbox, in one transaction.

        Raises :class:`RequestConflict` (and applies nothing) when a compare-and-set
        resolution finds its request no longer open. A commit made while holding the
        conversation's lease (a run's, see :mod:`conversations.store.leases`) is
        fenced: it raises :class:`LeaseLost` (and applies nothing) when another
        process has taken the lease over since (its ``lease_epoch`` went up).
        """
        wrote_outbox = False
        lease = leases.current_lease(conversation_id)
        async with self._write() as session:
            if lease is not None and not await leases.still_held(session, lease, now=utcnow()):
                raise LeaseLost(
                    f"conversation {conversation_id}: this process ({lease.owner}, epoch "
                    f"{lease.epoch}) no longer holds its lease; nothing was written"
                )
            row = await _conversation(session, conversation_id)
            await _check_pending(session, conversation_id, change.guard_pending)
            if change.handled:
                await session.execute(
                    update(DeliveryRow)
                    .where(DeliveryRow.key.in_(change.handled))
                    .values(handled_at=utcnow())
                )
            seqs = await self._append(session, conversation_id, change.entries)
            for record in change.tool_calls:
                await session.merge(tool_row(conversation_id, record))
            for res in change.resolve:
                await self._resolve(session, res.request_id, res)
            if change.open_request is not None:
                session.add(request_row(conversation_id, change.open_request))
            apply_status(row, change)
            for entry in change.entries:
                if isinstance(entry, AssistantTurn) and entry.usage is not None:
                    session.add(
                        UsageRow(conversation_id=conversation_id, **entry.usage.model_dump())
                    )
            for run_event in change.events:
                if isinstance(run_event, Stopped):
                    await self._drop_pending_notes(session, conversation_id)
                for out in self._render(binding_of(row), run_event):
                    session.add(outbox_row(conversation_id, out))
                    wrote_outbox = True
        if wrote_outbox:
            self.on_outbox()
        return seqs

    # --- outbox ----------------------------------------------------------------

    async def enqueue(self, conversation_id: str, items: Sequence[Outgoing]) -> None:
        """Write outbox rows that no state change goes with (notices to people)."""
        async with self._write() as session:
            for out in items:
                session.add(outbox_row(conversation_id, out))
        if items:
            self.on_outbox()

    async def pending_conversations(self, limit: int) -> list[tuple[str, bool]]:
        """Conversations with pending outbox rows: ``(id, whether a non-note row is pending)``.

        At most ``limit``, the conversation whose oldest pending row is oldest first
        (``ix_outbox_pending`` serves it). The flag tells the deliverer that notes
        held back for their interval are to be flushed before a milestone.
        """
        others = func.count(OutboxRow.id).filter(OutboxRow.purpose != "note")
        stmt = (
            select(OutboxRow.conversation_id, others)
            .where(OutboxRow.state == "pending")
            .group_by(OutboxRow.conversation_id)
            .order_by(func.min(OutboxRow.id))
            .limit(limit)
        )
        async with self._sessions() as session:
            return [(str(cid), bool(count)) for cid, count in (await session.execute(stmt)).all()]

    async def pending_rows(
        self, conversation_id: str, *, after: int = 0, limit: int = 100
    ) -> list[PendingSend]:
        """Pending rows of one conversation with an id above ``after``, oldest first."""
        stmt = (
            select(OutboxRow)
            .where(
                OutboxRow.state == "pending",
                OutboxRow.conversation_id == conversation_id,
                OutboxRow.id > after,
            )
            .order_by(OutboxRow.id)
            .limit(limit)
        )
        async with self._sessions() as session:
            return [
                PendingSend(
                    id=r.id,
                    conversation_id=r.conversation_id,
                    purpose=r.purpose,
                    action=outbound_adapter.validate_python(r.action),
                    request_id=r.request_id,
                )
                for r in (await session.execute(stmt)).scalars()
            ]

    async def request_message(self, conversation_id: str, request_id: str) -> RequestMessage | None:
        """The message a request was posted as: its conversation's first row with
        ``request_id`` that posts a reply (later rows with the id edit it). None if none.

        The message id is the link on the request when its post was sent (then the
        state is ``sent``), else the row's own. None too once the row is pruned,
        which happens only after the request closed and its closing edit was settled.
        """
        stmt = (
            select(OutboxRow)
            .where(OutboxRow.conversation_id == conversation_id, OutboxRow.request_id == request_id)
            .order_by(OutboxRow.id)
        )
        async with self._sessions() as session:
            linked = await retention.request_message_id(session, request_id)
            for row in (await session.execute(stmt)).scalars():
                action = outbound_adapter.validate_python(row.action)
                if isinstance(action, PostReply) and linked is not None:
                    return RequestMessage(action, "sent", linked)
                if isinstance(action, PostReply):
                    return RequestMessage(action, row.state, row.platform_message_id)
        return None

    async def settle_unsent(self, ids: Sequence[int], reason: str) -> None:
        """Rows with nothing to send (an edit of a message never delivered): ``dropped``.

        Only pending rows change; ``reason`` is kept in ``last_error``.
        """
        async with self._write() as session:
            await session.execute(
                update(OutboxRow)
                .where(OutboxRow.id.in_(ids), OutboxRow.state == "pending")
                .values(state="dropped", last_error=reason[:2000])
            )

    async def has_pending_milestone(self, conversation_id: str, *, after: int) -> bool:
        """Whether a pending row other than a note, with an id above ``after``, waits."""
        stmt = select(OutboxRow.id).where(
            OutboxRow.state == "pending",
            OutboxRow.conversation_id == conversation_id,
            OutboxRow.id > after,
            OutboxRow.purpose != "note",
        )
        async with self._sessions() as session:
            return (await session.scalar(stmt.limit(1))) is not None

    async def has_pending_in(self, platform: str, channel: str, *, up_to: int) -> bool:
        """Whether a pending row of ``platform``'s ``channel`` with an id up to ``up_to`` waits."""
        stmt = select(OutboxRow.id).where(
            OutboxRow.state == "pending",
            OutboxRow.platform == platform,
            OutboxRow.channel == channel,
            OutboxRow.id <= up_to,
        )
        async with self._sessions() as session:
            return (await session.scalar(stmt.limit(1))) is not None

    async def still_pending(self, ids: Collection[int]) -> set[int]:
        """Which of ``ids`` are still pending (not sent, failed, or dropped by a stop)."""
        if not ids:
            return set()
        stmt = select(OutboxRow.id).where(OutboxRow.id.in_(ids), OutboxRow.state == "pending")
        async with self._sessions() as session:
            return set((await session.execute(stmt)).scalars())

    async def last_outbox_id(self) -> int:
        """The id of the newest outbox row, 0 for an empty outbox."""
        async with self._sessions() as session:
            return int(await session.scalar(select(func.max(OutboxRow.id))) or 0)

    async def mark_sent(self, ids: Sequence[int], platform_message_id: str | None) -> None:
        """Rows delivered (several when notes were merged into one message).

        Only pending rows change: a note dropped by a stop meanwhile stays dropped.
        A request's own post also links ``platform_message_id`` to its request, in
        the same transaction (:func:`conversations.store.retention.link_request_posts`).
        """
        async with self._write() as session:
            await retention.link_request_posts(session, ids, platform_message_id)
            await session.execute(
                update(OutboxRow)
                .where(OutboxRow.id.in_(ids), OutboxRow.state == "pending")
                .values(state="sent", platform_message_id=platform_message_id, sent_at=utcnow())
            )

    async def record_failure(self, send_id: int, error: str) -> int:
        """Count a failed attempt of a row and keep its error; returns the attempts so far.

        A rate limit is not a failed attempt: the deliverer does not call this for one.
        """
        async with self._write() as session:
            await session.execute(
                update(OutboxRow)
                .where(OutboxRow.id == send_id)
                .values(attempts=OutboxRow.attempts + 1, last_error=error[:2000])
            )
            attempts = await session.scalar(
                select(OutboxRow.attempts).where(OutboxRow.id == send_id)
            )
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
        row failed twice (two processes) is reported once. Returns whether any did.
        """
        async with self._write() as session:
            result = await session.execute(
                update(OutboxRow)
                .where(OutboxRow.id.in_(ids), OutboxRow.state == "pending")
                .values(state="failed", last_error=error[:2000])
            )
            changed = bool(getattr(result, "rowcount", 0))
            if changed and report is not None:
                session.add(outbox_row(conversation_id, report))
        if changed and report is not None:
            self.on_outbox()
        return changed

    # --- retention (conversations/store/retention.py) ---------------------------

    async def prune(self, before: datetime, *, batch: int = 500) -> Pruned:
        """Delete settled outbox rows and handled deliveries older than ``before``.

        The journal, tool records and requests stay, and so do pending rows, rows of
        open requests and unhandled deliveries (:mod:`conversations.store.retention`).
        At most ``batch`` rows per write transaction. Returns how many rows went.
        """
        return await retention.prune(self._write, before, batch=batch)

    # --- internals -------------------------------------------------------------

    def _write(self) -> _WriteTransaction:
        return _WriteTransaction(self._sessions, self._write_lock)

    async def _add_delivery(
        self,
        session: AsyncSession,
        key: str,
        conversation_id: str | None,
        event: dict[str, Any] | None = None,
    ) -> bool:
        if await session.get(DeliveryRow, key) is not None:
            return False
        session.add(DeliveryRow(key=key, conversation_id=conversation_id, event=event))
        try:
            await session.flush()
        except IntegrityError:
            return False
        return True

    async def _append(
        self, session: AsyncSession, conversation_id: str, entries: Sequence[Entry]
    ) -> list[int]:
        if not entries:
            return []
        last = await session.scalar(
            select(func.max(JournalRow.seq)).where(JournalRow.conversation_id == conversation_id)
        )
        seqs = list(range((last or 0) + 1, (last or 0) + 1 + len(entries)))
        for seq, entry in zip(seqs, entries, strict=True):
            session.add(
                JournalRow(
                    conversation_id=conversation_id,
                    seq=seq,
                    kind=entry.kind,
                    body=entry.model_dump(mode="json"),
                )
            )
        return seqs

    async def _resolve(
        self, session: AsyncSession, request_id: str, res: RequestResolution
    ) -> None:
        stmt = update(RequestRow).where(RequestRow.id == request_id)
        if res.only_if_open:
            stmt = stmt.where(RequestRow.state == RequestState.OPEN.value)
        result = await session.execute(
            stmt.values(
                state=res.state.value,
                decision=res.decision,
                decided_by_id=res.by.id if res.by else None,
                decided_by_name=res.by.name if res.by else None,
                decided_at=utcnow(),
            )
        )
        if res.only_if_open and getattr(result, "rowcount", 0) != 1:
            raise RequestConflict(f"request {request_id} is no longer open")

    async def _drop_pending_notes(self, session: AsyncSession, conversation_id: str) -> None:
        await session.execute(
            update(OutboxRow)
            .where(
                OutboxRow.conversation_id == conversation_id,
                OutboxRow.state == "pending",
                OutboxRow.purpose == "note",
            )
            .values(state="dropped")
        )


class _WriteTransaction:
    """``async with``: take the write lock, open a session, commit or roll back.

    The transaction begins at once, with :data:`BEGIN_IMMEDIATE`: on SQLite it takes
    the database's write lock at ``BEGIN``, waiting up to ``busy_timeout`` while
    another process writes. A plain (deferred) ``BEGIN`` would read first and ask
    for the write lock at the first write; in WAL mode, when another process has
    committed since the read, that upgrade fails with ``SQLITE_BUSY`` at once,
    without waiting (https://www.sqlite.org/lang_transaction.html, "Read
    transactions versus write transactions"; https://www.sqlite.org/wal.html,
    "Sometimes Queries Return SQLITE_BUSY In WAL Mode"), and several bot
    processes share one file. Reads elsewhere stay deferred, so they never wait
    for a writer. Raises ``sqlalchemy.exc.OperationalError`` ("database is locked")
    when the lock is not had within ``busy_timeout``.
    """

    def __init__(self, sessions: async_sessionmaker[AsyncSession], lock: asyncio.Lock) -> None:
        self._sessions = sessions
        self._lock = lock
        self._session: AsyncSession | None = None

    async def __aenter__(self) -> AsyncSession:
        await self._lock.acquire()
        self._session = self._sessions()
        try:
            await self._session.begin()
            await self._session.connection(execution_options=BEGIN_IMMEDIATE)
        except BaseException:
            await self._session.close()
            self._lock.release()
            raise
        return self._session

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        assert self._session is not None
        try:
            if exc_type is None:
                await self._session.commit()
            else:
                await self._session.rollback()
        finally:
            await self._session.close()
            self._lock.release()


def _new_id() -> str:
    return uuid.uuid4().hex


async def _conversation(session: AsyncSession, conversation_id: str) -> ConversationRow:
    row = await session.get(ConversationRow, conversation_id)
    if row is None:
        raise ConversationNotFound(conversation_id)
    return row


async def _check_pending(
    session: AsyncSession, conversation_id: str, tool_use_ids: Sequence[str]
) -> None:
    if not tool_use_ids:
        return
    states = (
        await session.execute(
            select(ToolCallRow.state).where(
                ToolCallRow.conversation_id == conversation_id,
                ToolCallRow.tool_use_id.in_(tool_use_ids),
            )
        )
    ).scalars()
    if list(states).count(ToolState.PENDING_APPROVAL.value) != len(set(tool_use_ids)):
        raise RequestConflict("a gated tool call was decided meanwhile")


__all__ = [
    "ConversationInfo",
    "DueRequest",
    "MessageLink",
    "Outgoing",
    "PendingSend",
    "Renderer",
    "RequestMessage",
    "Store",
    "create_engine",
]
