"""Running the tool calls of a model turn, with a durable record per call.

When a turn is committed, each call gets a :class:`core.journal.ToolCallRecord`
whose state the tool policy decides: ``approved``, ``denied`` (with its error
result in the same commit) or ``pending_approval``. :meth:`ToolRunner.continue_turn`
then drives the turn to its end from whatever the store holds, so a fresh turn,
a turn resumed after a crash and a turn resumed after a person's decision take
the same path (DESIGN.md, "Durability and exactly-once"):

- a call with a result is never run again;
- ``approved`` calls run; consecutive read-only ones run concurrently; the policy
  is checked again just before each one runs, and a ``deny`` now (new settings, a
  restart with other rules) ends it ``denied`` with the reason as its result;
- a call found ``running`` (the process died while it ran) is run again if it is
  read-only, and becomes ``unknown`` if it mutates: the model is told to check;
- ``pending_approval`` calls share one tool approval request; the allowed calls
  of the turn run while they wait, and the run ends ``waiting(tool_approval)`` if
  they are still undecided then;
- the control calls ``propose_plan``, ``ask_user`` and ``finish`` come last.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from core import lifecycle, policy
from core.control_changes import control_change, request_times
from core.errors import LeaseLost, RequestConflict, ToolError
from core.faults import NO_FAULTS, Faults
from core.journal import (
    AssistantTurn,
    Change,
    CommandProcess,
    ConversationSnapshot,
    Journal,
    PendingRequest,
    RequestKind,
    RequestState,
    ToolCall,
    ToolCallRecord,
    ToolResultEntry,
    ToolState,
)
from core.lifecycle import WaitKind
from core.run_events import GatedCall, ProgressNote, RunStats, ToolApprovalRequested
from core.tools.base import Toolbox, ToolContext, ToolOutput
from core.tools.control import CONTROL_TOOLS, FINISH, REPORT_PROGRESS, WAITING_CONTROL
from core.tools.processes import kill_left_behind
from core.workflow import Workflow

if TYPE_CHECKING:
    from core.engine import EngineSettings

log = logging.getLogger(__name__)


class TurnOutcome(StrEnum):
    """After a turn's tools: call the model again, wait for a person, or the run is done.

    ``SUSPENDED``: the process is shutting down; the run ends here and goes on from
    the store at the next start (the conversation stays ``running``).
    """

    CONTINUE = "continue"
    WAIT = "wait"
    DONE = "done"
    SUSPENDED = "suspended"


@dataclass(frozen=True)
class Closing:
    """Results and records that close every open call, with counts for the stop message."""

    results: tuple[ToolResultEntry, ...]
    records: tuple[ToolCallRecord, ...]
    cancelled: int
    interrupted: int


class ToolRunner:
    """Executes turns' tool calls against the journal (used by the engine)."""

    def __init__(
        self,
        *,
        journal: Journal,
        toolbox: Toolbox,
        settings: EngineSettings,
        tool_policy: policy.ToolPolicy,
        faults: Faults = NO_FAULTS,
        suspended: Callable[[], bool] = lambda: False,
    ) -> None:
        """``suspended()`` True means: start no new tool call (the process is stopping)."""
        self._journal = journal
        self._toolbox = toolbox
        self._settings = settings
        self._policy = tool_policy
        self._faults = faults
        self._suspended = suspended

    # --- a new turn --------------------------------------------------------------

    def admit(
        self, turn: AssistantTurn, turn_seq: int, snap: ConversationSnapshot, workflow: Workflow
    ) -> tuple[tuple[ToolCallRecord, ...], tuple[ToolResultEntry, ...]]:
        """Records for ``turn``'s calls as the policy decides them, and the denials' results."""
        position = workflow.position(snap.position)
        offered = {t.spec.name for t in self._toolbox.select(position.tools)}
        records: list[ToolCallRecord] = []
        denials: list[ToolResultEntry] = []
        for index, call in enumerate(turn.tool_calls):
            state, reason = self._admit_call(call, offered, snap.position, position.mutating)
            records.append(
                ToolCallRecord(
                    tool_use_id=call.id,
                    name=call.name,
                    input=call.input,
                    read_only=self._read_only(call.name),
                    state=state,
                    turn_seq=turn_seq,
                    index=index,
                )
            )
            if state is ToolState.DENIED:
                denials.append(ToolResultEntry(tool_use_id=call.id, content=reason, is_error=True))
        return tuple(records), tuple(denials)

    def _admit_call(
        self, call: ToolCall, offered: set[str], position: str, mutating: bool
    ) -> tuple[ToolState, str]:
        tool = self._toolbox.get(call.name)
        if tool is None or call.name not in offered:
            return (
                ToolState.DENIED,
                f"The tool {call.name} is not available at the {position} step.",
            )
        verdict = self._policy.check(
            tool_name=call.name,
            read_only=tool.read_only,
            arguments=call.input,
            plan_approved=mutating,
        )
        if verdict.decision is policy.Decision.DENY:
            return ToolState.DENIED, f"Denied by policy: {verdict.reason}"
        if verdict.decision is policy.Decision.ASK:
            return ToolState.PENDING_APPROVAL, verdict.reason
        return ToolState.APPROVED, ""

    # --- driving a turn to its end ---------------------------------------------

    async def continue_turn(
        self,
        conversation_id: str,
        *,
        workflow: Workflow,
        stats: Callable[[str], Awaitable[RunStats]],
    ) -> TurnOutcome:
        """Run what the last turn still needs; see the module docstring for the order."""
        while True:
            snap = await self._journal.load(conversation_id)
            open_calls = _open_calls(snap)
            if not open_calls:
                return TurnOutcome.CONTINUE
            records = [snap.tool_calls[c.id] for c in open_calls if c.id in snap.tool_calls]
            gated = [r for r in records if r.state is ToolState.PENDING_APPROVAL]
            if gated and not _approval_open(snap, gated):
                await self._open_approval(conversation_id, snap, gated)
                continue
            runnable = [r for r in records if _runnable(r)]
            if runnable:
                if self._suspended():
                    return TurnOutcome.SUSPENDED
                mutating = workflow.position(snap.position).mutating
                await self._run_batch(conversation_id, snap, runnable, plan_approved=mutating)
                continue
            if gated:
                if await self._wait_for_approval(conversation_id, gated):
                    return TurnOutcome.WAIT
                continue  # a decision landed between our look and our commit
            control = next((r for r in records if r.name in WAITING_CONTROL), None)
            if control is None:
                await self._close_strays(conversation_id, records)
                return TurnOutcome.CONTINUE
            return await self._control(conversation_id, snap, control, workflow, stats)

    async def _run_batch(
        self,
        conversation_id: str,
        snap: ConversationSnapshot,
        runnable: Sequence[ToolCallRecord],
        *,
        plan_approved: bool,
    ) -> None:
        await self._kill_left_behind(runnable)
        first = runnable[0]
        if first.state is ToolState.RUNNING and not first.read_only:
            content = (
                "This call was running when the bot stopped unexpectedly; its outcome is "
                "unknown. Check the state of the workspace before retrying it."
            )
            output = ToolOutput(
                content=content, note=f"{first.name}: outcome unknown", is_error=True
            )
            await self._finish_call(conversation_id, first, output, state=ToolState.UNKNOWN)
            return
        batch = [first]
        if first.read_only:
            for record in runnable[1:]:
                if not record.read_only:
                    break
                batch.append(record)
        calls = [
            asyncio.ensure_future(self._run_call(conversation_id, snap, r, plan_approved))
            for r in batch
        ]
        try:
            await asyncio.gather(*calls)
        except BaseException:  # a refused commit or a stop: no call outlives its batch
            for call in calls:
                call.cancel()
            await asyncio.gather(*calls, return_exceptions=True)
            raise

    async def _kill_left_behind(self, records: Sequence[ToolCallRecord]) -> None:
        """Kill command groups that calls found ``running`` left behind (a crash).

        Before such a call is re-run or told ``unknown``, a group still running from
        the earlier process must go, or it would go on changing the workspace. A
        group of another boot or host, or whose id was reused, is left alone
        (:func:`core.tools.processes.kill_left_behind`).
        """
        for record in records:
            if record.state is ToolState.RUNNING and record.process is not None:
                await asyncio.to_thread(kill_left_behind, record.process)

    async def _run_call(
        self,
        conversation_id: str,
        snap: ConversationSnapshot,
        record: ToolCallRecord,
        plan_approved: bool,
    ) -> None:
        tool = self._toolbox.get(record.name)
        assert tool is not None  # admitted calls name known tools
        if await self._denied_now(conversation_id, record, plan_approved):
            return
        running = record.model_copy(update={"state": ToolState.RUNNING})
        await self._journal.commit(conversation_id, Change(tool_calls=(running,)))
        workspace = Path(snap.workspace)
        await asyncio.to_thread(workspace.mkdir, parents=True, exist_ok=True)

        async def started(process: CommandProcess) -> None:
            with_process = running.model_copy(update={"process": process})
            await self._journal.commit(conversation_id, Change(tool_calls=(with_process,)))

        ctx = ToolContext(
            workspace=workspace,
            command_timeout=self._settings.command_timeout,
            output_limit=self._settings.output_limit,
            started=started,
        )
        try:
            output = await tool.run(record.input, ctx)
        except LeaseLost:
            raise
        except ToolError as exc:
            lines = str(exc).strip().splitlines()
            note = f"{record.name} failed: {lines[0][:200] if lines else 'no reason given'}"
            output = ToolOutput(content=str(exc), note=note, is_error=True)
        except Exception as exc:  # a tool's bug must not take the run down
            log.exception("tool %s crashed", record.name)
            output = ToolOutput(
                content=f"The tool crashed: {exc!r}", note=f"{record.name} crashed", is_error=True
            )
        step = record.input.get("step") if record.name == REPORT_PROGRESS else None
        await self._finish_call(
            conversation_id, record, output, step=step if isinstance(step, str) else None
        )
        self._faults.hit("after_tool_result")

    async def _denied_now(
        self, conversation_id: str, record: ToolCallRecord, plan_approved: bool
    ) -> bool:
        """Check the policy again as the call is about to run; a ``deny`` ends it ``denied``.

        The policy may have changed since the call was admitted or approved (new
        settings, a restart with other rules). Only ``deny`` stops it here: an
        ``ask`` was answered already (a person approved the call, or the policy
        allowed it when the turn came), and asking again would reopen a decided
        request. The model reads the reason in the call's result.
        """
        verdict = self._policy.check(
            tool_name=record.name,
            read_only=record.read_only,
            arguments=record.input,
            plan_approved=plan_approved,
        )
        if verdict.decision is not policy.Decision.DENY:
            return False
        log.info("%s: %s denied before it ran (%s)", conversation_id, record.name, verdict.rule)
        summary = policy.summarize_call(record.name, record.input)
        output = ToolOutput(
            content=f"Denied by policy before it ran: {verdict.reason}",
            note=f"{summary} was not run: {verdict.reason}",
            is_error=True,
        )
        await self._finish_call(conversation_id, record, output, state=ToolState.DENIED)
        return True

    async def _finish_call(
        self,
        conversation_id: str,
        record: ToolCallRecord,
        output: ToolOutput,
        *,
        step: str | None = None,
        state: ToolState | None = None,
    ) -> None:
        final = state or (ToolState.FAILED if output.is_error else ToolState.DONE)
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
                tool_calls=(record.model_copy(update={"state": final}),),
                events=(ProgressNote(text=output.note, step=step),) if output.note else (),
            ),
        )

    async def _open_approval(
        self, conversation_id: str, snap: ConversationSnapshot, gated: Sequence[ToolCallRecord]
    ) -> None:
        request_id = uuid.uuid4().hex[:12]
        expires_at, remind_at = request_times(self._settings)
        calls = tuple(
            GatedCall(
                number=number,
                tool=r.name,
                summary=policy.summarize_call(r.name, r.input),
                reason=self._policy.check(
                    tool_name=r.name, read_only=r.read_only, arguments=r.input, plan_approved=True
                ).reason,
            )
            for number, r in enumerate(gated, start=1)
        )
        await self._journal.commit(
            conversation_id,
            Change(
                open_request=PendingRequest(
                    id=request_id,
                    kind=RequestKind.TOOL_APPROVAL,
                    tool_use_ids=tuple(r.tool_use_id for r in gated),
                    prompt="\n".join(c.summary for c in calls),
                    expires_at=expires_at,
                    remind_at=remind_at,
                ),
                events=(ToolApprovalRequested(request_id=request_id, calls=calls),),
            ),
        )

    async def _wait_for_approval(
        self, conversation_id: str, gated: Sequence[ToolCallRecord]
    ) -> bool:
        """Commit ``waiting(tool_approval)`` if ``gated`` are all still undecided."""
        try:
            await self._journal.commit(
                conversation_id,
                Change(
                    status=lifecycle.waiting(WaitKind.TOOL_APPROVAL),
                    guard_pending=tuple(r.tool_use_id for r in gated),
                ),
            )
        except RequestConflict:
            return False
        return True

    async def _close_strays(self, conversation_id: str, records: Sequence[ToolCallRecord]) -> None:
        """Give a result to open calls no rule runs (never expected; keeps requests valid)."""
        for record in records:
            output = ToolOutput(content="This call was not run.", note="", is_error=True)
            await self._finish_call(conversation_id, record, output, state=ToolState.CANCELLED)

    async def _control(
        self,
        conversation_id: str,
        snap: ConversationSnapshot,
        record: ToolCallRecord,
        workflow: Workflow,
        stats: Callable[[str], Awaitable[RunStats]],
    ) -> TurnOutcome:
        if any(r.tool_use_id == record.tool_use_id for r in snap.open_requests):
            return TurnOutcome.WAIT
        finish = await stats(conversation_id) if record.name == FINISH else None
        try:
            change = control_change(snap, record, workflow, finish, self._settings)
        except ToolError as exc:
            await self._finish_call(
                conversation_id, record, ToolOutput(content=str(exc), note="", is_error=True)
            )
            return TurnOutcome.CONTINUE
        await self._journal.commit(conversation_id, change)
        return TurnOutcome.DONE if record.name == FINISH else TurnOutcome.WAIT

    # --- closing ---------------------------------------------------------------

    def close_open_calls(
        self, snap: ConversationSnapshot, by_name: str, *, failed: bool = False
    ) -> Closing:
        """One result and a final record for every call of the journal that has no result."""
        results: list[ToolResultEntry] = []
        records: list[ToolCallRecord] = []
        cancelled = interrupted = 0
        for call, record in _all_open(snap, self._read_only):
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

    def interrupt_running(self, snap: ConversationSnapshot, reason: str) -> Closing:
        """An ``interrupted`` result and record for every call that was running.

        For a process that stops while a command runs (``reason`` says why): the
        conversation stays ``running``, and the next start goes on with the model
        reading these results. Calls not yet started are left to run then.
        """
        results: list[ToolResultEntry] = []
        records: list[ToolCallRecord] = []
        for call, record in _all_open(snap, self._read_only):
            if record.state is not ToolState.RUNNING or call.name in CONTROL_TOOLS:
                continue
            text = (
                f"Interrupted while it ran: {reason}. Its effects may be partial; check "
                "the workspace before retrying it."
            )
            results.append(ToolResultEntry(tool_use_id=call.id, content=text, is_error=True))
            records.append(record.model_copy(update={"state": ToolState.INTERRUPTED}))
        return Closing(tuple(results), tuple(records), 0, len(records))

    def _read_only(self, name: str) -> bool:
        tool = self._toolbox.get(name)
        return tool.read_only if tool else True


