"""The run inspector's list of conversations in SQL: one statement per page.

The page's conversations are read in the list's order (``created_at``, ``id``,
descending) along the index ``ix_conversations_started`` (migration 0022), the
filters applied as the index is walked and the walk stopped at the page's end; only
then are the page's own rows completed: the first request's text and the workflow
from the journal, read by its key (``conversation_id``, ``seq``) from its start, where
both are; the model calls summed over ``ix_model_calls_conversation_id`` for the
page's ids alone. So a page costs about the same with ten conversations stored or ten
thousand. A search, and a filter by workflow, read the first entries of each
conversation the walk passes. See :mod:`conversations.store.inspection`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, case, func, or_, select

from conversations.store.inspection import (
    PAGE_SIZE,
    REQUEST_CHARS,
    ConversationFilter,
    ConversationPage,
    ConversationSummary,
    Cursor,
    ended_at,
    like_pattern,
    page_size,
)
from conversations.store.records import as_utc
from conversations.store.schema import ConversationRow, JournalRow, ModelCallRow
from conversations.store.sql.database import Database
from core.vocabulary.lifecycle import Lifecycle, Status, WaitKind

_C = ConversationRow
_J = JournalRow
_M = ModelCallRow


def first_request() -> Any:
    """The text of a conversation's first ``user_text`` entry (a correlated subquery on
    ``conversations``; NULL before it is journaled)."""
    return (
        select(_J.body["text"].as_string())
        .where(_J.conversation_id == _C.id, _J.kind == "user_text")
        .order_by(_J.seq)
        .limit(1)
        .scalar_subquery()
    )


def chosen_workflow() -> Any:
    """The name in a conversation's ``workflow_chosen`` entry (a correlated subquery on
    ``conversations``; NULL when it journaled none). It is journaled once, with the first
    request, so the first is read: the walk along the journal's key stops near its start."""
    return (
        select(_J.body["name"].as_string())
        .where(_J.conversation_id == _C.id, _J.kind == "workflow_chosen")
        .order_by(_J.seq)
        .limit(1)
        .scalar_subquery()
    )


def conditions(where: ConversationFilter, after: Cursor | None) -> list[ColumnElement[bool]]:
    """The ``WHERE`` terms of a page: ``where``'s filters and the keyset's ``after``
    (written so that the range on ``created_at`` alone can use the index)."""
    terms: list[ColumnElement[bool]] = []
    if where.platform is not None:
        terms.append(_C.platform == where.platform)
    if where.workspace is not None:
        terms.append(_C.workspace == where.workspace)
    if where.channel is not None:
        terms.append(or_(_C.channel == where.channel, _C.parent == where.channel))
    if where.lifecycle is not None:
        terms.append(_C.lifecycle == where.lifecycle.value)
    if where.requester is not None:
        terms.append(_C.requester_id == where.requester)
    if where.workflow is not None:
        terms.append(chosen_workflow() == where.workflow)
    search = where.search
    if search is not None:
        pattern = like_pattern(search)
        terms.append(
            or_(
                _C.id.ilike(pattern, escape="\\"),
                first_request().ilike(pattern, escape="\\"),
            )
        )
    if after is not None:
        terms.append(_C.created_at <= after.started)
        terms.append(or_(_C.created_at < after.started, _C.id < after.id))
    return terms


