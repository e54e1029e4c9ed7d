"""A run's commit as one statement on PostgreSQL: the hot path in one round trip.

A fenced commit (:meth:`conversations.store.sql.journal.SqlJournal.commit`) is, in
general, a transaction of several statements: ``BEGIN``, the conversation's fenced
``UPDATE`` (whose ``RETURNING`` gives the thread that run events are rendered for),
one ``INSERT`` per table that gets rows, ``COMMIT``. On PostgreSQL each is a round
trip to the server and back through asyncpg and SQLAlchemy's async layer: a tool
call's running marker cost four, its result six. Made as one statement each, benchmark 8
(the README) went from 82 to 182 tool calls a second on the development machine
(docs/architecture.md, "Durability and exactly-once", "A commit in one statement").

PostgreSQL runs data-modifying statements in ``WITH``
(https://www.postgresql.org/docs/15/queries-with.html#QUERIES-WITH-MODIFYING), all
in one statement, so one statement in autocommit is one transaction. Here the
conversation's ``UPDATE`` is the first ``WITH`` query, ``fence``; every ``INSERT``
selects its rows (its parameters) from ``fence``, so when the ``UPDATE``
matches no row (the lease was lost, the conversation is gone, or its thread is no
longer the one the events were rendered for) nothing at all is written and the
statement returns no row. The outbox's ids come back in the same statement.

What it needs to know beforehand is the conversation's thread, to render run events
and session rows in Python: the thread the lease holder's last commit returned
(:attr:`conversations.store.leases.Holding.bound`), checked by the ``UPDATE``'s
``WHERE``. So only a commit under a lease, after a first one that went the general
way, is made here, and only a change of the shapes a run's turns and tool calls commit
(:func:`fits`). Whenever the statement wrote nothing (no row back) or failed on a
constraint (a taken ``seq``), the journal makes the commit the general way, which
raises the right error or writes it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import (
    CTE,
    Executable,
    Result,
    Select,
    Table,
    bindparam,
    select,
    true,
    union_all,
    update,
)
from sqlalchemy.dialects import postgresql

from conversations.events import OutboundAction
from conversations.store.records import Lease, status_values, tool_values
from conversations.store.schema import (
    CONVERSATIONS,
    JOURNAL,
    MODEL_CALLS,
    OUTBOX,
    TOOL_CALLS,
    utcnow,
)
from conversations.store.sql.change_rows import (
    BoundThread,
    Outgoing,
    Written,
    journal_rows,
    model_call_rows,
    numbered,
)
from conversations.store.sql.outbox import outbox_records
from core.vocabulary.journal import Change, Committed
from core.vocabulary.run_events import Stopped

BOUND = ("platform", "workspace", "channel", "thread", "parent")
"""The conversation's columns that make its thread, in the order of
:attr:`~conversations.store.sql.change_rows.BoundThread.columns`."""


@dataclass(frozen=True)
class Rows:
    """What one commit writes, as column values per table (each a list of row dicts, as
    :func:`conversations.store.records.tool_values` and the like give them)."""

    conversation: Mapping[str, Any]
    journal: Sequence[Mapping[str, Any]] = ()
    tool_calls: Sequence[Mapping[str, Any]] = ()
    model_calls: Sequence[Mapping[str, Any]] = ()
    outbox: Sequence[Mapping[str, Any]] = ()


MOST_ROWS = 50
"""Rows one statement writes at most (each value is a parameter, and each number of rows
a statement of its own): a change with more goes the general way, 200 rows an ``INSERT``."""


def fits(change: Change, after_seq: int | None) -> bool:
    """Whether ``change`` has only what :func:`statement` writes: the conversation's
    status, journal entries numbered after a known ``after_seq``, tool call records,
    model calls and run events other than :class:`Stopped` (which drops pending notes).
    Deliveries marked handled, compare-and-set guards, request resolutions, a new
    request, remembered rules and audit rows go the general way, and so does a change of
    more than :data:`MOST_ROWS` entries, tool calls and events."""
    if len(change.entries) + len(change.tool_calls) + len(change.events) > MOST_ROWS:
        return False
    return not (
        change.handled
        or change.guard_pending
        or change.resolve
        or change.open_request is not None
        or change.remember
        or change.audit
        or (change.entries and after_seq is None)
        or any(isinstance(event, Stopped) for event in change.events)
    )


def prepare(
    conversation_id: str,
    change: Change,
    after_seq: int | None,
    lease: Lease,
    bound: BoundThread,
    outgoing: Outgoing,
) -> OneCommit:
    """``change`` (which :func:`fits`) as one statement under ``lease``, its outbox rows
    ``outgoing`` rendered for ``bound``'s thread."""
    now = utcnow()
    seqs = numbered(change.entries, after_seq)
    committed = Committed(seqs=seqs, at=now)
    outbox, actions = outgoing
    rows = Rows(
        conversation=status_values(change, now),
        journal=journal_rows(conversation_id, change.entries, seqs, now),
        tool_calls=[tool_values(conversation_id, r) for r in change.tool_calls],
        model_calls=model_call_rows(conversation_id, change, committed),
        outbox=outbox,
    )
    return OneCommit(lease, bound, rows, committed, actions)


