"""What ``finish`` does: the answer is posted with the request's totals, the run ends ``done``;
in a scope that hands its work back (a delegation's, :func:`handed_back`), it ends the
scope's work instead.

The other control calls are done where their request is (``propose_plan``:
:mod:`core.requests.plan_approval`, ``ask_user``: :mod:`core.requests.question`) or
as a progress note (``report_progress``); :meth:`core.run.tool_calls.ToolCalls`
dispatches the parsed calls (:data:`core.tools.control.ControlCall`) in one ``match``.
"""

from __future__ import annotations

from core.run.arrivals import ends_run, finished
from core.run.settings import EngineSettings
from core.tool_state import move
from core.tools.control import Finish, ProposePlan
from core.vocabulary.journal import Change
from core.vocabulary.run_events import RunStats
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolCallRecord, ToolState
from core.workflows.model import Workflow


def finish(
    snap: ConversationSnapshot,
    record: ToolCallRecord,
    call: Finish,
    workflow: Workflow,
    stats: RunStats,
    settings: EngineSettings,
) -> Change:
    """Post ``call``'s answer (the ``finish`` call ``record``'s) with ``stats``, the
    request's totals; the run ends ``done``, or, in a workflow whose ``finished`` leads
    on to a state that is not an end, goes on there (:func:`core.run.arrivals.finished`)."""
    if ends_run(workflow, snap):
        result = "The answer is in the thread."
    else:
        result = "Done with this step: the workflow goes on."
    done = move(record, ToolState.DONE, result=result)
    after = finished(workflow, snap, call.answer, stats, settings)
    return Change(entries=done.results, tool_calls=done.records).then(after)


HANDED_BACK = "Handed back: threadbot checks your work now."
"""The result of a ``finish`` call in a scope that hands its work back."""
NO_NEW_PLAN = "The plan is approved already: finish the sub-task within it, no new plan."
"""The result of a ``propose_plan`` call there (an error: nothing is proposed)."""


def handed_back(record: ToolCallRecord, call: Finish | ProposePlan) -> Change:
    """In a scope that hands its work back to its caller (the expert's, in a delegation:
    :attr:`core.run.scope.Scope.hands_back`): ``finish`` ends the scope's work, its
    answer kept in the call's input for the caller (the run goes on); ``propose_plan``
    is refused with :data:`NO_NEW_PLAN` (it fails, and the model reads why)."""
    if isinstance(call, Finish):
        done = move(record, ToolState.DONE, result=HANDED_BACK)
    else:
        done = move(record, ToolState.FAILED, result=NO_NEW_PLAN)
    return Change(entries=done.results, tool_calls=done.records)
