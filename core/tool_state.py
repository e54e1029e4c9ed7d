"""A tool call's state: the table of allowed moves and the one function that makes them.

Every state change of a :class:`core.vocabulary.tool_records.ToolCallRecord` goes through
:func:`move` (or :func:`admit`, which creates a record), checked against
:data:`MOVES`; nothing else sets a record's state (a test walks the code for it).
A move to a final state writes the call's one ``tool_result`` with it, so a
record and its result are always committed in the same
:class:`core.vocabulary.journal.Change`; a move to an open state writes none. The states
and the table are those of docs/architecture.md, "Durability and exactly-once"::

    (new)            -> approved | pending_approval | denied
    pending_approval -> approved | denied | cancelled | failed
    approved         -> running | done | failed | denied | cancelled
    running          -> running (re-run after a crash, read-only calls)
                        | done | failed | denied | interrupted | unknown
    denied, done, failed, cancelled, interrupted, unknown: final, no move

``denied`` from ``approved`` or ``running``: the policy said no just before the
call ran. ``failed`` from an open state: the run failed and closed its calls.
The control calls that wait (``propose_plan``, ``ask_user``, ``finish``) never
run a process nor wait for an approval of their own: they stay ``approved``
until their answer is their result, and the request they opened carries the
wait (:func:`opened`). A move the table does not allow raises
:class:`core.vocabulary.errors.IllegalTransition` and writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from core.tools import control
from core.vocabulary.entries import AssistantTurn, ToolCall, ToolResultEntry
from core.vocabulary.errors import IllegalTransition
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import (
    FINAL_TOOL_STATES,
    CommandProcess,
    ToolCallRecord,
    ToolState,
)

S = ToolState
MOVES: Mapping[ToolState | None, frozenset[ToolState]] = {
    None: frozenset({S.APPROVED, S.PENDING_APPROVAL, S.DENIED}),
    S.PENDING_APPROVAL: frozenset({S.APPROVED, S.DENIED, S.CANCELLED, S.FAILED}),
    S.APPROVED: frozenset({S.RUNNING, S.DONE, S.FAILED, S.DENIED, S.CANCELLED}),
    S.RUNNING: frozenset({S.RUNNING, S.DONE, S.FAILED, S.DENIED, S.INTERRUPTED, S.UNKNOWN}),
    **{final: frozenset() for final in FINAL_TOOL_STATES},
}
"""``{state: states it may move to}``; ``None`` is a record not yet written."""

_NOT_FOR_CONTROL = frozenset({S.RUNNING, S.PENDING_APPROVAL})


@dataclass(frozen=True)
class Moved:
    """A record after a move and, for a final state, its one tool result.

    ``record`` is None only for a control call answered without a record of its
    own (none is expected: every call gets one when its turn is committed).
    """

    record: ToolCallRecord | None
    result: ToolResultEntry | None = None

    @property
    def records(self) -> tuple[ToolCallRecord, ...]:
        """The record, as the ``tool_calls`` of a change."""
        return (self.record,) if self.record is not None else ()

    @property
    def results(self) -> tuple[ToolResultEntry, ...]:
        """The result, as ``entries`` of a change."""
        return (self.result,) if self.result is not None else ()


def allowed(before: ToolState | None, after: ToolState) -> bool:
    """Whether the table lets a record in ``before`` (None: new) move to ``after``."""
    return after in MOVES[before]


def admit(
    call: ToolCall,
    *,
    read_only: bool,
    state: ToolState,
    turn_seq: int,
    index: int,
    result: str | None = None,
) -> Moved:
    """The first record of ``call`` (of the turn at ``turn_seq``, ``index`` from 0).

    ``state`` is ``approved``, ``pending_approval`` or ``denied``; a denied call
    needs ``result`` (the reason the model reads). Raises
    :class:`IllegalTransition` otherwise.
    """
    record = ToolCallRecord(
        tool_use_id=call.id,
        name=call.name,
        input=call.input,
        read_only=read_only,
        state=ToolState.APPROVED,
        turn_seq=turn_seq,
        index=index,
    )
    return _moved(record, None, state, result)


def move(record: ToolCallRecord, to: ToolState, *, result: str | None = None) -> Moved:
    """``record`` moved to ``to``, with its tool result when ``to`` is final.

    ``result`` is what the model reads: required for a final state (an error
    result unless ``to`` is ``done``), refused for an open one. Raises
    :class:`IllegalTransition` when :data:`MOVES` does not allow the move, when
    a waiting control call would take ``running`` or ``pending_approval``, or when
    ``result`` is missing or not expected.
    """
    return _moved(record, record.state, to, result)


def opened(record: ToolCallRecord, request_id: str) -> ToolCallRecord:
    """A control call's record pointing at the request it opened (its state unchanged)."""
    return record.model_copy(update={"request_id": request_id})


