"""Running the tool calls of one model turn, with a durable record per call.

Each call gets a :class:`core.journal.ToolCallRecord` in the same commit as the
assistant turn that asked for it (state ``approved``); a workspace call is marked
``running`` before it starts and ``done`` / ``failed`` with its result in one
commit after. Control calls (``propose_plan``, ``ask_user``, ``finish``,
``report_progress``) change the conversation instead of the workspace.

A stopped run leaves calls without results; :meth:`ToolRunner.close_open_calls`
gives each exactly one (``interrupted`` if it was running, ``cancelled`` if it
never started) so that the next model request is valid.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from core import lifecycle
from core.errors import ToolError
from core.journal import (
    AssistantTurn,
    Change,
    ConversationSnapshot,
    Journal,
    PendingRequest,
    RequestKind,
    RequestResolution,
    RequestState,
    ToolCall,
    ToolCallRecord,
    ToolResultEntry,
    ToolState,
)
from core.lifecycle import WaitKind
from core.run_events import Answered, PlanProposed, ProgressNote, QuestionAsked, RunStats
from core.tools.base import Toolbox, ToolContext, ToolOutput
from core.tools.control import (
    ASK_USER,
    CONTROL_TOOLS,
    FINISH,
    PROPOSE_PLAN,
    REPORT_PROGRESS,
    plan_steps,
)
from core.workflow import Transition, Workflow

if TYPE_CHECKING:
    from core.engine import EngineSettings

log = logging.getLogger(__name__)


class TurnOutcome(StrEnum):
    """After a turn's tools: call the model again, wait for a person, or the run is done."""

    CONTINUE = "continue"
    WAIT = "wait"
    DONE = "done"


@dataclass(frozen=True)
class Closing:
    """Results and records that close every open call, with counts for the stop message."""

    results: tuple[ToolResultEntry, ...]
    records: tuple[ToolCallRecord, ...]
    cancelled: int
    interrupted: int


_WAITING_CONTROL = (PROPOSE_PLAN, ASK_USER, FINISH)