def _answered(snap: ConversationSnapshot) -> set[str]:
    return {r.entry.tool_use_id for r in snap.journal if isinstance(r.entry, ToolResultEntry)}


def _open_calls(snap: ConversationSnapshot) -> list[ToolCall]:
    """Calls of the last assistant turn that have no result yet, in order."""
    last = next(
        (r.entry for r in reversed(snap.journal) if isinstance(r.entry, AssistantTurn)), None
    )
    if last is None:
        return []
    answered = _answered(snap)
    return [c for c in last.tool_calls if c.id not in answered]


def _all_open(
    snap: ConversationSnapshot, read_only: Callable[[str], bool]
) -> list[tuple[ToolCall, ToolCallRecord]]:
    answered = _answered(snap)
    found: list[tuple[ToolCall, ToolCallRecord]] = []
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
                read_only=read_only(call.name),
                state=ToolState.APPROVED,
                turn_seq=rec.seq,
                index=index,
            )
            found.append((call, record))
    return found


def _runnable(record: ToolCallRecord) -> bool:
    if record.name in WAITING_CONTROL:
        return False
    return record.state in (ToolState.APPROVED, ToolState.RUNNING)


def _approval_open(snap: ConversationSnapshot, gated: Sequence[ToolCallRecord]) -> bool:
    ids = {r.tool_use_id for r in gated}
    return any(
        r.kind is RequestKind.TOOL_APPROVAL
        and r.state is RequestState.OPEN
        and ids & set(r.tool_use_ids)
        for r in snap.requests
    )