def started(record: ToolCallRecord, process: CommandProcess) -> ToolCallRecord:
    """A running command's record with the process group it leads (its state unchanged)."""
    if record.state is not ToolState.RUNNING:
        raise IllegalTransition(f"{record.tool_use_id}: a process starts only while running")
    return record.model_copy(update={"process": process})


def answer_control(snap: ConversationSnapshot, tool_use_id: str, content: str) -> Moved:
    """A control call done with ``content``, the answer a person gave, as its result."""
    record = snap.tool_calls.get(tool_use_id)
    if record is None:
        return Moved(None, ToolResultEntry(tool_use_id=tool_use_id, content=content))
    return move(record, ToolState.DONE, result=content)


def unrecorded(
    snap: ConversationSnapshot, read_only: bool, call: ToolCall, turn_seq: int, index: int
) -> ToolCallRecord:
    """The record of ``call``, or a new ``approved`` one if it has none (to close it)."""
    found = snap.tool_calls.get(call.id)
    if found is not None:
        return found
    new = admit(call, read_only=read_only, state=ToolState.APPROVED, turn_seq=turn_seq, index=index)
    assert new.record is not None
    return new.record


def parts(
    moves: Iterable[Moved],
) -> tuple[tuple[ToolResultEntry, ...], tuple[ToolCallRecord, ...]]:
    """``(results, records)`` of several moves, in order, for one change."""
    done = list(moves)
    return (
        tuple(r for m in done for r in m.results),
        tuple(r for m in done for r in m.records),
    )


def open_calls(snap: ConversationSnapshot) -> list[ToolCall]:
    """Calls of the last assistant turn that have no result yet, in order.

    Reads the journal back to the last assistant turn only (its calls' results come
    after it), so the cost does not grow with the conversation.
    """
    journal = snap.journal
    for at in range(len(journal) - 1, -1, -1):
        last = journal[at].entry
        if isinstance(last, AssistantTurn):
            break
    else:
        return []
    answered = {
        r.entry.tool_use_id for r in journal[at + 1 :] if isinstance(r.entry, ToolResultEntry)
    }
    return [c for c in last.tool_calls if c.id not in answered]


def answered_calls(snap: ConversationSnapshot) -> set[str]:
    """``tool_use_id`` of every call that has its result in the journal."""
    return {r.entry.tool_use_id for r in snap.journal if isinstance(r.entry, ToolResultEntry)}


def _moved(
    record: ToolCallRecord, before: ToolState | None, to: ToolState, result: str | None
) -> Moved:
    where = f"tool call {record.tool_use_id} ({record.name})"
    if not allowed(before, to):
        raise IllegalTransition(f"{where}: {before or 'new'} -> {to} is not allowed")
    if control.ends_turn(record.name) and to in _NOT_FOR_CONTROL:
        raise IllegalTransition(f"{where}: a control call never takes {to}; its request waits")
    final = to in FINAL_TOOL_STATES
    if final != (result is not None):
        need = "needs its result" if final else "takes no result"
        raise IllegalTransition(f"{where}: {to} {need}")
    moved = record.model_copy(update={"state": to})
    if result is None:
        return Moved(moved)
    entry = ToolResultEntry(
        tool_use_id=record.tool_use_id, content=result, is_error=to is not ToolState.DONE
    )
    return Moved(moved, entry)
