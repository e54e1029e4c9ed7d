"""Core's ``Journal`` in SQL: load a conversation, commit a ``Change`` in one transaction.

A ``Change`` from the engine and the outbox rows for its run events go in the same
transaction, so a message is never posted for a state change that did not happen,
nor lost for one that did (DESIGN.md, "Durability and exactly-once").
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import TypeAdapter
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from conversations.store import leases
from conversations.store.interfaces import Renderer
from conversations.store.records import (
    apply_status,
    as_utc,
    binding_of,
    outbox_row,
    request_of,
    request_row,
    status_of,
    tool_record_of,
    tool_row,
)
from conversations.store.schema import (
    DeliveryRow,
    JournalRow,
    RequestRow,
    ToolCallRow,
    UsageRow,
    utcnow,
)
from conversations.store.sql.database import Database, conversation_row
from conversations.store.sql.leases import still_held
from conversations.store.sql.outbox import drop_pending_notes
from conversations.store.sql.requests import resolve
from core.errors import LeaseLost, RequestConflict
from core.journal import (
    AssistantTurn,
    Change,
    ConversationSnapshot,
    Entry,
    JournalRecord,
    ToolState,
)
from core.people import Person
from core.run_events import Stopped

_entry_adapter: TypeAdapter[Entry] = TypeAdapter(Entry)


class SqlJournal:
    """:class:`core.journal.Journal` on the ``journal``, ``tool_calls``, ``pending_requests``
    and ``conversations`` tables; ``render`` turns run events into outbox rows."""

    def __init__(self, db: Database, render: Renderer) -> None:
        self._db = db
        self._render = render

    async def load(self, conversation_id: str) -> ConversationSnapshot:
        """Everything about one conversation; raises :class:`ConversationNotFound`."""
        async with self._db.read() as session:
            row = await conversation_row(session, conversation_id)
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
        async with self._db.write() as session:
            if lease is not None and not await still_held(session, lease, now=utcnow()):
                raise LeaseLost(
                    f"conversation {conversation_id}: this process ({lease.owner}, epoch "
                    f"{lease.epoch}) no longer holds its lease; nothing was written"
                )
            row = await conversation_row(session, conversation_id)
            await _check_pending(session, conversation_id, change.guard_pending)
            if change.handled:
                await session.execute(
                    update(DeliveryRow)
                    .where(DeliveryRow.key.in_(change.handled))
                    .values(handled_at=utcnow())
                )
            seqs = await _append(session, conversation_id, change.entries)
            for record in change.tool_calls:
                await session.merge(tool_row(conversation_id, record))
            for res in change.resolve:
                await resolve(session, res)
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
                    await drop_pending_notes(session, conversation_id)
                for out in self._render(binding_of(row), run_event):
                    session.add(outbox_row(conversation_id, out))
                    wrote_outbox = True
        if wrote_outbox:
            self._db.on_outbox()
        return seqs


async def _append(
    session: AsyncSession, conversation_id: str, entries: Sequence[Entry]
) -> list[int]:
    """Add ``entries`` after the conversation's last ``seq``; their new ``seq`` numbers."""
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


async def _check_pending(
    session: AsyncSession, conversation_id: str, tool_use_ids: Sequence[str]
) -> None:
    """Compare-and-set on tool records: raise :class:`RequestConflict` unless every one of
    ``tool_use_ids`` is still ``pending_approval``."""
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
