"""A fork: a new conversation that holds another's journal up to one entry and goes on.

An operator forks conversation C at entry ``at`` (docs/architecture.md, "Rewind and
fork"); :func:`fork_of` says what the new conversation holds, from C's snapshot, and
writes nothing (the store writes it all in one transaction:
``conversations.store.forks``):

- **the journal**: C's entries 1..``at`` as they are, under the same ``seq`` and time
  (a :class:`~core.vocabulary.entries.DecisionEntry`'s request id renamed to the
  fork's copy of that request); then, stamped ``now``, a
  :class:`~core.vocabulary.entries.ForkedFrom` entry naming C, ``at`` and the operator
  (where the fork came from, for the inspector: the model's history passes over it;
  :func:`copied_through`), a ``cancelled`` result for every call still without one at
  ``at`` (a fork point between a ``tool_use`` and its result, or a plan or question
  waiting for a person: the open control call is closed so, and the model goes on),
  and the fork's note, a :class:`~core.vocabulary.entries.ContextNote` of the strategy
  :data:`FORK_NOTE`: the model reads it as the last block of the user message after
  those results (``[threadbot: fork] ...``, :func:`core.run.blocks.context_note_block`),
  told that the files of its new workspace are not as they were at that point;
- **the tool calls**: C's record of each call answered by ``at`` (final by then), and
  for each call closed here a new record moved to ``cancelled`` through
  :mod:`core.tool_state`;
- **the requests** closed by ``at`` (a decision journaled, or their control call
  answered) that a run reads back (a plan approval, a plan revision, a question, a
  request to go on or to retry), each under a new id (request ids are unique across
  conversations), as they stand in C; requests still open at ``at`` are not carried
  over (no approval outlives a fork); tool approvals neither (their calls' records
  carry their decisions);
- **the position**: the workflow state entered last by ``at``, except that a state that
  waits for a person to approve the model's plan goes back to the state the plan was
  proposed in (the plan is cancelled or was stopped: the model proposes again);
- **the plan version**: the newest version whose ``propose_plan`` call was answered
  by ``at``;
- **the status**: ``running`` (moved from ``idle`` through
  :func:`core.vocabulary.lifecycle.move`), so the run goes on from the journal as a run
  resumed after a crash does (``Engine.run``).

A point with nothing to go on from is refused (:class:`ForkPointInvalid`): one that is
no entry of the journal, one before the conversation's first request (its first
``user_text`` entry: the run would have nothing to do), and one where the run had
ended (:func:`ended_by`: the answer given, a stop, a failure; the fork would post its
first message and do nothing).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from core.tool_state import Moved, admit, move, opened, parts
from core.vocabulary import lifecycle
from core.vocabulary.entries import (
    AssistantTurn,
    ContextNote,
    DecisionEntry,
    Entry,
    ForkedFrom,
    JournalRecord,
    StepEntered,
    StopEntry,
    ToolResultEntry,
    UserText,
    WorkflowChosen,
)
from core.vocabulary.lifecycle import ENDED, Status
from core.vocabulary.requests import (
    ContinueRequest,
    PendingRequest,
    PlanApproval,
    PlanRevision,
    Question,
    RetryRequest,
    control_call,
)
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolCallRecord, ToolState
from core.workflows.model import StateKind, Workflow

FORK_NOTE = "fork"
"""The ``strategy`` of the fork's :class:`ContextNote` (no context strategy has the
name, so none restates or replaces it)."""

CARRIED = (PlanApproval, PlanRevision, Question, ContinueRequest, RetryRequest)
"""The kinds of request a fork carries over once closed: those a run reads back (the
approved plan, the budget raises, the plan versions)."""


class ForkPointInvalid(ValueError):
    """``at`` is no point to fork at: no entry of the conversation's journal, one before
    its first request, or one where its run had ended; the message says why and where
    to fork instead."""


@dataclass(frozen=True)
class Forked:
    """What the new conversation holds (see the module docstring): its ``journal``
    (``seq`` from 1, no gap), ``tool_calls``, ``requests`` (new ids), ``status``,
    ``position`` and ``plan_version``; ``cancelled``: the calls closed as cancelled."""

    journal: tuple[JournalRecord, ...]
    tool_calls: tuple[ToolCallRecord, ...]
    requests: tuple[PendingRequest, ...]
    status: Status
    position: str
    plan_version: int
    cancelled: int


def fork_note(by: str, at: int, cloned: bool) -> str:
    """What the model is told of the fork: who forked at which entry, and that its
    workspace is new (a fresh clone of the channel's repository with ``cloned``, else
    an empty folder), so the files are not as they were at that point."""
    made = (
        "a fresh clone of the channel's repository"
        if cloned
        else "a fresh, empty folder (the channel names no repository)"
    )
    return (
        f"Operator {by} forked this conversation into a new thread at entry {at} of its "
        f"journal; you go on from that point. Your workspace is {made}: the files are "
        "not as they were at that point, and nothing done to them before it is there. "
        "Look at them before you rely on what earlier tool results said about them."
    )


def fork_of(
    snap: ConversationSnapshot,
    at: int,
    *,
    by: str,
    workflow: Workflow,
    cloned: bool,
    now: datetime,
    new_id: Callable[[], str],
) -> Forked:
    """The fork of ``snap`` at entry ``at`` by operator ``by`` (see the module docstring):
    ``workflow`` is the conversation's (journaled, or the default); ``cloned``: the
    fork's workspace is a clone of a repository (:func:`fork_note`); ``now`` (aware UTC)
    stamps the entries the fork adds; ``new_id()`` gives each carried request its new
    id. Raises :class:`ForkPointInvalid` when ``at`` is not the ``seq`` of an entry, is
    before the first request, or is where the run had ended (see the module docstring)."""
    journal = snap.journal
    if not any(r.seq == at for r in journal):
        said = f"1 to {snap.last_seq}" if journal else "nothing: it is empty"
        raise ForkPointInvalid(
            f"conversation {snap.id} has no journal entry {at}: its journal runs {said}"
        )
    first = next((r.seq for r in journal if isinstance(r.entry, UserText)), None)
    if first is None or at < first:
        where = f"entry {first}" if first is not None else "none yet"
        raise ForkPointInvalid(
            f"entry {at} of conversation {snap.id} comes before its first request "
            f"({where}): there is nothing to go on from; fork at its first request or later"
        )
    cut = bisect.bisect_right(journal, at, key=lambda r: r.seq)
    kept = journal[:cut]
    position = _position(kept, workflow)
    ended = ended_by(snap, cut, workflow.state(position).kind is StateKind.END)
    if ended is not None:
        raise ForkPointInvalid(f"it had ended at entry {at} ({ended}): fork at an earlier entry")
    answered = {r.entry.tool_use_id for r in kept if isinstance(r.entry, ToolResultEntry)}
    requests, renamed = _carried(snap, kept, answered, new_id)
    records, closing = _calls(snap, kept, answered, renamed, by)
    results, closed = parts(closing)
    status = lifecycle.move(lifecycle.IDLE, lifecycle.RUNNING)
    added: tuple[Entry, ...] = (
        ForkedFrom(conversation=snap.id, at=at, by=by),
        *results,
        ContextNote(strategy=FORK_NOTE, text=fork_note(by, at, cloned)),
    )
    return Forked(
        journal=(
            *(_renamed(r, renamed) for r in kept),
            *(JournalRecord(seq=at + i, at=now, entry=e) for i, e in enumerate(added, 1)),
        ),
        tool_calls=(*records, *closed),
        requests=requests,
        status=status,
        position=position,
        plan_version=max(
            (
                r.plan_version
                for r in snap.requests
                if isinstance(r, PlanApproval) and r.tool_use_id in answered
            ),
            default=0,
        ),
        cancelled=len(closed),
    )


STARTS = (StepEntered, WorkflowChosen)
"""The entries a run's start journals before its request (:func:`ended_by`)."""


