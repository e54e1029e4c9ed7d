"""The run event that closes a request's message: :class:`core.vocabulary.run_events.RequestClosed`.

Every change that resolves a request whose message asks for a decision (a plan, a
tool approval, a go-on or a retry request, a question with options) carries one, so
the store writes the edit of that message in the same transaction as the resolution
(docs/architecture.md, "Durability and exactly-once"). A question without options, a
plan revision or an escalation invites a reply only: its message is left as it is.
Pure functions of the snapshot the change was made from.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, assert_never

from core.requests.call_verdicts import decided_calls
from core.tools import control
from core.vocabulary.entries import DecisionEntry
from core.vocabulary.people import Person
from core.vocabulary.requests import (
    ContinueRequest,
    Escalation,
    PendingRequest,
    PlanApproval,
    PlanRevision,
    Question,
    RetryRequest,
    ToolApproval,
    WaitRequest,
)
from core.vocabulary.run_events import CallOutcome, RequestClosed
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolCallRecord, ToolState

Outcome = Literal[
    "approved", "rejected", "revised", "replaced", "decided", "answered", "stopped", "expired"
]
"""What became of a request (see :class:`core.vocabulary.run_events.RequestClosed`)."""

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
    answer: str | None = None,
    option: int | None = None,
) -> tuple[RequestClosed, ...]:
    """The event closing ``request``'s message, or ``()`` when it has none to edit.

    ``by``: who decided, revised, answered or stopped; ``replaced_by``: the plan version
    that replaced it; ``answer``: a question's answer (the option's text, or the words),
    ``option``: the option's number (from 1) when one was picked. For a tool approval,
    ``decided`` are the call records the same change writes and ``decision`` its
    journal entry (not in ``snap`` yet), so ``calls`` says how each call stands after
    the change.
    """
    kind = _message_kind(snap, request)
    if kind is None:
        return ()
    calls = (
        call_outcomes(snap, request, decided=decided, decision=decision)
        if isinstance(request, ToolApproval)
        else ()
    )
    return (
        RequestClosed(
            request_id=request.id,
            request=kind,
            outcome=outcome,
            by_name=by.name if by else None,
            by_id=by.id if by else None,
            plan_version=request.plan_version if isinstance(request, PlanApproval) else None,
            replaced_by=replaced_by,
            calls=calls,
            answer=answer,
            option=option,
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
    request: ToolApproval,
    *,
    decided: Sequence[ToolCallRecord] = (),
    decision: DecisionEntry | None = None,
) -> tuple[CallOutcome, ...]:
    """How each call of the tool approval ``request`` stands, in call order.

    The verdict comes from the call's record (``decided`` over the snapshot's):
    ``denied``, still ``pending_approval`` (undecided), or any other state (allowed,
    it may have run since). Who gave it comes from the request's decisions
    (:func:`core.requests.call_verdicts.decided_calls`), ``decision`` last.
    """
    records = dict(snap.tool_calls) | {r.tool_use_id: r for r in decided}
    also = (decision,) if decision is not None else ()
    deciders = decided_calls(snap, request, also)
    outcomes: list[CallOutcome] = []
    for number, tool_use_id in enumerate(request.tool_use_ids, start=1):
        record = records.get(tool_use_id)
        if record is None or record.state in _UNDECIDED:
            outcomes.append(CallOutcome(number=number, outcome="undecided"))
            continue
        verdict: Literal["allowed", "denied"] = (
            "denied" if record.state is ToolState.DENIED else "allowed"
        )
        how = deciders.get(number)
        allowed = how if verdict == "allowed" else None  # its scope, if wider than once
        outcomes.append(
            CallOutcome(
                number=number,
                outcome=verdict,
                by_name=how.name if how is not None else None,
                scope=allowed.scope if allowed is not None else None,
                pattern=allowed.pattern if allowed is not None else None,
            )
        )
    return tuple(outcomes)


def options_of(snap: ConversationSnapshot, request: Question) -> tuple[str, ...]:
    """The options the question ``request`` offers, in order (``()``: none), read from its
    ``ask_user`` call's input in ``snap``."""
    record = snap.tool_calls.get(request.tool_use_id)
    if record is None:
        return ()
    return control.asked_options(record.name, record.input)


def _message_kind(
    snap: ConversationSnapshot, request: PendingRequest
) -> Literal["plan", "tool_approval", "continue", "budget", "retry", "question"] | None:
    """What ``request``'s message asks, as :class:`RequestClosed` names it (None: a reply)."""
    match request:
        case PlanApproval():
            return "plan"
        case ToolApproval():
            return "tool_approval"
        case ContinueRequest():
            return "continue" if request.budget is None else "budget"
        case RetryRequest():
            return "retry"
        case Question():
            return "question" if options_of(snap, request) else None
        case PlanRevision() | Escalation() | WaitRequest():
            return None
        case _:
            assert_never(request)