def page_statement(
    where: ConversationFilter, after: Cursor | None, limit: int
) -> Select[tuple[Any, ...]]:
    """The one statement of a page of ``limit`` rows (one more is asked for, to tell
    whether another page follows): the conversations' columns, their first request and
    workflow, and their model calls' count, tokens, cost and unpriced count."""
    page = (
        select(
            _C.id,
            _C.platform,
            _C.workspace,
            _C.channel,
            _C.parent,
            _C.thread,
            _C.requester_id,
            _C.requester_name,
            _C.lifecycle,
            _C.wait_kind,
            _C.position,
            _C.created_at,
            _C.updated_at,
        )
        .where(*conditions(where, after))
        .order_by(_C.created_at.desc(), _C.id.desc())
        .limit(limit + 1)
        .cte("page")
    )
    tokens = _M.input_tokens + _M.output_tokens + _M.cache_read_tokens + _M.cache_write_tokens
    calls = (
        select(
            _M.conversation_id,
            func.count().label("calls"),
            func.sum(tokens).label("tokens"),
            func.sum(_M.cost_micro_usd).label("cost"),
            func.sum(case((_M.cost_micro_usd.is_(None), 1), else_=0)).label("unpriced"),
        )
        .where(_M.conversation_id.in_(select(page.c.id)))
        .group_by(_M.conversation_id)
        .subquery("calls")
    )
    text = select(func.substr(_J.body["text"].as_string(), 1, REQUEST_CHARS))
    request = (
        text.where(_J.conversation_id == page.c.id, _J.kind == "user_text")
        .order_by(_J.seq)
        .limit(1)
        .scalar_subquery()
    )
    workflow = (
        select(_J.body["name"].as_string())
        .where(_J.conversation_id == page.c.id, _J.kind == "workflow_chosen")
        .order_by(_J.seq)
        .limit(1)
        .scalar_subquery()
    )
    return (
        select(
            page,
            request.label("request"),
            workflow.label("workflow"),
            calls.c.calls,
            calls.c.tokens,
            calls.c.cost,
            calls.c.unpriced,
        )
        .select_from(page.outerjoin(calls, calls.c.conversation_id == page.c.id))
        .order_by(page.c.created_at.desc(), page.c.id.desc())
    )


def summary_of(row: Any) -> ConversationSummary:
    """A row of :func:`page_statement` as a summary."""
    status = Status(
        lifecycle=Lifecycle(row.lifecycle),
        wait=WaitKind(row.wait_kind) if row.wait_kind else None,
    )
    started: datetime = as_utc(row.created_at) or row.created_at
    changed: datetime = as_utc(row.updated_at) or row.updated_at
    calls = int(row.calls or 0)
    unpriced = int(row.unpriced or 0)
    return ConversationSummary(
        id=row.id,
        platform=row.platform,
        workspace=row.workspace,
        channel=row.channel,
        home=row.parent or row.channel,
        thread=row.thread,
        requester_id=row.requester_id,
        requester_name=row.requester_name,
        status=status,
        position=row.position,
        workflow=row.workflow,
        request=row.request or "",
        started=started,
        ended=ended_at(status, changed),
        model_calls=calls,
        tokens=int(row.tokens or 0),
        cost_micro_usd=None if calls and unpriced == calls else int(row.cost or 0),
        unpriced_calls=unpriced,
    )


def paged(rows: Sequence[ConversationSummary], limit: int) -> ConversationPage:
    """The page of the first ``limit`` of ``rows`` (read one past it), and the cursor
    of the next page when there was one more."""
    shown = list(rows[:limit])
    more = len(rows) > limit
    return ConversationPage(
        rows=shown,
        next=Cursor(shown[-1].started, shown[-1].id) if more and shown else None,
    )


class SqlInspection:
    """:class:`conversations.store.inspection.Inspection` on the ``conversations``,
    ``journal`` and ``model_calls`` tables."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def conversations(
        self,
        where: ConversationFilter | None = None,
        *,
        after: Cursor | None = None,
        limit: int = PAGE_SIZE,
    ) -> ConversationPage:
        """A page of the list, newest first, in one statement; raises
        :class:`ValueError` for a ``limit`` outside 1 to 100."""
        limit = page_size(limit)
        stmt = page_statement(where or ConversationFilter(), after, limit)
        async with self._db.read() as session:
            rows = (await session.execute(stmt)).all()
        return paged([summary_of(row) for row in rows], limit)