@dataclass(frozen=True)
class OneCommit:
    """A commit in one statement, ready to run: :meth:`statement`, then :meth:`written`
    with its result."""

    lease: Lease
    bound: BoundThread
    rows: Rows
    committed: Committed
    actions: Sequence[OutboundAction]

    def statement(self, *, release: bool) -> tuple[Executable, dict[str, Any]]:
        """The statement and its parameters; ``release``: it gives the lease up too."""
        rows = self.rows
        if release:
            ends = {"lease_owner": None, "lease_until": None}
            rows = replace(rows, conversation={**rows.conversation, **ends})
        return statement(self.lease, self.bound, rows)

    def written(self, result: Result[Any]) -> Written | None:
        """What the statement wrote (as the general way's transaction returns it), or
        ``None`` when it wrote nothing."""
        found = result.all()
        if not found:
            return None
        ids = [tuple(row)[-1] for row in found if len(row) > 1 and tuple(row)[-1] is not None]
        return self.committed, outbox_records(ids, self.rows.outbox, self.actions), self.bound


def statement(lease: Lease, bound: BoundThread, rows: Rows) -> tuple[Select[Any], dict[str, Any]]:
    """The one statement that writes ``rows`` if the conversation is still leased by
    ``lease`` and bound to ``bound``'s thread, and its parameters: a ``SELECT`` of
    ``fence.id`` (and, with outbox rows, of each new outbox id: one row per outbox row),
    no row at all when nothing was written.

    The statement is built once per shape (the columns and the number of rows of each
    table) with a bound parameter for every value, so SQLAlchemy compiles it once
    (https://docs.sqlalchemy.org/en/20/core/connections.html#sql-compilation-caching)
    and asyncpg prepares it once per connection."""
    tables = (rows.journal, rows.tool_calls, rows.model_calls, rows.outbox)
    shape = (tuple(rows.conversation), *(_shape(t) for t in tables))
    params = {"b_id": lease.conversation_id, "b_owner": lease.owner, "b_epoch": lease.epoch}
    params |= {f"b_{n}": v for n, v in zip(BOUND, bound.columns, strict=True)}
    params |= {f"c_{n}": v for n, v in rows.conversation.items()}
    for prefix, table_rows in zip(_PREFIXES, tables, strict=True):
        for i, row in enumerate(table_rows):
            params |= {f"{prefix}{i}_{n}": v for n, v in row.items()}
    return _statement(*shape), params


_PREFIXES = ("j", "t", "m", "o")
"""The prefix of the parameters of each table's rows: journal, tool calls, model calls,
outbox."""

Shape = tuple[tuple[str, ...], int]
"""A table's rows as the statement takes them: their columns and how many."""


def _shape(rows: Sequence[Mapping[str, Any]]) -> Shape:
    return (tuple(rows[0]), len(rows)) if rows else ((), 0)


@functools.lru_cache(maxsize=256)
def _statement(
    conversation: tuple[str, ...],
    journal: Shape,
    tool_calls: Shape,
    model_calls: Shape,
    outbox: Shape,
) -> Select[Any]:
    """The statement of :func:`statement` for rows of this shape (kept: a run commits a
    handful of shapes)."""
    c = CONVERSATIONS.c
    fence = (
        update(CONVERSATIONS)
        .where(
            c.id == bindparam("b_id"),
            c.lease_owner == bindparam("b_owner"),
            c.lease_epoch == bindparam("b_epoch"),
            *(c[n].is_not_distinct_from(bindparam(f"b_{n}", type_=c[n].type)) for n in BOUND),
        )
        .values({n: bindparam(f"c_{n}", type_=c[n].type) for n in conversation})
        .returning(c.id)
        .cte("fence")
    )
    writes: list[CTE] = []
    if journal[1]:
        writes.append(_insert(JOURNAL, journal, "j", fence).cte("journal_written"))
    if tool_calls[1]:
        upsert = _insert(TOOL_CALLS, tool_calls, "t", fence)
        keys = ("conversation_id", "tool_use_id")
        others = {n: upsert.excluded[n] for n in tool_calls[0] if n not in keys}
        done = upsert.on_conflict_do_update(index_elements=list(keys), set_=others)
        writes.append(done.cte("tool_calls_written"))
    if model_calls[1]:
        writes.append(_insert(MODEL_CALLS, model_calls, "m", fence).cte("model_calls_written"))
    if not outbox[1]:
        return select(fence.c.id).add_cte(*writes)
    written = _insert(OUTBOX, outbox, "o", fence).returning(OUTBOX.c.id).cte("outbox_written")
    return (
        select(fence.c.id, written.c.id)
        .select_from(fence.outerjoin(written, true()))
        .add_cte(*writes)
    )


def _insert(table: Table, shape: Shape, prefix: str, fence: CTE) -> postgresql.Insert:
    """``INSERT INTO table (...) SELECT $1, $2, ... FROM fence UNION ALL SELECT ...``: rows
    of ``shape`` (their values the parameters ``{prefix}{row}_{column}``), written only if
    ``fence`` returned its row. Each parameter has its column's type, which asyncpg is
    told (``$1::INTEGER``): an untyped ``NULL`` would be ``text``. (Not a ``VALUES``
    list: SQLAlchemy compiles a statement holding one anew each time.)"""
    names, count = shape
    types = [table.c[n].type for n in names]
    chosen = [
        select(
            *(
                bindparam(f"{prefix}{i}_{n}", type_=t).label(n)
                for n, t in zip(names, types, strict=True)
            )
        ).select_from(fence)
        for i in range(count)
    ]
    source = chosen[0] if count == 1 else union_all(*chosen)
    return postgresql.insert(table).from_select(names, source)
