"""What ``finish`` does: the answer is posted with the request's totals, the run ends ``done``.

The other control calls are done where their request is (``propose_plan``:
:mod:`core.requests.plan_approval`, ``ask_user``: :mod:`core.requests.question`) or
as a progress note (``report_progress``); :meth:`core.run.tool_calls.ToolCalls`
dispatches the parsed calls (:data:`core.tools.control.ControlCall`) in one ``match``.
"""

from __future__ import annotations

from core.tool_state import move
from core.tools.control import Finish
from core.vocabulary import lifecycle
from core.vocabulary.journal import Change
from core.vocabulary.run_events import RunAnswered, RunStats
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolCallRecord, ToolState
from core.workflow import Transition, Workflow


def finish(
    snap: ConversationSnapshot,
    record: ToolCallRecord,
    call: Finish,
    workflow: Workflow,
    stats: RunStats,
) -> Change:
    """Post ``call``'s answer (the ``finish`` call ``record``'s) with ``stats``, the
    request's totals; the run ends ``done``."""
    done = move(record, ToolState.DONE, result="The answer is in the thread.")
    return Change(
        entries=done.results,
        tool_calls=done.records,
        status=lifecycle.move(snap.status, lifecycle.DONE),
        position=workflow.next(snap.position, Transition.FINISHED),
        events=(RunAnswered(text=call.answer, stats=stats),),
    )
