"""Where each step of the approved plan stands, as a run event in the change that moves it.

A run knows which plan step it is on from its journal (:func:`core.contexts.plan.current_plan`):
a ``report_progress`` call that names a later step ("step 3 of 4") makes the steps
before it done, and ``finish`` makes them all done. From that, each step is
``complete`` (done), ``in_progress`` (the first step not done, while the run works or
waits for a person), ``error`` (that step, once the run failed, waits for a retry, or
was stopped or expired) or ``pending`` (docs/architecture.md, "Plan cards").

:func:`with_plan_progress` compares the steps before and after a change and, when one
moved, adds a :class:`~core.vocabulary.run_events.PlanProgress` to the change's events,
so it is journaled (and rendered) in the same commit: a plan approved shows its first
step in progress, a restarted run says the same as the run before it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from core.contexts.plan import current_plan
from core.vocabulary.entries import AssistantTurn
from core.vocabulary.fold import apply_change
from core.vocabulary.journal import Change, Committed
from core.vocabulary.lifecycle import Lifecycle, WaitKind
from core.vocabulary.requests import PlanApproval
from core.vocabulary.run_events import PlanProgress, StepStatus
from core.vocabulary.snapshot import ConversationSnapshot

_PROVISIONAL = datetime.fromtimestamp(0, UTC)
"""The time stamped on a change folded only to read its plan (no step reads the time)."""


def plan_progress(snap: ConversationSnapshot) -> PlanProgress | None:
    """How the steps of the conversation's approved plan stand in ``snap``; None when no
    plan was approved since its newest task began."""
    plan = current_plan(snap)
    if plan is None:
        return None
    request = next(
        (
            r
            for r in snap.requests
            if isinstance(r, PlanApproval) and r.plan_version == plan.version
        ),
        None,
    )
    if request is None:
        return None
    halted = snap.status.lifecycle in (Lifecycle.FAILED, Lifecycle.CANCELLED) or (
        snap.status.wait is WaitKind.RETRY
    )
    statuses: list[StepStatus] = []
    for index in range(len(plan.steps)):
        if index < plan.done:
            statuses.append("complete")
        elif index == plan.done:
            statuses.append("error" if halted else "in_progress")
        else:
            statuses.append("pending")
    return PlanProgress(
        request_id=request.id,
        version=plan.version,
        steps=plan.steps,
        statuses=tuple(statuses),
        approved_by=request.decided_by.name if request.decided_by else None,
    )


def with_plan_progress(snap: ConversationSnapshot, change: Change) -> Change:
    """``change`` with a :class:`PlanProgress` at the end of its events when it moves a
    step of the plan (see the module docstring), else ``change`` as it is.

    Only a change that may move one is read twice: one that decides a request, sets a
    status or journals a model turn."""
    turns = any(isinstance(e, AssistantTurn) for e in change.entries)
    if not (turns or change.resolve or change.status is not None):
        return change
    before = plan_progress(snap)
    seqs = tuple(range(snap.last_seq + 1, snap.last_seq + 1 + len(change.entries)))
    after = plan_progress(apply_change(snap, change, Committed(seqs=seqs, at=_PROVISIONAL)))
    if after is None or after == before:
        return change
    return change.model_copy(update={"events": (*change.events, after)})
