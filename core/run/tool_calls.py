"""Running the tool calls of a model turn, with a durable record per call.

When a turn is committed, each call gets a :class:`core.vocabulary.tool_records.ToolCallRecord`
whose state the tool policy decides (:mod:`core.run.admission`).
:meth:`ToolRunner.continue_turn` then drives the turn to its end from whatever the
store holds, so a fresh turn, a turn resumed after a crash and a turn resumed
after a person's decision take the same path (docs/architecture.md, "Durability and
exactly-once"):

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

Every state change is a :func:`core.tool_state.move`, committed with its result.
Every result and progress note is committed through :meth:`ToolRunner._finish_call`,
which redacts the bot's secrets from it first (:mod:`core.secrets`): the journal,
the tool records, the model's next request and the thread never hold a token.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from enum import StrEnum
from pathlib import Path

from core import tracing
from core.faults import NO_FAULTS, Faults
from core.outputs import OutputCache
from core.policy import policy
from core.policy.summary import summarize_call
from core.requests import tool_approval
from core.requests.common import Opening
from core.run.control import control_change
from core.run.settings import RunSettings
from core.run.stats import RequestTotals, request_stats
from core.secrets import NO_SECRETS, Redactor
from core.tool_state import move, open_calls, started
from core.tools.base import Toolbox, ToolContext, ToolOutput
from core.tools.control import FINISH, REPORT_PROGRESS, WAITING_CONTROL
from core.tools.processes import kill_left_behind
from core.tools.workspaces import GitWorkspaces, Workspaces
from core.vocabulary.errors import LeaseLost, RequestConflict, ToolError
from core.vocabulary.journal import Change, Journal
from core.vocabulary.requests import control_call
from core.vocabulary.run_events import ProgressNote, RunStats
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import CommandProcess, ToolCallRecord, ToolState
from core.workflow import Workflow

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


class ToolRunner:
    """Executes turns' tool calls against the journal (used by the engine).

    ``opening`` gives new requests their ids and times; ``suspended()`` True
    means: start no new tool call (the process is stopping). ``redactor`` takes the
    bot's secrets out of every result and note before it is committed, and is handed
    to the tools (``ToolContext.redactor``) for output they stream.
    """

    def __init__(
        self,
        *,
        journal: Journal,
        toolbox: Toolbox,
        settings: RunSettings,
        opening: Opening,
        faults: Faults = NO_FAULTS,
        suspended: Callable[[], bool] = lambda: False,
        redactor: Redactor = NO_SECRETS,
        workspaces: Workspaces | None = None,
        outputs: OutputCache | None = None,
    ) -> None:
        self._journal = journal
        self._toolbox = toolbox
        self._settings = settings
        self._opening = opening
        self._faults = faults
        self._suspended = suspended
        self._workspaces: Workspaces = workspaces or GitWorkspaces()
        self._redactor = redactor
        self._outputs = outputs
        self.totals: dict[str, RequestTotals] = {}
        """Each conversation's request totals while a run is at it (the notes' status
        line); the run loop drops them when the run ends."""

    def _outputs_of(self, conversation_id: str) -> Callable[[str], Awaitable[str | None]] | None:
        """The conversation's stored outputs by id, for ``read_output`` (None: no cache)."""
        cache = self._outputs
        if cache is None:
            return None
        return lambda output_id: cache.retrieve(conversation_id, output_id)

    def read_only(self, name: str) -> bool:
        """Whether the tool ``name`` is read-only (an unknown tool counts as read-only)."""
        tool = self._toolbox.get(name)
        return tool.read_only if tool else True

    async def continue_turn(self, conversation_id: str, *, workflow: Workflow) -> TurnOutcome:
        """Run what the last turn still needs; see the module docstring for the order."""
        while True:
            snap = await self._journal.load(conversation_id)
            open_ = open_calls(snap)
            if not open_:
                return TurnOutcome.CONTINUE
            records = [snap.tool_calls[c.id] for c in open_ if c.id in snap.tool_calls]
            gated = [r for r in records if r.state is ToolState.PENDING_APPROVAL]
            if gated and not tool_approval.is_open_for(snap, gated):
                change = tool_approval.open_approval(
                    gated, self._settings.get().tool_policy, self._opening
                )
                await self._journal.commit(conversation_id, change)
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
            return await self._control(conversation_id, snap, control, workflow)

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
            asyncio.ensure_future(
                tracing.traced_call(r, self._run_call, conversation_id, snap, r, plan_approved)
            )
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

    async def with_changes(
        self, conversation_id: str, snap: ConversationSnapshot, stats: RunStats
    ) -> RunStats:
        """``stats`` with the branch and changed files of the conversation's clone, if any."""
        repo = self._settings.get().git_repo
        try:
            changes = await self._workspaces.changes(conversation_id, Path(snap.workspace), repo)
        except ToolError as exc:
            log.warning("%s: cannot tell what changed in the workspace: %s", conversation_id, exc)
            return stats
        if changes is None:
            return stats
        return stats.model_copy(update={"branch": changes.branch, "changed_files": changes.files})

    async def _run_call(
        self,
        conversation_id: str,
        snap: ConversationSnapshot,
        record: ToolCallRecord,
        plan_approved: bool,
    ) -> None:
        tool = self._toolbox.get(record.name)
        assert tool is not None  # admitted calls name known tools
        settings = self._settings.get()
        verdict = await self._checked_now(conversation_id, record, plan_approved)
        if verdict is None:
            return
        running = move(record, ToolState.RUNNING).records
        await self._journal.commit(conversation_id, Change(tool_calls=running))
        workspace = Path(snap.workspace)
        try:
            await self._workspaces.prepare(conversation_id, workspace, settings.git_repo)
        except ToolError as exc:  # the clone failed: the call fails, the model is told
            output = ToolOutput(
                content=str(exc), note=f"{record.name} failed: {exc}", is_error=True
            )
            await self._finish_call(conversation_id, running[0], output)
            return

        async def on_start(process: CommandProcess) -> None:
            with_process = started(running[0], process)
            await self._journal.commit(conversation_id, Change(tool_calls=(with_process,)))

        ctx = ToolContext(
            workspace=workspace,
            command_timeout=settings.command_timeout,
            command_cpu_seconds=settings.command_cpu_seconds,
            command_memory_mb=settings.command_memory_mb,
            output_limit=settings.output_store_limit if self._outputs else settings.output_limit,
            read_limit=settings.output_limit,
            network=verdict.network,
            started=on_start,
            outputs=self._outputs_of(conversation_id),
            redactor=self._redactor,
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
            conversation_id, running[0], output, step=step if isinstance(step, str) else None
        )
        self._faults.hit("after_tool_result")

    async def _checked_now(
        self, conversation_id: str, record: ToolCallRecord, plan_approved: bool
    ) -> policy.Ruling | None:
        """Check the policy again as the call is about to run; a ``deny`` ends it ``denied``
        (None), else the verdict (its network grant goes with the call).

        The policy may have changed since the call was admitted or approved (new
        settings, a restart with other rules). Only ``deny`` stops it here: an
        ``ask`` was answered already (a person approved the call, or the policy
        allowed it when the turn came), and asking again would reopen a decided
        request. The model reads the reason in the call's result.
        """
        verdict = self._settings.get().tool_policy.check(
            tool_name=record.name,
            read_only=record.read_only,
            arguments=record.input,
            plan_approved=plan_approved,
        )
        if verdict.decision is not policy.Permission.DENY:
            return verdict
        log.info("%s: %s denied before it ran (%s)", conversation_id, record.name, verdict.rule)
        summary = summarize_call(record.name, record.input)
        output = ToolOutput(
            content=f"Denied by policy before it ran: {verdict.reason}",
            note=f"{summary} was not run: {verdict.reason}",
            is_error=True,
        )
        await self._finish_call(conversation_id, record, output, state=ToolState.DENIED)
        return None

    async def _finish_call(
        self,
        conversation_id: str,
        record: ToolCallRecord,
        output: ToolOutput,
        *,
        step: str | None = None,
        state: ToolState | None = None,
    ) -> None:
        """Commit ``record``'s final state (``state``, else ``done`` or ``failed``) with its
        result and the output's note, both redacted (and the plan step the note is about).

        Every result of a call goes through here: a tool's output, its error, a
        crash, a denial, a control call's refusal."""
        redact = self._redactor.redact
        final = state or (ToolState.FAILED if output.is_error else ToolState.DONE)
        tracing.tool_call_ended(record.tool_use_id, final)
        content = redact(output.content)
        limit = self._settings.get().output_limit
        if self._outputs is not None and len(content) > limit:  # stored whole, previewed
            content, _ = await self._outputs.preview(conversation_id, content, limit)
        moved = move(record, final, result=content)
        events: tuple[ProgressNote, ...] = ()
        if output.note:
            now = self._opening.context.now()
            journal = (await self._journal.load(conversation_id)).journal
            totals = self.totals.setdefault(conversation_id, RequestTotals()).of(journal, now)
            step = redact(step) if step else step
            events = (ProgressNote(text=redact(output.note), step=step, totals=totals),)
        await self._journal.commit(
            conversation_id,
            Change(
                entries=moved.results,
                tool_calls=moved.records,
                events=events,
            ),
        )

    async def _wait_for_approval(
        self, conversation_id: str, gated: Sequence[ToolCallRecord]
    ) -> bool:
        """Commit ``waiting(tool_approval)`` if ``gated`` are all still undecided."""
        try:
            snap = await self._journal.load(conversation_id)
            await self._journal.commit(conversation_id, tool_approval.wait(snap, gated))
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
    ) -> TurnOutcome:
        if any(control_call(r) == record.tool_use_id for r in snap.open_requests):
            return TurnOutcome.WAIT
        stats = request_stats(snap.journal, self._opening.context.now())
        if record.name == FINISH:
            stats = await self.with_changes(conversation_id, snap, stats)
        try:
            change = control_change(snap, record, workflow, stats, self._opening)
        except ToolError as exc:
            await self._finish_call(
                conversation_id, record, ToolOutput(content=str(exc), note="", is_error=True)
            )
            return TurnOutcome.CONTINUE
        await self._journal.commit(conversation_id, change)
        return TurnOutcome.DONE if record.name == FINISH else TurnOutcome.WAIT


def _runnable(record: ToolCallRecord) -> bool:
    if record.name in WAITING_CONTROL:
        return False
    return record.state in (ToolState.APPROVED, ToolState.RUNNING)