def ended_by(snap: ConversationSnapshot, cut: int, at_end: bool) -> str | None:
    """How the run holding ``snap.journal[cut - 1]`` had ended by that entry, in words
    (``done``, ``cancelled``, the conversation's ended status, or where the next run
    began), or None when it went on after it. ``at_end``: the workflow's position
    there is an end state (the answer was given).

    Ended: at an end state; stopped after its request (a
    :class:`~core.vocabulary.entries.StopEntry`); or nothing of its own after it (only a
    next run's start, :data:`STARTS`), when a next request follows (a request is
    journaled only once the run before it ended) or the conversation's status now is
    an ended one."""
    journal = snap.journal
    if at_end:
        return "done"
    for record in reversed(journal[:cut]):
        if isinstance(record.entry, StopEntry):
            return "cancelled"
        if isinstance(record.entry, UserText) and record.entry.role == "request":
            break
    for record in journal[cut:]:
        entry = record.entry
        if isinstance(entry, UserText) and entry.role == "request":
            return f"the next run began at entry {record.seq}"
        if not isinstance(entry, STARTS):
            return None
    return snap.status.lifecycle.value if snap.status.lifecycle in ENDED else None


def copied_through(journal: Sequence[JournalRecord]) -> int:
    """The ``seq`` through which ``journal`` is copied from the conversation it was forked
    from (its newest :class:`~core.vocabulary.entries.ForkedFrom` entry's ``at``; 0 for a
    conversation never forked): the model calls of those entries were made, and are
    counted, there."""
    for record in reversed(journal):
        if isinstance(record.entry, ForkedFrom):
            return record.entry.at
    return 0