class ToolRunner:
    """Executes one turn's tool calls against the journal (used by the engine)."""

    def __init__(self, *, journal: Journal, toolbox: Toolbox, settings: EngineSettings) -> None:
        self._journal = journal
        self._toolbox = toolbox
        self._settings = settings

    def records_for(self, turn: AssistantTurn, turn_seq: int) -> tuple[ToolCallRecord, ...]:
        """A fresh ``approved`` record for each call of ``turn``."""
        return tuple(
            ToolCallRecord(
                tool_use_id=call.id,
                name=call.name,
                input=call.input,
                read_only=self._read_only(call.name),
                state=ToolState.APPROVED,
                turn_seq=turn_seq,
                index=index,
            )
            for index, call in enumerate(turn.tool_calls)
        )

    async def run_turn(
        self,
        conversation_id: str,
        *,
        snap: ConversationSnapshot,
        turn: AssistantTurn,
        turn_seq: int,
        workflow: Workflow,
        stats: Callable[[str], Awaitable[RunStats]],
    ) -> TurnOutcome:
        """Run ``turn``'s calls in order; the first waiting control call ends the turn."""
        offered = {
            t.spec.name for t in self._toolbox.select(workflow.position(snap.position).tools)
        }
        records = {r.tool_use_id: r for r in self.records_for(turn, turn_seq)}
        waiting = [c for c in turn.tool_calls if c.name in _WAITING_CONTROL]
        for call in turn.tool_calls:
            if call.name in _WAITING_CONTROL and call is not waiting[0]:
                await self._finish_call(
                    conversation_id,
                    records[call.id],
                    ToolOutput(
                        content=f"Ignored: {waiting[0].name} was called in the same turn.",
                        note="",
                        is_error=True,
                    ),
                )
            elif call.name not in _WAITING_CONTROL:
                await self._run_call(conversation_id, snap, call, records[call.id], offered)
        if not waiting:
            return TurnOutcome.CONTINUE
        call = waiting[0]
        if call.name not in offered:
            await self._finish_call(conversation_id, records[call.id], _not_offered(call, snap))
            return TurnOutcome.CONTINUE
        finish = await stats(conversation_id) if call.name == FINISH else None
        return await self._control(conversation_id, snap, call, records[call.id], workflow, finish)

    async def _run_call(
        self,
        conversation_id: str,
        snap: ConversationSnapshot,
        call: ToolCall,
        record: ToolCallRecord,
        offered: set[str],
    ) -> None:
        tool = self._toolbox.get(call.name)
        if tool is None or call.name not in offered:
            await self._finish_call(conversation_id, record, _not_offered(call, snap))
            return
        await self._journal.commit(
            conversation_id,
            Change(tool_calls=(record.model_copy(update={"state": ToolState.RUNNING}),)),
        )
        workspace = Path(snap.workspace)
        await asyncio.to_thread(workspace.mkdir, parents=True, exist_ok=True)
        ctx = ToolContext(
            workspace=workspace,
            command_timeout=self._settings.command_timeout,
            output_limit=self._settings.output_limit,
        )
        try:
            output = await tool.run(call.input, ctx)
        except ToolError as exc:
            output = ToolOutput(content=str(exc), note=f"{call.name} failed: {exc}", is_error=True)
        except Exception as exc:  # a tool's bug must not take the run down
            log.exception("tool %s crashed", call.name)
            output = ToolOutput(
                content=f"The tool crashed: {exc!r}", note=f"{call.name} crashed", is_error=True
            )
        step = call.input.get("step") if call.name == REPORT_PROGRESS else None
        await self._finish_call(
            conversation_id, record, output, step=step if isinstance(step, str) else None
        )

    async def _finish_call(
        self,
        conversation_id: str,
        record: ToolCallRecord,
        output: ToolOutput,
        *,
        step: str | None = None,
    ) -> None:
        state = ToolState.FAILED if output.is_error else ToolState.DONE
        await self._journal.commit(
            conversation_id,
            Change(
                entries=(
                    ToolResultEntry(
                        tool_use_id=record.tool_use_id,
                        content=output.content,
                        is_error=output.is_error,
                    ),
                ),
                tool_calls=(record.model_copy(update={"state": state}),),
                events=(ProgressNote(text=output.note, step=step),) if output.note else (),
            ),
        )

    async def _control(
        self,
        conversation_id: str,
        snap: ConversationSnapshot,
        call: ToolCall,
        record: ToolCallRecord,
        workflow: Workflow,
        finish: RunStats | None,
    ) -> TurnOutcome:
        try:
            change = _control_change(snap, call, record, workflow, finish)
        except ToolError as exc:
            output = ToolOutput(content=str(exc), note="", is_error=True)
            await self._finish_call(conversation_id, record, output)
            return TurnOutcome.CONTINUE
        await self._journal.commit(conversation_id, change)
        return TurnOutcome.DONE if call.name == FINISH else TurnOutcome.WAIT

    def close_open_calls(
        self, snap: ConversationSnapshot, by_name: str, *, failed: bool = False
    ) -> Closing:
        """One result and a final record for every call of the journal that has no result."""
        answered = {
            r.entry.tool_use_id for r in snap.journal if isinstance(r.entry, ToolResultEntry)
        }
        results: list[ToolResultEntry] = []
        records: list[ToolCallRecord] = []
        cancelled = interrupted = 0
        for rec in snap.journal:
            if not isinstance(rec.entry, AssistantTurn):
                continue
            for index, call in enumerate(rec.entry.tool_calls):
                if call.id in answered:
                    continue
                record = snap.tool_calls.get(call.id) or ToolCallRecord(
                    tool_use_id=call.id,
                    name=call.name,
                    input=call.input,
                    read_only=self._read_only(call.name),
                    state=ToolState.APPROVED,
                    turn_seq=rec.seq,
                    index=index,
                )
                was_running = record.state is ToolState.RUNNING and call.name not in CONTROL_TOOLS
                state = ToolState.INTERRUPTED if was_running else ToolState.CANCELLED
                if failed:
                    state = ToolState.FAILED
                    text = f"Not run: the run ended with {by_name}."
                elif was_running:
                    text = f"Stopped by {by_name} while it ran; its effects may be partial."
                else:
                    text = f"Stopped by {by_name} before it ran."
                if call.name not in CONTROL_TOOLS:
                    interrupted += was_running
                    cancelled += not was_running
                results.append(ToolResultEntry(tool_use_id=call.id, content=text, is_error=True))
                records.append(record.model_copy(update={"state": state}))
        return Closing(tuple(results), tuple(records), cancelled, interrupted)

    def complete_control(
        self, snap: ConversationSnapshot, tool_use_id: str | None
    ) -> tuple[ToolCallRecord, ...]:
        """The ``done`` record of a control call whose result a person just gave."""
        record = snap.tool_calls.get(tool_use_id) if tool_use_id else None
        return (record.model_copy(update={"state": ToolState.DONE}),) if record else ()

    def _read_only(self, name: str) -> bool:
        tool = self._toolbox.get(name)
        return tool.read_only if tool else True


