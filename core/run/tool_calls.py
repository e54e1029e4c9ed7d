"""Running the tool calls of a model turn, with a durable record per call.

When a turn is committed, each call gets a :class:`core.vocabulary.tool_records.ToolCallRecord`
whose state the tool policy decides (:mod:`core.run.admission`).
:meth:`ToolCalls.continue_turn` then drives the turn to its end from whatever the
store holds, so a fresh turn, a turn resumed after a crash and a turn resumed
after a person's decision take the same path (docs/architecture.md, "Durability and
exactly-once"):

- a call with a result is never run again;
- ``approved`` calls run; consecutive read-only ones run concurrently; the policy
  is checked again just before each one runs, and a ``deny`` now (new settings, a
  restart with other rules) ends it ``denied`` with the reason as its result;
- a call found ``running`` (the process died while it ran) is run again if it is
  read-only, and becomes ``unknown`` if it mutates: the model is told to check;
- a message that interrupts the run (busy mode ``interrupt``) ends the turn before
  its next call runs: the calls not yet run end ``cancelled``
  (:mod:`core.run.interrupting`);
- ``pending_approval`` calls a remembered approval covers are approved by it
  (:mod:`core.vocabulary.approvals`); the others share one tool approval request;
  the allowed calls of the turn run while they wait, and the run ends
  ``waiting(tool_approval)`` if they are still undecided then;
- a ``report_progress`` call is its note, and an ``ask_expert`` call its consultation
  of the expert (:mod:`core.run.consultation`), in its place among the calls; the
  control calls that end the turn (``propose_plan``, ``ask_user``, ``finish``) come
  last, and a ``finish`` before the change the plan asks for is refused
  (:mod:`core.run.nudges`). All are parsed (:func:`core.tools.control.parse`) and done
  in :meth:`ToolCalls._control`.

Every state change is a :func:`core.tool_state.move`, committed with its result;
one call runs in :mod:`core.run.one_call`, whose :func:`~core.run.one_call.finish_call`
commits every result, redacted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import assert_never

from core.models.base import ToolKind
from core.requests import plan_approval, question, tool_approval
from core.run import live
from core.run.arrivals import ends_run
from core.run.compose import Flow
from core.run.consultation import consult
from core.run.control import finish, handed_back
from core.run.decision import ModelDecision
from core.run.deps import RunDeps
from core.run.interrupting import interrupted, interrupting
from core.run.nudges import early_finish, nudged_since_word, refuse_finish
from core.run.one_call import ToolStep, finish_call
from core.run.state import Run
from core.run.stats import request_stats
from core.tool_state import open_calls
from core.tools import control
from core.tools.base import ToolOutput
from core.tools.control import AskExpert, AskUser, Finish, ProposePlan, ReportProgress
from core.tools.file_modes import strip_setid
from core.tools.processes import kill_left_behind
from core.vocabulary.approvals import ApprovalScope
from core.vocabulary.errors import RequestConflict, ToolError
from core.vocabulary.fold import apply_change
from core.vocabulary.inputs import Inbox
from core.vocabulary.journal import Change, Committed
from core.vocabulary.requests import control_call
from core.vocabulary.run_events import RunStats
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolCallRecord, ToolState

log = logging.getLogger(__name__)


class ToolCalls:
    """The tool calls of one run's turns: what ``run`` knows, what ``deps`` gives it;
    ``inbox``: the run's, asked at each tool boundary whether a message interrupts
    (None: nothing interrupts)."""

    def __init__(self, run: Run, deps: RunDeps, inbox: Inbox | None = None) -> None:
        self._run = run
        self._deps = deps
        self._inbox = inbox

    async def _commit(self, change: Change) -> None:
        await live.commit(self._run, self._deps.journal, change)

    async def continue_turn(self) -> Flow:
        """Run what the last turn still needs; see the module docstring for the order."""
        run = self._run
        while True:
            snap = run.snap
            open_ = open_calls(snap)
            if not open_:
                return Flow.CONTINUE
            if interrupting(self._inbox, snap):
                await self._interrupted()
                continue
            records = [snap.tool_calls[c.id] for c in open_ if c.id in snap.tool_calls]
            gated = [r for r in records if r.state is ToolState.PENDING_APPROVAL]
            if gated and not tool_approval.is_open_for(snap, gated):
                if await self._by_rules(gated):
                    continue
                policy, scopes = run.settings.tool_policy, run.settings.approval_scopes
                await self._commit(tool_approval.open_approval(gated, policy, run.opening, scopes))
                continue
            runnable = [r for r in records if _runnable(r)]
            if runnable:
                if self._deps.suspended():
                    return Flow.SUSPENDED
                if self._kind(runnable[0]) is ToolKind.CONTROL:
                    await self._control(snap, runnable[0])  # report_progress: its note
                else:
                    await self._run_batch(snap, runnable)
                continue
            if gated:
                if await self._wait_for_approval(snap, gated):
                    return Flow.WAIT
                continue  # a decision landed between our look and our commit
            ending = next((r for r in records if control.ends_turn(r.name)), None)
            if ending is None:
                await self._close_strays(records)
                return Flow.CONTINUE
            return await self._control(snap, ending)

    async def _interrupted(self) -> None:
        """End the turn here for the messages waiting in the inbox, one of which interrupts
        (:func:`core.run.interrupting.interrupted`), their files read first."""
        run, deps = self._run, self._deps
        assert self._inbox is not None
        settings = run.settings
        messages = [
            await deps.files.read(
                run.snap, m, text_limit=settings.file_text_limit, repo=settings.git_repo
            )
            for m in self._inbox()
        ]
        await self._commit(interrupted(run.snap, messages, deps.toolbox.read_only))

    def _kind(self, record: ToolCallRecord) -> ToolKind:
        return self._deps.toolbox.kind(record.name)

    async def _run_batch(
        self, snap: ConversationSnapshot, runnable: Sequence[ToolCallRecord]
    ) -> None:
        run, deps = self._run, self._deps
        workspace = run.scope.workspace or Path(snap.workspace)  # a delegation's: its own
        await self._kill_left_behind(runnable, workspace)
        first = runnable[0]
        if first.state is ToolState.RUNNING and not first.read_only:
            content = (
                "This call was running when the bot stopped unexpectedly; its outcome is "
                "unknown. Check the state of the workspace before retrying it."
            )
            output = ToolOutput(
                content=content, note=f"{first.name}: outcome unknown", is_error=True
            )
            await finish_call(run, deps, first, output, state=ToolState.UNKNOWN)
            return
        batch = ModelDecision.side_by_side(runnable, deps.toolbox.kind)
        mutating = run.workflow.state(snap.position).changes
        calls = [
            asyncio.ensure_future(
                ToolStep(deps, r, workspace=workspace, plan_approved=mutating).go(run)
            )
            for r in batch
        ]
        try:
            order = {r.tool_use_id: i for i, r in enumerate(batch)}
            with live.gathered(run, len(calls), order):  # their results: one commit
                await asyncio.gather(*calls)
        except BaseException:  # a refused commit or a stop: no call outlives its batch
            for call in calls:
                call.cancel()
            await asyncio.gather(*calls, return_exceptions=True)
            raise

    async def _kill_left_behind(self, records: Sequence[ToolCallRecord], workspace: Path) -> None:
        """Kill command groups that calls found ``running`` left behind (a crash).

        Before such a call is re-run or told ``unknown``, a group still running from
        the earlier process must go, or it would go on changing the workspace. A
        group of another boot or host, or whose id was reused, is left alone
        (:func:`core.tools.processes.kill_left_behind`). Then, as after every command,
        no file of the workspace keeps a setuid or setgid bit the command gave it
        (:func:`core.tools.file_modes.strip_setid`): the process that ran it died
        before it could clear them.
        """
        left = [r for r in records if r.state is ToolState.RUNNING and r.process is not None]
        for record in left:
            assert record.process is not None
            root = self._run.settings.cgroup_root
            await asyncio.to_thread(kill_left_behind, record.process, cgroup_root=root)
        if left:
            await asyncio.to_thread(strip_setid, workspace)

    async def with_changes(self, snap: ConversationSnapshot, stats: RunStats) -> RunStats:
        """``stats`` with the branch and changed files of the conversation's clone, if any."""
        cid, repo = self._run.conversation_id, self._run.settings.git_repo
        try:
            changes = await self._deps.workspaces.changes(cid, Path(snap.workspace), repo)
        except ToolError as exc:
            log.warning("%s: cannot tell what changed in the workspace: %s", cid, exc)
            return stats
        if changes is None:
            return stats
        return stats.model_copy(update={"branch": changes.branch, "changed_files": changes.files})

    async def _by_rules(self, gated: Sequence[ToolCallRecord]) -> bool:
        """Approve the calls of ``gated`` a remembered rule in force covers, of a scope
        offered here (:func:`core.requests.tool_approval.by_rules`); whether any was (or a
        decision landed meanwhile: the conversation is read back). The rules are read
        now, so a revoked one answers no later call."""
        run, rules = self._run, self._deps.rules
        wider = set(run.settings.approval_scopes) - {ApprovalScope.ONCE}
        if rules is None or not wider:
            return False
        found = await rules.in_force(run.conversation_id, run.snap.run)
        change = tool_approval.by_rules(gated, [r for r in found if r.scope in wider])
        if change is None:
            return False
        try:
            await self._commit(change)
        except RequestConflict:
            await live.reload(self._run, self._deps.journal)
        return True

    async def _wait_for_approval(
        self, snap: ConversationSnapshot, gated: Sequence[ToolCallRecord]
    ) -> bool:
        """Commit ``waiting(tool_approval)`` if ``gated`` are all still undecided; else
        (a decision landed meanwhile) read the conversation back."""
        try:
            await self._commit(tool_approval.wait(snap, gated))
        except RequestConflict:
            await live.reload(self._run, self._deps.journal)
            return False
        return True

    async def _close_strays(self, records: Sequence[ToolCallRecord]) -> None:
        """Give a result to open calls no rule runs (never expected; keeps requests valid)."""
        for record in records:
            output = ToolOutput(content="This call was not run.", note="", is_error=True)
            await finish_call(self._run, self._deps, record, output, state=ToolState.CANCELLED)

    async def _control(self, snap: ConversationSnapshot, record: ToolCallRecord) -> Flow:
        """Do the control call ``record``: its note, the answer, or the request it opens.

        Its input was checked when its turn was admitted (:mod:`core.run.admission`);
        a call admitted before that (an older version's) may still be malformed, and
        gets its error as its result.
        """
        run, deps = self._run, self._deps
        if any(control_call(r) == record.tool_use_id for r in snap.open_requests):
            return Flow.WAIT
        try:
            call = control.parse(record.name, record.input)
        except ToolError as exc:
            output = ToolOutput(content=str(exc), note="", is_error=True)
            await finish_call(run, deps, record, output)
            return Flow.CONTINUE
        if isinstance(call, ReportProgress):
            output = ToolOutput(content="Noted.", note=call.note, step=call.step)
            await finish_call(run, deps, record, output)
            return Flow.CONTINUE
        if isinstance(call, AskExpert):
            await consult(run, deps, record, call)
            return Flow.CONTINUE
        change, outcome = await self._ending(snap, record, call)
        await self._commit(change)
        return outcome

    @staticmethod
    def ends_at_once(records: Sequence[ToolCallRecord]) -> ToolCallRecord | None:
        """The call that ends a turn at once, when it is the turn's only call: a
        ``propose_plan``, ``ask_user`` or ``finish`` admitted ``approved`` (its input
        parsed at admission). None otherwise."""
        if len(records) != 1:
            return None
        record = records[0]
        if not control.ends_turn(record.name) or record.state is not ToolState.APPROVED:
            return None
        return record

    async def end_with(self, turn: Change, record: ToolCallRecord) -> Flow:
        """Commit the model turn ``turn`` and what its one ending call ``record`` does, in
        one commit (:meth:`Change.then`): nothing runs between them, so they are one
        step (docs/architecture.md, "Durability and exactly-once").

        The ending call's change is computed from the snapshot as it will be after
        ``turn``: folded here with provisional numbers and time, which the commit
        then gives for real.
        """
        run = self._run
        snap = run.snap
        seqs = tuple(range(snap.last_seq + 1, snap.last_seq + 1 + len(turn.entries)))
        after = apply_change(snap, turn, Committed(seqs=seqs, at=run.context.now()))
        call = control.parse(record.name, record.input)
        assert isinstance(call, Finish | ProposePlan | AskUser), f"{record.name} ends no turn"
        change, outcome = await self._ending(after, record, call)
        await self._commit(turn.then(change))
        return outcome

    async def _ending(
        self,
        snap: ConversationSnapshot,
        record: ToolCallRecord,
        call: Finish | ProposePlan | AskUser,
    ) -> tuple[Change, Flow]:
        """What the ending call ``call`` (of ``record``) changes, and how the turn ends."""
        run, deps = self._run, self._deps
        if run.scope.hands_back and not isinstance(call, AskUser):
            return handed_back(record, call), Flow.CONTINUE  # a delegation's finish, or a plan
        match call:
            case Finish():
                early = early_finish(snap, deps.toolbox)
                if early is not None:
                    again = bool(nudged_since_word(snap.journal, "early_finish"))
                    return refuse_finish(run, record, early, again=again), Flow.CONTINUE
                stats = request_stats(snap.journal, run.context.now())
                stats = await self.with_changes(snap, stats)
                change = finish(snap, record, call, run.workflow, stats, run.settings)
                ends = ends_run(run.workflow, snap)
                return change, Flow.DONE if ends else Flow.CONTINUE
            case ProposePlan():
                opened = plan_approval.open_plan(snap, record, call, run.workflow, run.opening)
                return opened, Flow.WAIT
            case AskUser():
                return question.open_question(snap, record, call, run.opening), Flow.WAIT
            case _:
                assert_never(call)


def _runnable(record: ToolCallRecord) -> bool:
    """Whether ``record`` runs now: ``approved``, or ``running`` when the process died
    (never a control call that ends the turn: those come last)."""
    if control.ends_turn(record.name):
        return False
    return record.state in (ToolState.APPROVED, ToolState.RUNNING)
