"""Plan revision: a plan was not approved; what should change? The answer revises it.

Opens when a person rejects plan vN (:func:`open_after_reject`): the question
``What should change in plan vN?`` is asked in the thread (``waiting(question)``).
A reply revises the plan (:func:`revise`), as a reply to the open plan itself
does (:func:`core.requests.plan_approval.revise`): the ``propose_plan`` call gets
its result, which tells the model what to change and to propose again, and the
workflow goes back to planning.
"""

from __future__ import annotations

from core.requests.closing import request_closed
from core.requests.common import Opening
from core.tool_state import answer_control
from core.vocabulary import lifecycle
from core.vocabulary.entries import DecisionEntry, UserText
from core.vocabulary.inputs import ThreadMessage
from core.vocabulary.journal import Change, RequestResolution
from core.vocabulary.requests import PlanApproval, PlanRevision, RequestState
from core.vocabulary.run_events import QuestionAsked, RequestClosed
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.verdicts import Revised
from core.workflows.model import Outcome, Workflow
from core.workflows.moves import follow


def revision_text(plan_version: int, name: str, text: str) -> str:
    """What the model reads when ``name`` asked for ``text`` to change in plan ``plan_version``."""
    return (
        f"Plan v{plan_version} was not approved. {name} asked for a change: "
        f"{text}\nPropose a revised plan with propose_plan."
    )


def open_after_reject(
    snap: ConversationSnapshot,
    rejected: PlanApproval,
    decision: DecisionEntry,
    resolution: RequestResolution,
    closed: tuple[RequestClosed, ...],
    opening: Opening,
) -> Change:
    """Record the rejection of ``rejected`` and ask what should change.

    The question's id is the plan's with ``-change``; ``decision``, ``resolution``
    and ``closed`` are the rejection's entry, resolution and closing event.
    """
    expires_at, remind_at = opening.times()
    question = PlanRevision(
        id=f"{rejected.id}-change",
        tool_use_id=rejected.tool_use_id,
        plan_version=rejected.plan_version,
        prompt=f"What should change in plan v{rejected.plan_version}?",
        expires_at=expires_at,
        remind_at=remind_at,
    )
    return Change(
        entries=(decision,),
        resolve=(resolution,),
        open_request=question,
        status=lifecycle.move(snap.status, lifecycle.waiting(question.wait)),
        events=(*closed, QuestionAsked(request_id=question.id, question=question.prompt)),
    )


def revise(
    snap: ConversationSnapshot,
    request: PlanApproval | PlanRevision,
    reply: ThreadMessage,
    workflow: Workflow,
) -> Change:
    """A reply asking for a change: the plan call's result says what, back to planning.

    An open plan is ``superseded`` by the reply; a revision question is ``decided``.
    """
    by = reply.author
    state = RequestState.SUPERSEDED if isinstance(request, PlanApproval) else RequestState.DECIDED
    answered = answer_control(
        snap, request.tool_use_id, revision_text(request.plan_version, by.name, reply.text)
    )
    position = follow(workflow, snap, Outcome.REJECTED)
    return Change(
        entries=(
            UserText(author=by, text=reply.text, role="feedback", files=reply.blocks),
            *answered.results,
            *workflow.entered(snap.position, position),
        ),
        tool_calls=answered.records,
        resolve=(RequestResolution(request_id=request.id, state=state, verdict=Revised(), by=by),),
        status=lifecycle.move(snap.status, lifecycle.RUNNING),
        position=position,
        events=request_closed(snap, request, "revised", by=by),
    )
