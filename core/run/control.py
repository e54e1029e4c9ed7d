"""What the control calls that end a turn do: ``finish``, ``propose_plan``, ``ask_user``.

``finish`` delivers the answer and ends the run ``done``; ``propose_plan`` and
``ask_user`` open a request and the run waits (:mod:`core.requests.plan_approval`,
:mod:`core.requests.question`). Pure: raises :class:`core.vocabulary.errors.ToolError` for
malformed input, which the runner turns into an error result for the model.
"""

from __future__ import annotations

from core.requests import plan_approval, question
from core.requests.common import Opening
from core.tool_state import move
from core.tools.control import FINISH, PROPOSE_PLAN
from core.vocabulary import lifecycle
from core.vocabulary.errors import ToolError
from core.vocabulary.journal import Change
from core.vocabulary.run_events import RunAnswered, RunStats
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolCallRecord, ToolState
from core.workflow import Transition, Workflow


def control_change(
    snap: ConversationSnapshot,
    record: ToolCallRecord,
    workflow: Workflow,
    stats: RunStats,
    opening: Opening,
) -> Change:
    """The change the waiting control call ``record`` makes.

    ``stats``: the request's totals, for a ``finish`` answer's footer.
    """
    if record.name == FINISH:
        return finish(snap, record, workflow, stats)
    if record.name == PROPOSE_PLAN:
        return plan_approval.open_plan(snap, record, workflow, opening)
    return question.open_question(snap, record, opening)


def finish(
    snap: ConversationSnapshot, record: ToolCallRecord, workflow: Workflow, stats: RunStats
) -> Change:
    """Post the ``finish`` call's answer with ``stats``; the run ends ``done``."""
    answer = record.input.get("answer")
    if not isinstance(answer, str) or not answer.strip():
        raise ToolError("`answer` must be a non-empty string")
    done = move(record, ToolState.DONE, result="The answer is in the thread.")
    return Change(
        entries=done.results,
        tool_calls=done.records,
        status=lifecycle.move(snap.status, lifecycle.DONE),
        position=workflow.next(snap.position, Transition.FINISHED),
        events=(RunAnswered(text=answer.strip(), stats=stats),),
    )
