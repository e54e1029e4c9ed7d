"""What the audit trail records of a person's decision, reply or stop, read from the change it
makes (docs/architecture.md, "The audit trail").

Each function returns the :class:`core.vocabulary.audit.Audited` that the change carries
(:func:`with_audit`), so the store writes it in the change's own transaction: the
record and the decision it records are both there or neither is.
"""

from __future__ import annotations

from core.vocabulary.audit import NOT_ALLOWED, RESTART, STOP, Audited, Means, Outcome
from core.vocabulary.inputs import Approve, Choose, Decision, ThreadMessage
from core.vocabulary.journal import Change
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.people import Person
from core.vocabulary.requests import (
    PendingRequest,
    PlanApproval,
    PlanRevision,
    RequestState,
    ToolApproval,
)
from core.vocabulary.run_events import Refused, RequestClosed
from core.vocabulary.verdicts import Answered, Rejected, Revised

IN_WORDS = "a budget is raised by a reaction or a button only"
"""Why a reply that would raise a budget was refused (a "no" in words must not spend)."""


def with_audit(change: Change, *audited: Audited) -> Change:
    """``change`` carrying ``audited`` too (after the entries it carries already)."""
    return change.model_copy(update={"audit": change.audit + audited})


def version_of(request: PendingRequest) -> int | None:
    """The plan version a request is about (plan approvals and revisions), else None."""
    return request.plan_version if isinstance(request, PlanApproval | PlanRevision) else None


def followed(change: Change) -> str:
    """What a decision's ``change`` does next, in a few words: ``run resumed``, ``asked
    what should change`` (a plan rejected), ``run stopped``, ``waiting for the other
    calls`` (a tool approval not decided whole yet), ``run goes on`` (decided while the
    run still works)."""
    if isinstance(change.open_request, PlanRevision):
        return "asked what should change"
    status = change.status
    if status is None:
        return "run goes on" if change.resolve else "waiting for the other calls"
    match status.lifecycle:
        case Lifecycle.RUNNING:
            return "run resumed"
        case Lifecycle.CANCELLED:
            return "run stopped"
        case Lifecycle.WAITING:
            return f"waiting: {status.wait}"
        case _:
            return f"run {status.lifecycle.value}"


def decided(request: PendingRequest, decision: Decision, change: Change) -> Audited:
    """The record of ``decision`` on ``request``, which made ``change``."""
    approve = isinstance(decision, Approve)
    outcome: Outcome
    detail = ""
    if isinstance(decision, Choose):
        outcome, detail = "chose", f"option {decision.option}; "
    elif isinstance(request, ToolApproval):
        outcome = "allowed" if approve else "denied"
        detail = f"call {decision.call}; " if decision.call is not None else ""
    else:
        outcome = "approved" if approve else "rejected"
    return Audited(
        request_kind=request.kind.value,
        request_id=request.id,
        version=version_of(request),
        user_id=decision.by.id,
        means=decision.means,
        outcome=outcome,
        reason=detail + followed(change),
    )


def replied(request: PendingRequest, message: ThreadMessage, change: Change) -> Audited | None:
    """The record of the reply ``message`` to ``request``, which made ``change``: a decision
    in words (an answer, an option's number, a plan revised, "go on"), or a refusal
    (someone who may not decide; a budget not raised in words); None when the reply
    decided nothing (a note)."""
    for event in change.events:
        if isinstance(event, Refused):
            reason = IN_WORDS if event.action == "raise_in_words" else NOT_ALLOWED
            return _reply(request, message, "refused", reason)
    resolution = next((r for r in change.resolve if r.request_id == request.id), None)
    if resolution is None or resolution.state not in (
        RequestState.DECIDED,
        RequestState.SUPERSEDED,
    ):
        return None
    option = next(
        (e.option for e in change.events if isinstance(e, RequestClosed) and e.option), None
    )
    outcome: Outcome
    match resolution.verdict:
        case _ if option is not None:
            outcome = "chose"
        case Revised():
            outcome = "revised"
        case Answered():
            outcome = "answered"
        case Rejected():
            outcome = "rejected"
        case _:
            outcome = "approved"
    detail = f"option {option}; " if option is not None else ""
    return _reply(request, message, outcome, detail + followed(change))


def _reply(
    request: PendingRequest, message: ThreadMessage, outcome: Outcome, reason: str
) -> Audited:
    return Audited(
        request_kind=request.kind.value,
        request_id=request.id,
        version=version_of(request),
        user_id=message.author.id,
        means="reply",
        outcome=outcome,
        reason=reason,
    )


def stopped_by(by: Person, means: Means | None, reason: str = "run stopped") -> Audited:
    """The record of ``by``'s stop (by ``means``) that ended its run."""
    return Audited(request_kind=STOP, user_id=by.id, means=means, outcome="stopped", reason=reason)


def restart_refused(message: ThreadMessage) -> Audited:
    """The record of a message that may not start a stopped conversation again (its author
    is neither the requester nor an approver)."""
    return Audited(
        request_kind=RESTART,
        user_id=message.author.id,
        means="reply",
        outcome="refused",
        reason=NOT_ALLOWED,
    )


def refused(
    user_id: str,
    means: Means | None,
    reason: str,
    *,
    request_kind: str | None = None,
    request_id: str | None = None,
) -> Audited:
    """The record of an attempt that changed nothing, and ``reason``: a stop (kind
    :data:`~core.vocabulary.audit.STOP`) or a decision on ``request_id`` (its kind and plan
    version read by the store when ``request_kind`` is None)."""
    return Audited(
        request_kind=request_kind,
        request_id=request_id,
        user_id=user_id,
        means=means,
        outcome="refused",
        reason=reason,
    )
