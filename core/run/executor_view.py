"""Where the executor's own view of the history starts: the approved plan, read from the journal.

When the executor's model differs from the planner's, its requests do not carry the
planning conversation (another model's turns, which its prompt cache never held):
they start with the request and the approved plan, then everything journaled since
the plan's approval (:meth:`core.run.history.History.build`; docs/architecture.md,
"Conversation lifecycle and workflow position"). This module finds that plan
(:func:`approved_plan`, from the conversation's requests), its approval in the
journal (:func:`approval_at`: the :class:`core.vocabulary.entries.DecisionEntry`
that approved it) and what the view's first message says (:func:`plan_of`). All of
it is derived from the journal, so a restarted run builds the same view.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.tools import control
from core.vocabulary.entries import (
    AssistantTurn,
    DecisionEntry,
    JournalRecord,
    StepEntered,
    UserText,
)
from core.vocabulary.requests import PendingRequest, PlanApproval
from core.vocabulary.verdicts import Approved


def approved_plan(requests: Sequence[PendingRequest]) -> PlanApproval | None:
    """The newest plan a person approved among ``requests`` (a conversation's, oldest
    first), also when a later proposal superseded it since; None when none was."""
    for request in reversed(requests):
        if isinstance(request, PlanApproval) and isinstance(request.verdict, Approved):
            return request
    return None


def approval_at(journal: Sequence[JournalRecord], plan: PlanApproval) -> int | None:
    """The index in ``journal`` of the decision that approved ``plan`` (looked for from
    the end); None when the journal does not hold it."""
    for i in range(len(journal) - 1, -1, -1):
        entry = journal[i].entry
        if (
            isinstance(entry, DecisionEntry)
            and entry.request_id == plan.id
            and isinstance(entry.verdict, Approved)
        ):
            return i
    return None


def plan_of(
    journal: Sequence[JournalRecord], at: int, plan: PlanApproval
) -> tuple[UserText | None, str]:
    """What the executor's view of ``plan`` (approved by the decision ``journal[at]``)
    opens with: the request the plan carries out (the one that began its task, not a
    later one that carried it on; None when the journal holds none) and the plan's
    steps as approved, numbered, under a line that says who approved it::

        [threadbot: plan v1, approved by alice; the planning before it is left out]
        1. Write notes.md

    The steps are the ``propose_plan`` call's (the request's ``prompt`` when the call
    is not found before the approval).
    """
    decision = journal[at].entry
    assert isinstance(decision, DecisionEntry)
    steps: list[str] | None = None
    made = at
    for i in range(at - 1, -1, -1):  # the plan's propose_plan call
        entry = journal[i].entry
        if isinstance(entry, AssistantTurn):
            call = next((c for c in entry.tool_calls if c.id == plan.tool_use_id), None)
            if call is not None:
                steps, made = control.plan_steps(call.name, call.input), i
                break
    numbered = "\n".join(
        f"{n}. {step}" for n, step in enumerate(steps or plan.prompt.splitlines(), 1)
    )
    said = (
        f"[threadbot: plan v{plan.plan_version}, approved by {decision.by.name}; "
        f"the planning before it is left out]\n{numbered}"
    )
    return _task_request(journal, made), said


def _task_request(journal: Sequence[JournalRecord], before: int) -> UserText | None:
    """The request before ``journal[before]`` that began its task (journaled just after
    the step it moved the conversation to, or first); else the newest request there."""
    newest: UserText | None = None
    for i in range(before - 1, -1, -1):
        entry = journal[i].entry
        if isinstance(entry, UserText) and entry.role == "request":
            if i == 0 or isinstance(journal[i - 1].entry, StepEntered):
                return entry
            newest = newest or entry
    return newest
