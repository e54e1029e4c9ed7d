"""A ``Change`` as the rows a commit writes: the column values of its journal entries,
model calls and outbox rows, and what a commit hands back.

Shared by the two ways a commit is made in SQL: the general transaction
(:mod:`conversations.store.sql.journal`) and, on PostgreSQL, the one statement
(:mod:`conversations.store.sql.one_statement`; docs/architecture.md, "Durability and
exactly-once").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from conversations.events import OutboundAction, PlatformRef
from conversations.store.interfaces import Renderer, SessionRenderer
from conversations.store.records import OutboxRecord, outbox_values
from core.vocabulary.entries import Entry, PricedEntry
from core.vocabulary.journal import Change, Committed
from core.vocabulary.run_events import Stopped


@dataclass(frozen=True)
class BoundThread:
    """A conversation's thread: ``columns``, its ``platform``, ``workspace``,
    ``channel``, ``thread`` and ``parent`` as its row stores them (``thread`` may be
    ``""``), and ``ref``, the thread they make."""

    columns: tuple[Any, ...]
    ref: PlatformRef


Written = tuple[Committed, list[OutboxRecord], BoundThread]
"""What a commit wrote: its entries' numbers and time, the outbox rows it wrote (and the
notes it dropped), and the conversation's thread as it found it."""

Outgoing = tuple[list[dict[str, Any]], list[OutboundAction]]
"""A change's new outbox rows (column values) and the action of each, in order."""


def numbered(entries: Sequence[Entry], after_seq: int | None) -> tuple[int, ...]:
    """The ``seq`` numbers of ``entries`` numbered after ``after_seq`` (known whenever
    there are entries); none without entries."""
    if not entries:
        return ()
    assert after_seq is not None
    return tuple(range(after_seq + 1, after_seq + 1 + len(entries)))


def journal_rows(
    conversation_id: str, entries: Sequence[Entry], seqs: Sequence[int], now: datetime
) -> list[dict[str, Any]]:
    """The ``journal`` rows of ``entries`` numbered ``seqs``, stamped ``now``."""
    return [
        {
            "conversation_id": conversation_id,
            "seq": seq,
            "kind": entry.kind,
            "body": entry.model_dump(mode="json"),
            "created_at": now,
        }
        for seq, entry in zip(seqs, entries, strict=True)
    ]


def model_call_rows(
    conversation_id: str, change: Change, committed: Committed
) -> list[dict[str, Any]]:
    """The ``model_calls`` rows of ``change``'s priced entries (their usage), as
    ``committed`` numbered and stamped them."""
    return [
        {
            "conversation_id": conversation_id,
            "seq": seq,
            "created_at": committed.at,
            **e.usage.model_dump(),
        }
        for seq, e in zip(committed.seqs, change.entries, strict=True)
        if isinstance(e, PricedEntry) and e.usage is not None
    ]


def outgoing(
    render: Renderer,
    sessions: SessionRenderer,
    conversation_id: str,
    binding: PlatformRef,
    change: Change,
) -> Outgoing:
    """The outbox rows of ``change``'s run events (``render``), then of its session rows
    (``sessions``), for the thread ``binding``; a note before a :class:`Stopped` is
    written ``dropped`` (the notes already stored are the transaction's to drop)."""
    outbox: list[dict[str, Any]] = []
    actions: list[OutboundAction] = []
    for run_event in change.events:
        if isinstance(run_event, Stopped):
            for row in outbox:
                if row["purpose"] == "note":
                    row["state"] = "dropped"
        for out in render(binding, run_event):
            outbox.append(outbox_values(conversation_id, out))
            actions.append(out.action)
    for out in sessions(binding, change):  # after the change's own rows
        outbox.append(outbox_values(conversation_id, out))
        actions.append(out.action)
    return outbox, actions
