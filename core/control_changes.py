"""What the control calls ``propose_plan``, ``ask_user`` and ``finish`` change.

Pure functions from a snapshot and a call's record to one :class:`core.journal.Change`;
they raise :class:`core.errors.ToolError` for malformed input, which the runner
turns into an error result for the model.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from core import lifecycle
from core.closing import request_closed
from core.errors import ToolError
from core.journal import (
    Change,
    ConversationSnapshot,
    PendingRequest,
    RequestKind,
    RequestResolution,
    RequestState,
    ToolCallRecord,
    ToolResultEntry,
    ToolState,
)
from core.lifecycle import WaitKind
from core.run_events import Answered, PlanProposed, QuestionAsked, RunStats
from core.tools.control import FINISH, PROPOSE_PLAN, plan_steps
from core.workflow import Transition, Workflow

if TYPE_CHECKING:
    from core.engine import EngineSettings


def request_times(settings: EngineSettings) -> tuple[datetime, datetime]:
    """``(expires_at, remind_at)`` of a request opened now: its lifetime and half of it."""
    now = datetime.now(UTC)
    ttl = timedelta(seconds=settings.request_ttl)
    return now + ttl, now + ttl / 2


def control_change(
    snap: ConversationSnapshot,
    record: ToolCallRecord,
    workflow: Workflow,
    finish: RunStats | None,
    settings: EngineSettings,
) -> Change:
    """The change a waiting control call makes."""
    if record.name == FINISH:
        return _finish(snap, record, workflow, finish)
    if record.name == PROPOSE_PLAN:
        return _plan(snap, record, workflow, settings)
    return _question(record, settings)


def _finish(
    snap: ConversationSnapshot, record: ToolCallRecord, workflow: Workflow, stats: RunStats | None
) -> Change:
    answer = record.input.get("answer")
    if not isinstance(answer, str) or not answer.strip():
        raise ToolError("`answer` must be a non-empty string")
    return Change(
        entries=(
            ToolResultEntry(tool_use_id=record.tool_use_id, content="The answer is in the thread."),
        ),
        tool_calls=(record.model_copy(update={"state": ToolState.DONE}),),
        status=lifecycle.DONE,
        position=workflow.next(snap.position, Transition.FINISHED),
        events=(Answered(text=answer.strip(), stats=stats or RunStats()),),
    )


def _plan(
    snap: ConversationSnapshot, record: ToolCallRecord, workflow: Workflow, settings: EngineSettings
) -> Change:
    steps, tools = plan_steps(record.input)
    version = snap.plan_version + 1
    request_id = uuid.uuid4().hex[:12]
    expires_at, remind_at = request_times(settings)
    plans = [
        r
        for r in snap.requests
        if r.kind is RequestKind.PLAN_APPROVAL and r.state is not RequestState.SUPERSEDED
    ]
    older = tuple(
        RequestResolution(
            request_id=r.id,
            state=RequestState.SUPERSEDED,
            decision=r.decision,
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
    return Change(
        resolve=older,
        tool_calls=(record.model_copy(update={"state": ToolState.PENDING_APPROVAL}),),
        open_request=PendingRequest(
            id=request_id,
            kind=RequestKind.PLAN_APPROVAL,
            tool_use_id=record.tool_use_id,
            plan_version=version,
            prompt="\n".join(steps),
            expires_at=expires_at,
            remind_at=remind_at,
        ),
        status=lifecycle.waiting(WaitKind.PLAN_APPROVAL),
        position=workflow.next(snap.position, Transition.PLAN_PROPOSED),
        plan_version=version,
        events=(
            *replaced,
            PlanProposed(
                request_id=request_id, version=version, steps=tuple(steps), tools=tuple(tools)
            ),
        ),
    )


def _question(record: ToolCallRecord, settings: EngineSettings) -> Change:
    question = record.input.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ToolError("`question` must be a non-empty string")
    raw = record.input.get("options") or []
    options = tuple(str(o) for o in raw) if isinstance(raw, list) else ()
    request_id = uuid.uuid4().hex[:12]
    expires_at, remind_at = request_times(settings)
    return Change(
        tool_calls=(record.model_copy(update={"state": ToolState.RUNNING}),),
        open_request=PendingRequest(
            id=request_id,
            kind=RequestKind.QUESTION,
            tool_use_id=record.tool_use_id,
            prompt=question.strip(),
            expires_at=expires_at,
            remind_at=remind_at,
        ),
        status=lifecycle.waiting(WaitKind.QUESTION),
        events=(QuestionAsked(request_id=request_id, question=question.strip(), options=options),),
    )