def _not_offered(call: ToolCall, snap: ConversationSnapshot) -> ToolOutput:
    return ToolOutput(
        content=f"The tool {call.name} is not available at the {snap.position} step.",
        note="",
        is_error=True,
    )


def _control_change(
    snap: ConversationSnapshot,
    call: ToolCall,
    record: ToolCallRecord,
    workflow: Workflow,
    finish: RunStats | None,
) -> Change:
    """The change a waiting control call makes; raises :class:`ToolError` on bad input."""
    if call.name == FINISH:
        answer = call.input.get("answer")
        if not isinstance(answer, str) or not answer.strip():
            raise ToolError("`answer` must be a non-empty string")
        return Change(
            entries=(ToolResultEntry(tool_use_id=call.id, content="The answer is in the thread."),),
            tool_calls=(record.model_copy(update={"state": ToolState.DONE}),),
            status=lifecycle.DONE,
            position=workflow.next(snap.position, Transition.FINISHED),
            events=(Answered(text=answer.strip(), stats=finish or RunStats()),),
        )
    request_id = uuid.uuid4().hex[:12]
    if call.name == PROPOSE_PLAN:
        steps, tools = plan_steps(call.input)
        version = snap.plan_version + 1
        older = tuple(
            RequestResolution(
                request_id=r.id,
                state=RequestState.SUPERSEDED,
                decision=r.decision,
                by=r.decided_by,
                only_if_open=False,
            )
            for r in snap.requests
            if r.kind is RequestKind.PLAN_APPROVAL and r.state is not RequestState.SUPERSEDED
        )
        return Change(
            resolve=older,
            tool_calls=(record.model_copy(update={"state": ToolState.PENDING_APPROVAL}),),
            open_request=PendingRequest(
                id=request_id,
                kind=RequestKind.PLAN_APPROVAL,
                tool_use_id=call.id,
                plan_version=version,
                prompt="\n".join(steps),
            ),
            status=lifecycle.waiting(WaitKind.PLAN_APPROVAL),
            position=workflow.next(snap.position, Transition.PLAN_PROPOSED),
            plan_version=version,
            events=(
                PlanProposed(
                    request_id=request_id, version=version, steps=tuple(steps), tools=tuple(tools)
                ),
            ),
        )
    question = call.input.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ToolError("`question` must be a non-empty string")
    raw_options = call.input.get("options") or []
    options = tuple(str(o) for o in raw_options) if isinstance(raw_options, list) else ()
    return Change(
        tool_calls=(record.model_copy(update={"state": ToolState.RUNNING}),),
        open_request=PendingRequest(
            id=request_id, kind=RequestKind.QUESTION, tool_use_id=call.id, prompt=question.strip()
        ),
        status=lifecycle.waiting(WaitKind.QUESTION),
        events=(QuestionAsked(request_id=request_id, question=question.strip(), options=options),),
    )
