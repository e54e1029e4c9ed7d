"""Admitting a model turn's tool calls: the policy decides each call's first state.

When a turn is committed, each call gets its record (:func:`core.tool_state.admit`):
``approved``, ``denied`` (a tool the position does not offer, ``ask_expert`` where
no expert may be consulted, a control call whose input is malformed, or the policy
says no; its error result goes in the same commit), ``failed`` (a tool that does not
exist: its result lists the tools the position offers, and it counts toward the
failure streak, :mod:`core.run.escalation`)
or ``pending_approval`` (the policy asks a person first,
:mod:`core.requests.tool_approval`). A control call is parsed here, once, into its
typed input (:func:`core.tools.control.parse`); a malformed one never comes up.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.models.base import ToolKind
from core.policy import policy
from core.policy.summary import summarize_call
from core.tool_state import Moved, admit, move, parts
from core.tools import control
from core.tools.base import Toolbox
from core.vocabulary.entries import AssistantTurn, ToolCall, ToolResultEntry
from core.vocabulary.errors import ToolError
from core.vocabulary.run_events import ProgressNote
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolCallRecord, ToolState
from core.workflows.model import Workflow


def admit_turn(
    turn: AssistantTurn,
    turn_seq: int,
    snap: ConversationSnapshot,
    workflow: Workflow,
    toolbox: Toolbox,
    tool_policy: policy.ToolPolicy,
    *,
    expert: bool,
) -> tuple[tuple[ToolCallRecord, ...], tuple[ToolResultEntry, ...]]:
    """Records for ``turn``'s calls (``turn_seq``: its journal ``seq``) and the denials' results.

    ``expert``: an expert may be consulted here, so ``ask_expert`` is offered
    (:attr:`core.run.settings.EngineSettings.consults_expert`)."""
    position = workflow.state(snap.position)
    tools = control.offered(toolbox.select(position.allowed_tools), expert=expert)
    offered = {t.spec.name for t in tools}
    admitted: list[Moved] = []
    for index, call in enumerate(turn.tool_calls):
        state, reason = _first_state(
            call, toolbox, tool_policy, offered, snap.position, position.changes, expert
        )
        read_only = toolbox.read_only(call.name)
        if state is ToolState.FAILED:  # no such tool: admitted, and failed at once
            approved = admit(
                call, read_only=read_only, state=ToolState.APPROVED, turn_seq=turn_seq, index=index
            )
            assert approved.record is not None
            admitted.append(move(approved.record, ToolState.FAILED, result=reason))
            continue
        admitted.append(
            admit(
                call,
                read_only=read_only,
                state=state,
                turn_seq=turn_seq,
                index=index,
                result=reason if state is ToolState.DENIED else None,
            )
        )
    results, records = parts(admitted)
    return records, results


def denial_notes(
    turn: AssistantTurn, denials: Sequence[ToolResultEntry]
) -> tuple[ProgressNote, ...]:
    """A progress note per call refused or failed at once (the policy, a tool not offered,
    a tool that does not exist)."""
    calls = {call.id: call for call in turn.tool_calls}
    return tuple(
        ProgressNote(text=f"{summarize_call(call.name, call.input)} was not run: {denial.content}")
        for denial in denials
        if (call := calls.get(denial.tool_use_id)) is not None
    )


def _first_state(
    call: ToolCall,
    toolbox: Toolbox,
    tool_policy: policy.ToolPolicy,
    offered: set[str],
    position: str,
    mutating: bool,
    expert: bool,
) -> tuple[ToolState, str]:
    tool = toolbox.get(call.name)
    if tool is None:
        tools = ", ".join(sorted(offered))
        return ToolState.FAILED, f"There is no tool {call.name}. The tools here are: {tools}."
    if call.name not in offered:
        why = control.not_offered(call.name, expert=expert)
        return (
            ToolState.DENIED,
            why or f"The tool {call.name} is not available at the {position} step.",
        )
    if tool.spec.kind is ToolKind.CONTROL:
        try:
            control.parse(call.name, call.input)
        except ToolError as exc:
            return ToolState.DENIED, str(exc)
    verdict = tool_policy.check(
        tool_name=call.name,
        read_only=toolbox.read_only(call.name),
        arguments=call.input,
        plan_approved=mutating,
    )
    if verdict.decision is policy.Permission.DENY:
        return ToolState.DENIED, f"Denied by policy: {verdict.reason}"
    if verdict.decision is policy.Permission.ASK:
        return ToolState.PENDING_APPROVAL, verdict.reason
    return ToolState.APPROVED, ""
