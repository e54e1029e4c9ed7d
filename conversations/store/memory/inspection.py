"""The run inspector's list of conversations in memory (see
:mod:`conversations.store.sql.inspection` for the rules): the model calls are read
from the journals' priced entries (a fork's own: :func:`own_usages`), as
:mod:`conversations.store.memory.usage` reads them."""

from __future__ import annotations

from conversations.store.inspection import (
    PAGE_SIZE,
    REQUEST_CHARS,
    ConversationFilter,
    ConversationPage,
    ConversationSummary,
    Cursor,
    call_totals,
    ended_at,
    own_usages,
    page_size,
)
from conversations.store.memory._tables import Conversation, Tables, checkpoint
from core.vocabulary.entries import UserText, WorkflowChosen


class MemoryInspection:
    """:class:`conversations.store.inspection.Inspection` in memory."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    async def conversations(
        self,
        where: ConversationFilter | None = None,
        *,
        after: Cursor | None = None,
        limit: int = PAGE_SIZE,
    ) -> ConversationPage:
        """A page of the list, newest first; raises :class:`ValueError` for a ``limit``
        outside 1 to 100."""
        await checkpoint()
        limit = page_size(limit)
        where = where or ConversationFilter()
        ordered = sorted(
            self._t.conversations.values(), key=lambda c: (c.created_at, c.id), reverse=True
        )
        found: list[ConversationSummary] = []
        for conversation in ordered:
            if after is not None and (conversation.created_at, conversation.id) >= (
                after.started,
                after.id,
            ):
                continue
            if _matches(conversation, where):
                found.append(_summary(conversation))
                if len(found) > limit:
                    break
        rows = found[:limit]
        more = len(found) > limit
        return ConversationPage(
            rows=rows, next=Cursor(rows[-1].started, rows[-1].id) if more and rows else None
        )


def _first_request(conversation: Conversation) -> str | None:
    for record in conversation.journal:
        if isinstance(record.entry, UserText):
            return record.entry.text
    return None


def _workflow(conversation: Conversation) -> str | None:
    for record in conversation.journal:
        if isinstance(record.entry, WorkflowChosen):
            return record.entry.name
    return None


def _matches(conversation: Conversation, where: ConversationFilter) -> bool:
    ref = conversation.binding
    checks = (
        where.platform in (None, ref.platform),
        where.workspace in (None, ref.workspace),
        where.channel is None or where.channel in (ref.channel, ref.parent),
        where.lifecycle in (None, conversation.status.lifecycle),
        where.requester in (None, conversation.requester.id),
        where.workflow is None or _workflow(conversation) == where.workflow,
    )
    if not all(checks):
        return False
    search = where.search
    if search is None:
        return True
    needle = search.lower()
    request = _first_request(conversation) or ""
    return needle in conversation.id.lower() or needle in request.lower()


def _summary(conversation: Conversation) -> ConversationSummary:
    ref = conversation.binding
    totals = call_totals(own_usages(conversation.journal))
    request = _first_request(conversation) or ""
    return ConversationSummary(
        id=conversation.id,
        platform=ref.platform,
        workspace=ref.workspace,
        channel=ref.channel,
        home=ref.home,
        thread=ref.thread or "",
        requester_id=conversation.requester.id,
        requester_name=conversation.requester.name,
        status=conversation.status,
        position=conversation.position,
        workflow=_workflow(conversation),
        request=request[:REQUEST_CHARS],
        request_cut=len(request) > REQUEST_CHARS,
        started=conversation.created_at,
        ended=ended_at(conversation.status, conversation.updated_at),
        model_calls=totals.calls,
        tokens=totals.tokens,
        cost_micro_usd=totals.cost_micro_usd,
        unpriced_calls=totals.unpriced,
    )
