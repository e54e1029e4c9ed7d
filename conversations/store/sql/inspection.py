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

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, String, bindparam, case, func, or_, select

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
    priced,
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


Shape = tuple[bool, ...]
"""Which of a page's terms are there: each filter of :class:`ConversationFilter` (in
:data:`SHAPED` order), then the cursor. The statement of a shape is built once."""

SHAPED = ("platform", "workspace", "channel", "lifecycle", "requester", "workflow", "text")


def shape_of(where: ConversationFilter, after: Cursor | None) -> Shape:
    """The shape of a page of ``where`` after ``after``."""
    given = [getattr(where, name) is not None for name in SHAPED[:-1]]
    return (*given, where.search is not None, after is not None)


def parameters(where: ConversationFilter, after: Cursor | None) -> dict[str, Any]:
    """The values of a page's bound parameters (those its shape names)."""
    values: dict[str, Any] = {
        "platform": where.platform,
        "workspace": where.workspace,
        "channel": where.channel,
        "lifecycle": where.lifecycle.value if where.lifecycle is not None else None,
        "requester": where.requester,
        "workflow": where.workflow,
    }
    search = where.search
    if search is not None:
        values["pattern"] = like_pattern(search)
    if after is not None:
        values |= {"after_started": after.started, "after_id": after.id}
    return {name: value for name, value in values.items() if value is not None}


def conditions(shape: Shape) -> list[ColumnElement[bool]]:
    """The ``WHERE`` terms of a page of ``shape``, each value a bound parameter named as
    in :func:`parameters` (the cursor's written so that the range on ``created_at``
    alone can use the index)."""
    platform, workspace, channel, lifecycle, requester, workflow, search, after = shape
    terms: list[ColumnElement[bool]] = []
    if platform:
        terms.append(_C.platform == bindparam("platform"))
    if workspace:
        terms.append(_C.workspace == bindparam("workspace"))
    if channel:
        terms.append(or_(_C.channel == bindparam("channel"), _C.parent == bindparam("channel")))
    if lifecycle:
        terms.append(_C.lifecycle == bindparam("lifecycle"))
    if requester:
        terms.append(_C.requester_id == bindparam("requester"))
    if workflow:
        terms.append(chosen_workflow() == bindparam("workflow"))
    if search:
        pattern = bindparam("pattern", type_=String)
        terms.append(
            or_(_C.id.ilike(pattern, escape="\\"), first_request().ilike(pattern, escape="\\"))
        )
    if after:
        terms.append(_C.created_at <= bindparam("after_started"))
        terms.append(or_(_C.created_at < bindparam("after_started"), _C.id < bindparam("after_id")))
    return terms


@functools.lru_cache(maxsize=1024)
def page_statement(shape: Shape, limit: int) -> Select[tuple[Any, ...]]:
    """The one statement of a page of ``shape`` and ``limit`` rows (one more is asked for,
    to tell whether another page follows): the conversations' columns, their first
    request and workflow, and their model calls' count, tokens, cost and unpriced
    count. Built once per shape and limit (building it costs more than running it
    on a small page); executed with :func:`parameters`."""
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
        .where(*conditions(shape))
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
    text = select(func.substr(_J.body["text"].as_string(), 1, REQUEST_CHARS + 1))  # + 1: cut?
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


@functools.lru_cache(maxsize=64)
def status_of(lifecycle: str, wait: str | None) -> Status:
    """The status stored as ``lifecycle`` and ``wait`` (one object per pair)."""
    return Status(lifecycle=Lifecycle(lifecycle), wait=WaitKind(wait) if wait else None)


def summary_of(row: Any) -> ConversationSummary:
    """A row of :func:`page_statement` as a summary."""
    status = status_of(row.lifecycle, row.wait_kind)
    started: datetime = as_utc(row.created_at) or row.created_at
    changed: datetime = as_utc(row.updated_at) or row.updated_at
    calls = int(row.calls or 0)
    unpriced = int(row.unpriced or 0)
    request: str = row.request or ""
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
        request=request[:REQUEST_CHARS],
        request_cut=len(request) > REQUEST_CHARS,
        started=started,
        ended=ended_at(status, changed),
        model_calls=calls,
        tokens=int(row.tokens or 0),
        cost_micro_usd=priced(calls, unpriced, int(row.cost or 0)),
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
        where = where or ConversationFilter()
        stmt = page_statement(shape_of(where, after), limit)
        async with self._db.read() as session:
            rows = (await session.execute(stmt, parameters(where, after))).all()
        return paged([summary_of(row) for row in rows], limit)
