"""A conversation's timeline and header, from one read of the store.

:func:`read` takes the conversation (its thread), its snapshot (journal, tool records,
requests) and its audit trail's rows; :func:`build` turns them into :class:`Timeline`:
the header and one item per journal entry, oldest first (docs/architecture.md, "The run
inspector"). Pure but for :func:`read`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from conversations.forks import forked_into
from conversations.inspect import notes, people, turns
from conversations.inspect.items import ForkLink, Header, InFlight, Item, Waiting, waiting_for
from conversations.inspect.results import Calls
from conversations.store.audit import AuditEntry
from conversations.store.inspection import call_totals, ended_at, own_usages
from conversations.store.interfaces import Store
from conversations.store.records import ConversationInfo
from core.vocabulary.entries import (
    AssistantTurn,
    DecisionEntry,
    ForkedFrom,
    StopEntry,
    ToolResultEntry,
    UserText,
    WorkflowChosen,
)
from core.vocabulary.errors import ConversationNotFound
from core.vocabulary.requests import PlanApproval, PlanRevision, RequestState, control_call
from core.vocabulary.snapshot import ConversationSnapshot

Stamp = tuple[str, datetime | None]
"""A conversation's status and ``changed_at``: when either moved, its timeline may have."""


def stamp_of(info: ConversationInfo | None) -> Stamp:
    """The :data:`Stamp` of ``info`` (of a conversation not found: ``("gone", None)``)."""
    return (str(info.status), info.changed_at) if info is not None else ("gone", None)


@dataclass(frozen=True)
class Timeline:
    """A conversation's header and its items, oldest first (one per entry shown), and the
    :data:`Stamp` read before them."""

    header: Header
    items: tuple[Item, ...]
    stamp: Stamp = ("", None)


async def read(
    store: Store, conversation_id: str, redact: Callable[[str], str] = str
) -> Timeline | None:
    """The timeline of ``conversation_id`` as the store holds it now; None for an id the
    store has no conversation under. Three reads: the conversation, its snapshot (one
    transaction), its audit rows. ``redact``: see :func:`build`."""
    info = await store.threads.find(conversation_id)
    if info is None:
        return None
    try:
        snap = await store.journal.load(conversation_id)
    except ConversationNotFound:
        return None
    rows = await store.audit.entries(conversation_id=conversation_id)
    found = build(info, snap, rows, redact)
    return Timeline(header=found.header, items=found.items, stamp=stamp_of(info))


def build(
    info: ConversationInfo,
    snap: ConversationSnapshot,
    rows: list[AuditEntry],
    redact: Callable[[str], str] = str,
) -> Timeline:
    """The timeline of ``snap`` (the conversation ``info``), with how people acted read
    from its audit ``rows``. A text cut short (an output's first page) is cut after
    ``redact``, so no secret is cut in two; the page redacts every text it serves."""
    calls = Calls(snap.journal)
    answered = {r.entry.tool_use_id for r in snap.journal if isinstance(r.entry, ToolResultEntry)}
    versions = turns.plan_versions(snap.requests)
    requests = {r.id: r for r in snap.requests}
    means = people.Means(rows)
    names = {call_id: call.name for call_id, (call, _at) in calls.asked.items()}
    waits = awaited(snap)
    items: list[Item] = []
    for record in snap.journal:
        entry = record.entry
        item: Item | None
        if isinstance(entry, UserText):
            item = people.message(record, redact)
        elif isinstance(entry, AssistantTurn):
            item = turns.model_turn(record, snap.tool_calls, versions, answered, waits)
        elif isinstance(entry, ToolResultEntry):
            item = calls.result(record, snap.tool_calls, redact)
        elif isinstance(entry, DecisionEntry):
            item = people.decision(record, requests, means, names)
        elif isinstance(entry, StopEntry):
            item = people.stop(record, means)
        else:
            item = notes.note(record, calls.name)
        if item is not None:
            items.append(item)
    found = header(info, snap, answered, waits, rows)
    return Timeline(header=found, items=tuple(items))


def awaited(snap: ConversationSnapshot) -> dict[str, str]:
    """``{tool_use_id: what it waits for}`` of each control call whose open request's
    answer is to be its result (a question, a plan): its record says ``approved``."""
    return {
        call: waiting_for(r.kind.value)
        for r in snap.requests
        if r.state is RequestState.OPEN and (call := control_call(r)) is not None
    }


def forks_of(rows: list[AuditEntry]) -> tuple[ForkLink, ...]:
    """The forks made of a conversation, from its audit ``rows`` (a ``fork`` row, outcome
    ``forked``, names the new conversation: :func:`conversations.forks.forked_into`)."""
    made = []
    for row in rows:
        new = forked_into(row)
        if new is not None and (row.request_id or "").isdigit():
            by = row.user_id.removeprefix("operator:")
            made.append(ForkLink(conversation=new, at=int(row.request_id or 0), by=by))
    return tuple(made)


def header(
    info: ConversationInfo,
    snap: ConversationSnapshot,
    answered: set[str],
    waits: dict[str, str],
    rows: list[AuditEntry],
) -> Header:
    """The header of ``snap``: where, who, status, workflow, times and usage (as the list
    of conversations reads them: the conversation's opening and last change, its own
    model calls), what is open (``waits``: :func:`awaited`), where it was forked from
    and the forks made of it (its audit ``rows``)."""
    journal = snap.journal
    workflow = next(
        (r.entry.name for r in reversed(journal) if isinstance(r.entry, WorkflowChosen)), None
    )
    origin = next(
        (
            ForkLink(conversation=r.entry.conversation, at=r.entry.at, by=r.entry.by)
            for r in reversed(journal)
            if isinstance(r.entry, ForkedFrom)
        ),
        None,
    )
    usages = own_usages(journal)
    totals = call_totals(usages)
    at_seq = {r.seq: r.at for r in journal}
    in_flight = tuple(
        InFlight(
            call_id=record.tool_use_id,
            name=record.name,
            state=record.state,
            since=at_seq[record.turn_seq],
            waiting=waits.get(record.tool_use_id),
        )
        for record in sorted(snap.tool_calls.values(), key=lambda r: (r.turn_seq, r.index))
        if record.tool_use_id not in answered and record.turn_seq in at_seq
    )
    waiting = tuple(
        Waiting(
            request_id=r.id,
            kind=r.kind.value,
            version=r.plan_version if isinstance(r, PlanApproval | PlanRevision) else None,
            prompt=r.prompt,
        )
        for r in snap.requests
        if r.state is RequestState.OPEN
    )
    binding = info.binding
    return Header(
        id=snap.id,
        platform=binding.platform,
        workspace=binding.workspace,
        channel=binding.channel,
        thread=binding.thread,
        requester=snap.requester.id,
        status=str(snap.status),
        lifecycle=snap.status.lifecycle.value,
        position=snap.position,
        workflow=workflow,
        started=info.created_at,
        ended=ended_at(snap.status, info.changed_at),
        model_calls=totals.calls,
        input_tokens=sum(u.input_tokens for u in usages),
        output_tokens=sum(u.output_tokens for u in usages),
        cache_read_tokens=sum(u.cache_read_tokens for u in usages),
        cache_write_tokens=sum(u.cache_write_tokens for u in usages),
        cost_micro_usd=totals.cost_micro_usd,
        unpriced=totals.unpriced,
        in_flight=in_flight,
        waiting=waiting,
        last_seq=snap.last_seq,
        origin=origin,
        forks=forks_of(rows),
    )
