"""Plan approval: the model proposes a plan (``propose_plan``); a person approves it.

Opens when the model's ``propose_plan`` call comes up (:func:`open_plan`): the
plan gets the next version, older plans are superseded (an open one's message
says it was replaced), and the conversation waits (``waiting(plan_approval)``).
An approval is bound to that version (:func:`decide`): approved, the call's
result tells the model to carry the plan out and the workflow moves on;
rejected, a plan revision asks what should change
(:mod:`core.requests.plan_revision`). A reply to the open plan revises it at once
(:func:`core.requests.plan_revision.revise`).
"""

from __future__ import annotations

from core.requests import plan_revision
from core.requests.closing import request_closed
from core.requests.common import Opening
from core.tool_state import answer_control, opened
from core.tools.control import ProposePlan
from core.vocabulary import lifecycle
from core.vocabulary.entries import DecisionEntry
from core.vocabulary.inputs import Approve, Reject
from core.vocabulary.journal import Change, RequestResolution
from core.vocabulary.requests import PlanApproval, RequestState
from core.vocabulary.run_events import PlanProposed
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolCallRecord
from core.vocabulary.verdicts import Approved, Rejected
from core.workflows.model import Outcome, Workflow
from core.workflows.moves import follow


def open_plan(
    snap: ConversationSnapshot,
    record: ToolCallRecord,
    plan: ProposePlan,
    workflow: Workflow,
    opening: Opening,
) -> Change:
    """Propose ``plan``, the ``propose_plan`` call ``record``'s, as the next version."""
    steps, tools = plan.steps, plan.tools
    version = snap.plan_version + 1
    plans = [
        r
        for r in snap.requests
        if isinstance(r, PlanApproval) and r.state is not RequestState.SUPERSEDED
    ]
    older = tuple(
        RequestResolution(
            request_id=r.id,
            state=RequestState.SUPERSEDED,
            verdict=r.verdict,
            by=r.decided_by,
            only_if_open=False,
        )
        for r in plans
    )
    replaced = tuple(  # a decided plan's message shows its decision already
        event
        for r in plans
        if r.state is RequestState.OPEN
        for event in request_closed(snap, r, "replaced", replaced_by=version)
    )
    expires_at, remind_at = opening.times()
    position = follow(workflow, snap, Outcome.PLAN_PROPOSED)
    request = PlanApproval(
        id=opening.new_id(),
        tool_use_id=record.tool_use_id,
        plan_version=version,
        prompt="\n".join(steps),
        expires_at=expires_at,
        remind_at=remind_at,
    )
    return Change(
        entries=workflow.entered(snap.position, position),
        resolve=older,
        tool_calls=(opened(record, request.id),),
        open_request=request,
        status=lifecycle.move(snap.status, lifecycle.waiting(request.wait)),
        position=position,
        plan_version=version,
        events=(
            *replaced,
            PlanProposed(
                request_id=request.id,
                version=version,
                steps=tuple(steps),
                tools=tuple(tools),
                fixed=workflow.state(position).ask == "approve",
            ),
        ),
    )


def decide(
    snap: ConversationSnapshot,
    request: PlanApproval,
    decision: Approve | Reject,
    workflow: Workflow,
    opening: Opening,
) -> Change:
    """Approve plan ``request`` (carry it out now) or reject it (what should change?); a
    plan the workflow proposed itself (a human step that approves a fixed plan) goes on
    along the state's ``rejected`` transition instead of asking."""
    by = decision.by
    verdict = Approved() if isinstance(decision, Approve) else Rejected()
    resolution = RequestResolution(
        request_id=request.id, state=RequestState.DECIDED, verdict=verdict, by=by
    )
    entry = DecisionEntry(request_id=request.id, verdict=verdict, by=by)
    closed = request_closed(snap, request, verdict.kind, by=by)
    fixed = workflow.state(snap.position).ask == "approve"
    if isinstance(verdict, Rejected) and not fixed:
        return plan_revision.open_after_reject(snap, request, entry, resolution, closed, opening)
    if isinstance(verdict, Rejected):  # the workflow's own plan: on along ``rejected``
        text = f"Plan v{request.plan_version} was rejected by {by.name}."
        outcome = Outcome.REJECTED
    else:
        text = f"Plan v{request.plan_version} was approved by {by.name}. Carry it out now."
        outcome = Outcome.APPROVED
    answered = answer_control(snap, request.tool_use_id, text)
    position = follow(workflow, snap, outcome)
    return Change(
        entries=(entry, *answered.results, *workflow.entered(snap.position, position)),
        tool_calls=answered.records,
        resolve=(resolution,),
        status=lifecycle.move(snap.status, lifecycle.RUNNING),
        position=position,
        events=closed,
    )
