"""What a person's decision or reply does to the open request: one ``Change``, by kind.

Dispatches on the request's type (``match`` ending in ``assert_never``), so a new
kind of request is not forgotten here. Every change that closes a request does it
by compare-and-set (``RequestResolution.only_if_open``, ``Change.guard_pending``):
of two decisions arriving together the store applies one and refuses the other
with :class:`core.vocabulary.errors.RequestConflict`, so there is one decision and one
execution.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import assert_never

from core.requests import (
    escalation,
    go_on,
    plan_approval,
    plan_revision,
    question,
    tool_approval,
)
from core.requests.audit import decided, replied, with_audit
from core.requests.closing import options_of
from core.requests.common import Opening
from core.vocabulary.approvals import ApprovalScope
from core.vocabulary.inputs import Approve, Choose, DecideOutcome, Decision, ThreadMessage
from core.vocabulary.journal import Change
from core.vocabulary.requests import (
    ContinueRequest,
    Escalation,
    PendingRequest,
    PlanApproval,
    PlanRevision,
    Question,
    RequestState,
    RetryRequest,
    ToolApproval,
    WaitRequest,
)
from core.vocabulary.snapshot import ConversationSnapshot
from core.workflows.model import Workflow


def answered_in_words(request: PendingRequest) -> bool:
    """Whether ``request`` is answered by a reply only (a question, an escalation), never
    by a decision."""
    return isinstance(request, Question | PlanRevision | Escalation)


def takes(request: PendingRequest, decision: Decision) -> bool:
    """Whether ``request`` is decided by ``decision`` at all: a choice for a question (one
    without the option is refused later), an approval or rejection for a request that is
    not answered in words only."""
    if isinstance(decision, Choose):
        return isinstance(request, Question)
    return not answered_in_words(request)


def refused_decision(
    snap: ConversationSnapshot,
    decision: Decision,
    now: datetime,
    scopes: Sequence[ApprovalScope] = (ApprovalScope.ONCE,),
) -> DecideOutcome | None:
    """Why ``decision`` decides nothing at ``now`` (:class:`DecideOutcome` says each
    outcome), or None when it may: its request is open, takes this kind of decision, has
    not run out of time, has the call or the option it names, and an approval wider
    than once is of a tool approval and of one of the ``scopes`` offered."""
    request = next((r for r in snap.requests if r.id == decision.request_id), None)
    if request is None:
        return DecideOutcome.NOT_OPEN
    if request.state is RequestState.DECIDED:
        return DecideOutcome.ALREADY_DECIDED
    if request.state is not RequestState.OPEN or not takes(request, decision):
        return DecideOutcome.NOT_OPEN  # e.g. an escalation is answered in words
    if request.expires_at is not None and now >= request.expires_at:
        # The sweeper had not come by yet. Expire it in the conversation's turn, not
        # here: a run may still hold the conversation, its calls running.
        return DecideOutcome.EXPIRED
    if isinstance(decision, Approve) and decision.scope is not ApprovalScope.ONCE:
        if not isinstance(request, ToolApproval) or decision.scope not in scopes:
            return DecideOutcome.SCOPE_NOT_OFFERED
    if isinstance(decision, Choose):  # takes(): the request is a question
        options = options_of(snap, request) if isinstance(request, Question) else ()
        return None if 1 <= decision.option <= len(options) else DecideOutcome.NO_SUCH_CALL
    calls = request.tool_use_ids if isinstance(request, ToolApproval) else ()
    if decision.call is not None and not 1 <= decision.call <= len(calls):
        return DecideOutcome.NO_SUCH_CALL
    return None


def decision_change(
    snap: ConversationSnapshot,
    request: PendingRequest,
    decision: Decision,
    workflow: Workflow,
    opening: Opening,
) -> Change | None:
    """The change ``decision`` makes to the open ``request``, carrying its record for the
    audit trail (:func:`core.requests.audit.decided`).

    None when there is nothing left to decide: the call was decided already, the
    request is answered in words (:func:`answered_in_words`), or a choice is not the
    question's (:func:`core.requests.question.choose`).
    """
    change = _decided(snap, request, decision, workflow, opening)
    return None if change is None else with_audit(change, decided(request, decision, change))


def _decided(
    snap: ConversationSnapshot,
    request: PendingRequest,
    decision: Decision,
    workflow: Workflow,
    opening: Opening,
) -> Change | None:
    if isinstance(decision, Choose):
        return question.choose(snap, request, decision) if isinstance(request, Question) else None
    match request:
        case PlanApproval():
            return plan_approval.decide(snap, request, decision, workflow, opening)
        case ToolApproval():
            return tool_approval.decide(snap, request, decision)
        case ContinueRequest() | RetryRequest():
            return go_on.decide(snap, request, decision)
        case PlanRevision() | Question() | Escalation() | WaitRequest():
            return None
        case _:
            assert_never(request)


def reply_change(
    snap: ConversationSnapshot, request: PendingRequest, reply: ThreadMessage, workflow: Workflow
) -> Change | None:
    """The change a reply in the thread makes to the open ``request``, carrying its record
    for the audit trail when it decides or is refused (:func:`core.requests.audit.replied`).

    It revises a plan, answers a question or an escalation, or goes on after a failure or the
    turn cap; None when it is only a note (a tool approval is decided by
    reactions and buttons, not words).
    """
    change = _replied(snap, request, reply, workflow)
    if change is None:
        return None
    audited = replied(request, reply, change)
    return change if audited is None else with_audit(change, audited)


def _replied(
    snap: ConversationSnapshot, request: PendingRequest, reply: ThreadMessage, workflow: Workflow
) -> Change | None:
    match request:
        case PlanApproval() if workflow.state(snap.position).ask == "approve":
            return None  # the workflow's own plan: approved or rejected, not revised
        case PlanApproval() | PlanRevision():
            return plan_revision.revise(snap, request, reply, workflow)
        case Question():
            return question.answer(snap, request, reply)
        case Escalation():
            return escalation.answer(snap, request, reply)
        case ContinueRequest() | RetryRequest():
            return go_on.reply(snap, request, reply)
        case ToolApproval() | WaitRequest():
            return None
        case _:
            assert_never(request)