def _carried(
    snap: ConversationSnapshot,
    kept: Sequence[JournalRecord],
    answered: set[str],
    new_id: Callable[[], str],
) -> tuple[tuple[PendingRequest, ...], dict[str, str]]:
    """The requests closed by the fork point that a run reads back, each with a new id,
    and ``{old id: new id}``."""
    decided = {r.entry.request_id for r in kept if isinstance(r.entry, DecisionEntry)}
    carried = [
        r
        for r in snap.requests
        if isinstance(r, CARRIED) and (r.id in decided or control_call(r) in answered)
    ]
    renamed = {r.id: new_id() for r in carried}
    return tuple(r.model_copy(update={"id": renamed[r.id]}) for r in carried), renamed


def _renamed(record: JournalRecord, renamed: dict[str, str]) -> JournalRecord:
    """``record`` with the request it names under its new id (when it was carried)."""
    entry = record.entry
    if isinstance(entry, DecisionEntry) and entry.request_id in renamed:
        entry = entry.model_copy(update={"request_id": renamed[entry.request_id]})
        return record.model_copy(update={"entry": entry})
    return record


def _calls(
    snap: ConversationSnapshot,
    kept: Sequence[JournalRecord],
    answered: set[str],
    renamed: dict[str, str],
    by: str,
) -> tuple[list[ToolCallRecord], list[Moved]]:
    """The records of the calls answered by the fork point (their request renamed, no
    process), and the moves that close the others as ``cancelled``."""
    text = (
        f"Cancelled: operator {by} forked the conversation at this point, before this "
        "call had its result; it did not run in this fork."
    )
    records: list[ToolCallRecord] = []
    closing: list[Moved] = []
    for record in kept:
        if not isinstance(record.entry, AssistantTurn):
            continue
        for index, call in enumerate(record.entry.tool_calls):
            found = snap.tool_calls.get(call.id)
            if call.id not in answered:
                read_only = found.read_only if found is not None else False
                new = admit(
                    call,
                    read_only=read_only,
                    state=ToolState.APPROVED,
                    turn_seq=record.seq,
                    index=index,
                )
                assert new.record is not None
                closing.append(move(new.record, ToolState.CANCELLED, result=text))
            elif found is not None:
                copied = found.model_copy(update={"process": None, "request_id": None})
                if found.request_id in renamed:
                    copied = opened(copied, renamed[found.request_id])
                records.append(copied)
    return records, closing


def _position(kept: Sequence[JournalRecord], workflow: Workflow) -> str:
    """Where the fork goes on (see the module docstring)."""
    position = _entered(kept, len(kept), workflow)
    state = workflow.state(position)
    if state.kind is StateKind.HUMAN and state.ask == "plan":
        for i in range(len(kept) - 1, -1, -1):
            entry = kept[i].entry
            if isinstance(entry, AssistantTurn) and not entry.workflow and not entry.experts:
                return _entered(kept, i, workflow)
    return position


def _entered(kept: Sequence[JournalRecord], end: int, workflow: Workflow) -> str:
    """The state entered last among ``kept[:end]`` (the workflow's start when none was)."""
    for i in range(end - 1, -1, -1):
        entry = kept[i].entry
        if isinstance(entry, StepEntered):
            return entry.position
    return workflow.start
