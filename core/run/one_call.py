"""One tool call of a run: checked against the policy just before, run, its result committed.

:func:`run_call` runs an ``approved`` (or, after a crash, a read-only ``running``)
call: the policy is asked again first (a ``deny`` now ends it ``denied``), the
record moves to ``running`` (committed for a call that may change something, and
with its command's process group once it starts; a read-only call, which runs
again after a crash whether it was marked or not, is marked in memory only), the
conversation's workspace is prepared, the tool runs (tried again under the run's
retry policy when the call may be repeated and its failure may pass:
:mod:`core.run.tool_step`), and :func:`finish_call` commits its final state with its
one result (together with the results of the calls that ran beside it and finished
at once: :func:`core.run.live.commit`).

Every result and progress note of a call is committed through :func:`finish_call`,
which redacts the bot's secrets from it first (:mod:`core.secrets`): the journal,
the tool records, the model's next request and the thread never hold a token.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from core.outputs import Gone, look_up
from core.policy import policy
from core.policy.summary import summarize_call
from core.run import live
from core.run.compose import CONTINUE, Outcome
from core.run.deps import RunDeps
from core.run.slots import command_slot
from core.run.state import Run
from core.run.stats import duration_said
from core.run.tool_step import Attempted, attempted
from core.tool_state import move, started
from core.tools.base import ToolContext, ToolOutput
from core.tracing import ToolSpan
from core.vocabulary.entries import Entry, JournalRecord
from core.vocabulary.errors import LeaseLost, ToolError
from core.vocabulary.journal import Change
from core.vocabulary.run_events import ProgressNote
from core.vocabulary.tool_records import CommandProcess, ToolCallRecord, ToolState

log = logging.getLogger(__name__)


async def run_call(
    run: Run,
    deps: RunDeps,
    record: ToolCallRecord,
    span: ToolSpan | None = None,
    *,
    workspace: Path,
    plan_approved: bool,
) -> None:
    """Run the call ``record`` in ``workspace`` and commit its result; a command first
    waits for its ``command`` slot (:mod:`core.run.slots`).

    ``plan_approved``: the position lets mutating tools run; ``span``: the call's
    trace span, told its final state. Raises only what the store raises for a
    commit (:class:`core.vocabulary.errors.LeaseLost`, ...): a tool's failure or crash
    is the call's error result.
    """
    ruling = await checked_now(run, deps, record, plan_approved, span)
    if ruling is None:
        return
    # a command waits for its slot before it is marked running (core.run.slots)
    async with command_slot(deps.slots, run.conversation_id, record.name):
        await _ruled(run, deps, record, span, workspace=workspace, network=ruling.network)


async def _ruled(
    run: Run,
    deps: RunDeps,
    record: ToolCallRecord,
    span: ToolSpan | None,
    *,
    workspace: Path,
    network: bool,
) -> None:
    """Run the call ``record``, which the policy lets run (with ``network``), and commit
    its result (:func:`run_call`)."""
    tool = deps.toolbox.get(record.name)
    assert tool is not None  # admitted calls name known tools
    settings = run.settings
    running = move(record, ToolState.RUNNING).records
    if not record.read_only:  # a read-only call runs again after a crash either way
        await live.commit(run, deps.journal, Change(tool_calls=running))
    try:
        await deps.workspaces.prepare(run.conversation_id, workspace, settings.git_repo)
    except ToolError as exc:  # the clone failed: the call fails, the model is told
        output = ToolOutput(content=str(exc), note=f"{record.name} failed: {exc}", is_error=True)
        await finish_call(run, deps, running[0], output, span=span)
        return

    async def on_start(process: CommandProcess) -> None:
        with_process = started(running[0], process)
        await live.commit(run, deps.journal, Change(tool_calls=(with_process,)))

    ctx = call_context(run, deps, workspace, network=network, started=on_start)

    async def once() -> Attempted:
        try:
            output = await _told_while_running(run, deps, record, tool.run(record.input, ctx))
        except LeaseLost:
            raise
        except ToolError as exc:
            lines = str(exc).strip().splitlines()
            note = f"{record.name} failed: {lines[0][:200] if lines else 'no reason given'}"
            output = ToolOutput(content=str(exc), note=note, is_error=True)
            return Attempted(output, retryable=exc.retryable)
        except Exception as exc:  # a tool's bug must not take the run down
            log.exception("tool %s crashed", record.name)
            output = ToolOutput(
                content=f"The tool crashed: {exc!r}", note=f"{record.name} crashed", is_error=True
            )
            return Attempted(output, retryable=True)
        return Attempted(output)

    output = await attempted(run, deps, record, once)
    await finish_call(run, deps, running[0], output, span=span)
    deps.faults.hit("after_tool_result")


def call_context(
    run: Run,
    deps: RunDeps,
    workspace: Path,
    *,
    network: bool,
    started: Callable[[CommandProcess], Awaitable[None]] | None = None,
) -> ToolContext:
    """Where and how a tool call of ``run`` runs: in ``workspace``, under the run's caps,
    with the network its ruling granted (``network``); ``started``: told a command's
    process group once it runs."""
    settings = run.settings
    return ToolContext(
        workspace=workspace,
        command_timeout=settings.command_timeout,
        command_cpu_seconds=settings.command_cpu_seconds,
        command_memory_mb=settings.command_memory_mb,
        command_processes=settings.command_processes,
        output_limit=(
            settings.output_store_limit if run.scope.cache is not None else settings.output_limit
        ),
        read_limit=settings.output_limit,
        network=network,
        started=started,
        outputs=_outputs_of(run, deps),
        redactor=deps.redactor,
    )


async def _told_while_running(
    run: Run, deps: RunDeps, record: ToolCallRecord, work: Coroutine[Any, Any, ToolOutput]
) -> ToolOutput:
    """``work``'s output; while it runs, a progress note every
    ``run.settings.running_note_every`` seconds says the call still runs and for how
    long (``⏳ `make test` still running · 1m 30s`` in the thread), so a long command is
    not silence. A cancellation (a stop, a shutdown) cancels ``work`` and waits for
    it: a command's process group is killed before this returns."""
    every = run.settings.running_note_every
    task = asyncio.ensure_future(work)
    if every is None:
        return await task
    began = run.context.now()
    try:
        while not (await asyncio.wait({task}, timeout=every))[0]:
            seconds = (run.context.now() - began).total_seconds()
            said = summarize_call(record.name, record.input)
            text = f"{said} still running · {duration_said(seconds)}"
            note = ProgressNote(text=deps.redactor.redact(text))
            await live.commit(run, deps.journal, Change(events=(note,)))
    except BaseException:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise
    return task.result()


