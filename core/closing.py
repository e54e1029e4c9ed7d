"""The run event that closes a request's message: :class:`core.run_events.RequestClosed`.

Every change that resolves a request whose message asks for a decision (a plan, a
tool approval, a go-on or a retry request) carries one, so the store writes the
edit of that message in the same transaction as the resolution (DESIGN.md,
"Durability and exactly-once"). Pure functions of the snapshot the change was
made from.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from core.journal import (
    ConversationSnapshot,
    DecisionEntry,
    PendingRequest,
    Person,
    RequestKind,
    ToolCallRecord,
    ToolState,
)
from core.run_events import CallOutcome, RequestClosed

Outcome = Literal["approved", "rejected", "revised", "replaced", "decided", "stopped", "expired"]
"""What became of a request (see :class:`core.run_events.RequestClosed`)."""

_WITH_MESSAGE: dict[RequestKind, Literal["plan", "tool_approval", "continue", "retry"]] = {
    RequestKind.PLAN_APPROVAL: "plan",
    RequestKind.TOOL_APPROVAL: "tool_approval",
    RequestKind.CONTINUE: "continue",
    RequestKind.RETRY: "retry",
}
_UNDECIDED = frozenset({ToolState.PENDING_APPROVAL, ToolState.CANCELLED})


def request_closed(
    snap: ConversationSnapshot,
    request: PendingRequest,
    outcome: Outcome,
    *,
    by: Person | None = None,
    replaced_by: int | None = None,
    decided: Sequence[ToolCallRecord] = (),
    decision: DecisionEntry | None = None,
) -> tuple[RequestClosed, ...]:
    """The event closing ``request``'s message, or ``()`` when it has none to edit (a question).

    ``by``: who decided, revised or stopped; ``replaced_by``: the plan version that
    replaced it. For a tool approval, ``decided`` are the call records the same
    change writes and ``decision`` its journal entry (not in ``snap`` yet), so
    ``calls`` says how each call stands after the change.
    """
    kind = _WITH_MESSAGE.get(request.kind)
    if kind is None:
        return ()
    calls = (
        call_outcomes(snap, request, decided=decided, decision=decision)
        if request.kind is RequestKind.TOOL_APPROVAL
        else ()
    )
    return (
        RequestClosed(
            request_id=request.id,
            request=kind,
            outcome=outcome,
            by_name=by.name if by else None,
            plan_version=request.plan_version if kind == "plan" else None,
            replaced_by=replaced_by,
            calls=calls,
        ),
    )


def requests_closed(
    snap: ConversationSnapshot,
    requests: Iterable[PendingRequest],
    outcome: Literal["stopped", "expired"],
    *,
    by: Person | None = None,
) -> tuple[RequestClosed, ...]:
    """The events closing the messages of ``requests``, stopped by ``by`` or expired."""
    return tuple(event for r in requests for event in request_closed(snap, r, outcome, by=by))


def call_outcomes(
    snap: ConversationSnapshot,
    request: PendingRequest,
    *,
    decided: Sequence[ToolCallRecord] = (),
    decision: DecisionEntry | None = None,
) -> tuple[CallOutcome, ...]:
    """How each call of the tool approval ``request`` stands, in call order.

    The verdict comes from the call's record (``decided`` over the snapshot's):
    ``denied``, still ``pending_approval`` (undecided), or any other state (allowed,
    it may have run since). Who gave it comes from the request's decision entries
    in journal order, then ``decision``: an entry with a ``call`` decided that call,
    one without decided every call not decided before it.
    """
    records = dict(snap.tool_calls) | {r.tool_use_id: r for r in decided}
    deciders = _deciders(snap, request, decision)
    outcomes: list[CallOutcome] = []
    for number, tool_use_id in enumerate(request.tool_use_ids, start=1):
        record = records.get(tool_use_id)
        if record is None or record.state in _UNDECIDED:
            outcomes.append(CallOutcome(number=number, outcome="undecided"))
            continue
        verdict: Literal["allowed", "denied"] = (
            "denied" if record.state is ToolState.DENIED else "allowed"
        )
        outcomes.append(CallOutcome(number=number, outcome=verdict, by_name=deciders.get(number)))
    return tuple(outcomes)


def _deciders(
    snap: ConversationSnapshot, request: PendingRequest, decision: DecisionEntry | None
) -> dict[int, str]:
    """``{call number: name}`` of whoever decided each call of ``request``."""
    entries = [
        r.entry
        for r in snap.journal
        if isinstance(r.entry, DecisionEntry) and r.entry.request_id == request.id
    ]
    if decision is not None:
        entries.append(decision)
    names: dict[int, str] = {}
    for entry in entries:
        numbers = (
            [entry.call] if entry.call is not None else range(1, len(request.tool_use_ids) + 1)
        )
        for number in numbers:
            names.setdefault(number, entry.by.name)
    return names
