"""What people's answers and decisions change: pure functions to one ``Change``.

Every change that closes a pending request does it by compare-and-set
(``RequestResolution.only_if_open``, ``Change.guard_pending``): of two decisions
arriving together the store applies one and refuses the other with
:class:`core.errors.RequestConflict`, so there is one decision and one execution.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from core import lifecycle
from core.closing import request_closed
from core.control_changes import request_times
from core.inputs import Decision, Reply
from core.journal import (
    Change,
    ConversationSnapshot,
    DecisionEntry,
    PendingRequest,
    RequestKind,
    RequestResolution,
    RequestState,
    StopEntry,
    ToolCallRecord,
    ToolResultEntry,
    ToolState,
    UserText,
)
from core.lifecycle import WaitKind
from core.run_events import QuestionAsked, Stopped
from core.workflow import Transition, Workflow

if TYPE_CHECKING:
    from core.engine import EngineSettings


def answer_change(
    snap: ConversationSnapshot, request: PendingRequest, reply: Reply, workflow: Workflow
) -> Change:
    """A thread reply to an open plan (feedback: the next version) or question (the answer)."""
    by = reply.author
    if request.kind is RequestKind.PLAN_APPROVAL or request.plan_version is not None:
        state = (
            RequestState.SUPERSEDED
            if request.kind is RequestKind.PLAN_APPROVAL
            else RequestState.DECIDED
        )
        result = (
            f"Plan v{request.plan_version} was not approved. {by.name} asked for a change: "
            f"{reply.text}\nPropose a revised plan with propose_plan."
        )
        return Change(
            entries=(
                UserText(author=by, text=reply.text, role="feedback"),
                *_result(request, result),
            ),
            tool_calls=complete_control(snap, request.tool_use_id),
            resolve=(
                RequestResolution(request_id=request.id, state=state, decision="revise", by=by),
            ),
            status=lifecycle.RUNNING,
            position=workflow.next(snap.position, Transition.PLAN_REJECTED),
            events=request_closed(snap, request, "revised", by=by),
        )
    return Change(
        entries=(
            UserText(author=by, text=reply.text, role="answer"),
            *_result(request, f"{by.name} answered: {reply.text}"),
        ),
        tool_calls=complete_control(snap, request.tool_use_id),
        resolve=(
            RequestResolution(
                request_id=request.id, state=RequestState.DECIDED, decision="answer", by=by
            ),
        ),
        status=lifecycle.RUNNING,
    )


def decision_change(
    snap: ConversationSnapshot,
    request: PendingRequest,
    decision: Decision,
    workflow: Workflow,
    settings: EngineSettings,
) -> Change | None:
    """Approve or reject a plan, a tool approval (all or one call), continue or retry.

    Returns None when there is nothing left to decide (the call was decided already).
    """
    if request.kind is RequestKind.TOOL_APPROVAL:
        return _tool_decision(snap, request, decision)
    verdict: Literal["approved", "rejected"] = "approved" if decision.approved else "rejected"
    resolve = (
        RequestResolution(
            request_id=request.id, state=RequestState.DECIDED, decision=verdict, by=decision.by
        ),
    )
    record = DecisionEntry(request_id=request.id, decision=verdict, by=decision.by)
    closed = request_closed(snap, request, verdict, by=decision.by)
    if request.kind is RequestKind.PLAN_APPROVAL and not decision.approved:
        expires_at, remind_at = request_times(settings)
        question = PendingRequest(
            id=f"{request.id}-change",
            kind=RequestKind.QUESTION,
            tool_use_id=request.tool_use_id,
            plan_version=request.plan_version,
            prompt=f"What should change in plan v{request.plan_version}?",
            expires_at=expires_at,
            remind_at=remind_at,
        )
        return Change(
            entries=(record,),
            resolve=resolve,
            open_request=question,
            status=lifecycle.waiting(WaitKind.QUESTION),
            events=(*closed, QuestionAsked(request_id=question.id, question=question.prompt)),
        )
    if request.kind is RequestKind.PLAN_APPROVAL:
        text = f"Plan v{request.plan_version} was approved by {decision.by.name}. Carry it out now."
        return Change(
            entries=(record, *_result(request, text)),
            tool_calls=complete_control(snap, request.tool_use_id),
            resolve=resolve,
            status=lifecycle.RUNNING,
            position=workflow.next(snap.position, Transition.PLAN_APPROVED),
            events=closed,
        )
    if not decision.approved:  # "stop here" on a turn cap or a failed model call
        return Change(
            entries=(record, StopEntry(by=decision.by)),
            resolve=resolve,
            status=lifecycle.CANCELLED,
            events=(*closed, Stopped(by_name=decision.by.name)),
        )
    return Change(
        entries=(record, *_result(request, f"{decision.by.name} {verdict} this.")),
        tool_calls=complete_control(snap, request.tool_use_id),
        resolve=resolve,
        status=lifecycle.RUNNING,
        events=closed,
    )


def _tool_decision(
    snap: ConversationSnapshot, request: PendingRequest, decision: Decision
) -> Change | None:
    pending = [
        i
        for i in request.tool_use_ids
        if (r := snap.tool_calls.get(i)) is not None and r.state is ToolState.PENDING_APPROVAL
    ]
    if decision.call is not None:
        if not 1 <= decision.call <= len(request.tool_use_ids):
            return None
        targets = [i for i in pending if i == request.tool_use_ids[decision.call - 1]]
    else:
        targets = pending
    if not targets:
        return None
    verdict = "approved" if decision.approved else "denied"
    records: list[ToolCallRecord] = []
    results: list[ToolResultEntry] = []
    for tool_use_id in targets:
        record = snap.tool_calls[tool_use_id]
        if decision.approved:
            records.append(record.model_copy(update={"state": ToolState.APPROVED}))
        else:
            records.append(record.model_copy(update={"state": ToolState.DENIED}))
            text = f"Denied by {decision.by.name}: do not run this call or work around it."
            results.append(ToolResultEntry(tool_use_id=tool_use_id, content=text, is_error=True))
    label = verdict if decision.call is None else f"{verdict} call {decision.call}"
    settled = len(targets) == len(pending)
    waiting = snap.status == lifecycle.waiting(WaitKind.TOOL_APPROVAL)
    entry = DecisionEntry(request_id=request.id, decision=label, by=decision.by, call=decision.call)
    closed = (
        request_closed(snap, request, "decided", decided=records, decision=entry) if settled else ()
    )
    return Change(
        entries=(entry, *results),
        tool_calls=tuple(records),
        guard_pending=tuple(targets),
        resolve=(
            RequestResolution(
                request_id=request.id, state=RequestState.DECIDED, decision=label, by=decision.by
            ),
        )
        if settled
        else (),
        status=lifecycle.RUNNING if settled and waiting else None,
        events=closed,
    )


def complete_control(
    snap: ConversationSnapshot, tool_use_id: str | None
) -> tuple[ToolCallRecord, ...]:
    """The ``done`` record of a control call whose result a person just gave."""
    record = snap.tool_calls.get(tool_use_id) if tool_use_id else None
    return (record.model_copy(update={"state": ToolState.DONE}),) if record else ()


def _result(request: PendingRequest, content: str) -> tuple[ToolResultEntry, ...]:
    if request.tool_use_id is None:
        return ()
    return (ToolResultEntry(tool_use_id=request.tool_use_id, content=content),)