def _outputs_of(run: Run, deps: RunDeps) -> Callable[[str], Awaitable[str | Gone | None]] | None:
    """The conversation's stored outputs by id, for ``read_output`` (None: no cache); an
    id the cache does not know is looked for in the journal (:func:`core.outputs.look_up`)."""
    cache, cid = run.scope.cache, run.conversation_id
    if cache is None:
        return None

    async def journal() -> tuple[JournalRecord, ...]:
        return (await live.current(run, deps.journal)).journal

    async def read(output_id: str) -> str | Gone | None:
        return await look_up(cache, cid, output_id, journal)

    return read


async def checked_now(
    run: Run,
    deps: RunDeps,
    record: ToolCallRecord,
    plan_approved: bool,
    span: ToolSpan | None = None,
) -> policy.Ruling | None:
    """Check the policy again as the call is about to run; a ``deny`` ends it ``denied``
    (None), else the ruling (its network grant goes with the call).

    The policy may have changed since the call was admitted or approved (new
    settings, a restart with other rules). Only ``deny`` stops it here: an
    ``ask`` was answered already (a person approved the call, or the policy
    allowed it when the turn came), and asking again would reopen a decided
    request. The model reads the reason in the call's result.
    """
    ruling = run.settings.tool_policy.check(
        tool_name=record.name,
        read_only=record.read_only,
        arguments=record.input,
        plan_approved=plan_approved,
    )
    if ruling.decision is not policy.Permission.DENY:
        return ruling
    log.info("%s: %s denied before it ran (%s)", run.conversation_id, record.name, ruling.rule)
    summary = summarize_call(record.name, record.input)
    output = ToolOutput(
        content=f"Denied by policy before it ran: {ruling.reason}",
        note=f"{summary} was not run: {ruling.reason}",
        is_error=True,
    )
    await finish_call(run, deps, record, output, state=ToolState.DENIED, span=span)
    return None


async def finish_call(
    run: Run,
    deps: RunDeps,
    record: ToolCallRecord,
    output: ToolOutput,
    *,
    state: ToolState | None = None,
    span: ToolSpan | None = None,
    before: Sequence[Entry] = (),
) -> None:
    """Commit ``record``'s final state (``state``, else ``done`` or ``failed``) with its
    result and the output's note, both redacted (and the plan step the note is about,
    ``output.step``); ``span``, the call's trace span, is told the final state;
    ``before``: entries journaled just before the result, in the same commit (an
    expert's consultation, :mod:`core.run.consultation`; redacted by their maker).

    Every result of a call goes through here: a tool's output, its error, a
    crash, a denial, a control call's refusal."""
    redact = deps.redactor.redact
    final = state or (ToolState.FAILED if output.is_error else ToolState.DONE)
    if span is not None:
        span.ended(final)
    content = redact(output.content)
    limit = run.settings.output_limit
    cache = run.scope.cache
    if cache is not None and len(content) > limit:  # stored whole, previewed
        content, _ = await cache.preview(run.conversation_id, content, limit)
    moved = move(record, final, result=content)
    events: tuple[ProgressNote, ...] = ()
    if output.note:
        journal = (await live.current(run, deps.journal)).journal
        totals = run.totals.of(journal, run.context.now())
        step = redact(output.step) if output.step else None
        events = (ProgressNote(text=redact(output.note), step=step, totals=totals),)
    entries = (*before, *moved.results)
    change = Change(entries=entries, tool_calls=moved.records, events=events)
    await live.commit(run, deps.journal, change, together=True)


class ToolStep:
    """One tool call as a step (:mod:`core.run.compose`): :func:`run_call` of ``record``
    in ``workspace``, in the call's trace span; ``continue`` once its result is
    committed. ``plan_approved``: the workflow position lets mutating tools run."""

    def __init__(
        self, deps: RunDeps, record: ToolCallRecord, *, workspace: Path, plan_approved: bool
    ) -> None:
        self._deps = deps
        self.record = record
        self._workspace = workspace
        self._plan_approved = plan_approved

    async def go(self, run: Run) -> Outcome:
        """Run the call and commit its one result (see :func:`run_call` for what raises)."""
        call = functools.partial(
            run_call,
            run,
            self._deps,
            self.record,
            workspace=self._workspace,
            plan_approved=self._plan_approved,
        )
        await run.span.traced_call(self.record, call)
        return CONTINUE
