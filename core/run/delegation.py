"""Delegation: a stuck run hands its work to the expert, on a branch of its own.

When the run is stuck (:func:`core.run.escalation.escalate`) and an expert model is
set (``expert_model``), :func:`delegate` hands the work over before the people are
asked (docs/architecture.md, "The agent as a composition"):

1. a :class:`~core.vocabulary.entries.Delegated` entry (``n``, from 1 in the
   conversation; the expert's model; the branch; the failures or the reason), and a
   progress note ``🎓 handing this to the expert (<model>): the last 2 commands
   failed``;
2. the fork the expert works in (:meth:`core.tools.workspaces.GitWorkspaces.fork`):
   a copy of the conversation's workspace beside it, on the branch
   ``threadbot/<conversation>-delegation-<n>`` when the workspace is a clone, a plain
   copy otherwise;
3. the scope ``delegation-<n>`` (:class:`core.run.steps.InScope`), whose model calls
   ask the expert's model on a view of their own (:func:`core.run.own_views.scope_view`),
   whose tool calls run in the fork, under the same policy and approvals, and where
   ``finish`` hands the work back (:func:`core.run.control.handed_back`). Its first
   entry is the brief (:func:`core.run.expert.brief`: the approved plan, each failed
   command and the end of its output, the instruction to finish the sub-task within
   the plan); then the expert's loop (:func:`core.run.expert.expert_loop`), at most
   :data:`core.run.expert.EXPERT_TURNS` model turns;
4. the check: the work is usable when the expert called ``finish`` and the command
   that failed last exits 0 when threadbot runs it again in the fork, through the
   same tool, policy and sandbox (:class:`~core.vocabulary.entries.DelegationChecked`);
5. usable, the fork's work is merged into the conversation's branch (or its files
   copied back) and :class:`~core.vocabulary.entries.DelegationEnded` says
   ``merged``: the failure streak ends there, and the executor goes on, reading how
   it ended; otherwise ``not_usable``, and the caller asks the people
   (:func:`core.run.escalation.ask_people`).

An expert whose model call fails ends its delegation ``not_usable`` (never the run
``failed``). Everything is derived from the journal: a run that waited for a person
inside the delegation (a tool approval, a question) or was killed there goes on
where it was (:func:`open_delegation`, :class:`core.run.escalation.Delegating`); a
stop ends it with the run.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from core.files.saving import SHARED_DIR
from core.policy import policy
from core.policy.summary import last_lines, shorten
from core.requests.escalation import stuck_reason, why_of
from core.run import live
from core.run.compose import CONTINUE, Flow, Outcome
from core.run.compose import Sequence as Steps
from core.run.deps import RunDeps
from core.run.expert import (
    COMMAND,
    EXPERT_TURNS,
    MARK,
    TURNS_USED_UP,
    Briefed,
    expert_end,
    expert_loop,
    last_command,
    scope_of,
)
from core.run.one_call import call_context
from core.run.state import Run
from core.run.steps import MODEL_FAILED, InScope
from core.tools.workspaces import BRANCH_PREFIX, fork_path
from core.vocabulary.entries import (
    AssistantTurn,
    Delegated,
    DelegationChecked,
    DelegationEnded,
    FailedCall,
    JournalRecord,
    StopEntry,
    UserText,
)
from core.vocabulary.errors import ToolError
from core.vocabulary.journal import Change
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.run_events import ProgressNote

log = logging.getLogger(__name__)

NOT_USABLE = "not_usable"
"""The outcome name of a delegation whose work is not usable: the people are asked next."""
TAIL_LINES = 5
"""Lines of a command's output kept in the check (its end)."""
LINE_WIDTH = 120
"""Characters of each of those lines."""


def open_delegation(journal: Sequence[JournalRecord]) -> tuple[int, Delegated] | None:
    """The delegation the run is in, with its index in ``journal``: a
    :class:`~core.vocabulary.entries.Delegated` entry with no
    :class:`~core.vocabulary.entries.DelegationEnded`, stop or new request after it.
    None when there is none. Reads back only to the newest model turn that is not the
    expert's (none of the run's own turns comes inside a delegation)."""
    for at in range(len(journal) - 1, -1, -1):
        entry = journal[at].entry
        if isinstance(entry, Delegated):
            return at, entry
        if isinstance(entry, DelegationEnded | StopEntry):
            return None
        if isinstance(entry, UserText) and entry.role == "request":
            return None
        if isinstance(entry, AssistantTurn) and not entry.experts:
            return None
    return None


async def delegate(
    run: Run, deps: RunDeps, failures: Sequence[FailedCall], reason: str = ""
) -> Outcome:
    """Hand the stuck work to the expert (see the module docstring): ``continue`` when its
    work was merged, ``continue`` named :data:`NOT_USABLE` when it was not (the caller
    asks the people), else the flow it stopped at (``wait`` for a person inside the
    delegation, ``suspended``, ``done`` when the run ended beside it)."""
    snap = run.snap
    settings = run.settings
    model = settings.expert_model or ""
    n = 1 + sum(isinstance(r.entry, Delegated) for r in snap.journal)
    branch = f"{BRANCH_PREFIX}{run.conversation_id}-delegation-{n}" if settings.git_repo else None
    entry = Delegated(n=n, model=model, branch=branch, failures=tuple(failures), reason=reason)
    said = f"handing this to the expert ({model}): {stuck_reason(failures, reason)}"
    log.info("conversation %s: delegation %d to %s", run.conversation_id, n, model)
    await live.commit(
        run, deps.journal, Change(entries=(entry,), events=(ProgressNote(text=said, mark=MARK),))
    )
    return await Delegation(deps, entry).go(run)


class Delegation:
    """Delegation ``entry.n`` from wherever the journal says it is, to its end: its fork,
    its scope (the brief, the expert's loop), the check, the merge and the
    :class:`~core.vocabulary.entries.DelegationEnded` entry, in the escalation's span
    (``to`` ``expert``). Outcomes as :func:`delegate`'s."""

    def __init__(self, deps: RunDeps, entry: Delegated) -> None:
        self._deps = deps
        self._entry = entry

    async def go(self, run: Run) -> Outcome:
        """Go on with the delegation (see the class docstring)."""
        entry = self._entry
        with run.span.escalation("expert", len(entry.failures), why_of(entry.reason)) as span:
            outcome = await self._go(run)
            if outcome.flow is Flow.CONTINUE:
                span.ended(outcome.name or "merged")
            return outcome

    async def _go(self, run: Run) -> Outcome:
        deps, entry = self._deps, self._entry
        settings = run.settings
        workspace = Path(run.snap.workspace)
        fork = fork_path(workspace, entry.n)
        try:
            await deps.workspaces.prepare(run.conversation_id, workspace, settings.git_repo)
            await deps.workspaces.fork(workspace, fork, entry.branch)
        except ToolError as exc:
            return await self._ended(run, None, f"its workspace could not be made: {exc}")
        where = f"the branch {entry.branch}" if entry.branch else f"the folder {fork.name}"
        scope = InScope(
            deps,
            scope_of(entry.n),
            f"the expert's delegation {entry.n}",
            Steps(Briefed(deps, entry, where), expert_loop(deps, entry.n)),
            role="expert",
            workspace=fork,
            hands_back=True,
        )
        outcome = await scope.go(run)
        if outcome.flow is not Flow.CONTINUE:
            return outcome
        if run.snap.status.lifecycle is not Lifecycle.RUNNING:
            return Outcome(Flow.DONE)
        done, answer = expert_end(run.snap, scope_of(entry.n))
        if answer is None:
            why = _why_unfinished(outcome.name, outcome.reason, done)
            return await self._ended(run, None, why)
        check = await self._check(run, fork)
        if check is not None and not check.passed:
            said = check.output.splitlines()[-1] if check.output else "no output"
            why = f"`{shorten(check.command, 80)}` still fails ({shorten(said, 120)})"
            return await self._ended(run, answer, why)
        try:
            # The files people shared while it worked were saved in the workspace: kept.
            await deps.workspaces.merge(workspace, fork, entry.branch, keep=(SHARED_DIR,))
        except ToolError as exc:
            return await self._ended(run, answer, f"its work could not be merged: {exc}")
        why = f"`{shorten(check.command, 80)}` exits 0 now" if check else "it called finish"
        return await self._ended(run, answer, why, merged=True)

    async def _check(self, run: Run, fork: Path) -> DelegationChecked | None:
        """The check of the expert's work (see the module docstring): the journaled one,
        else the command that failed last run again in ``fork`` now, and journaled;
        None when no command failed (a tool that does not exist, or a reason)."""
        deps, entry = self._deps, self._entry
        snap = run.snap
        for record in reversed(snap.journal):
            found = record.entry
            if isinstance(found, DelegationChecked) and found.n == entry.n:
                return found
            if isinstance(found, Delegated) and found.n == entry.n:
                break
        command = last_command(snap, entry)
        tool = deps.toolbox.get(COMMAND)
        if not command or tool is None:
            return None
        arguments = {"command": command}
        mutating = run.workflow.state(snap.position).changes
        ruling = run.settings.tool_policy.check(
            tool_name=COMMAND, read_only=False, arguments=arguments, plan_approved=mutating
        )
        if ruling.decision is policy.Permission.DENY:
            passed, output = False, f"the policy denies it now: {ruling.reason}"
        else:
            ctx = call_context(run, deps, fork, network=ruling.network)
            try:
                result = await tool.run(arguments, ctx)
            except ToolError as exc:
                passed, output = False, str(exc)
            else:
                passed, output = not result.is_error, result.content
        output = last_lines(deps.redactor.redact(output), TAIL_LINES, LINE_WIDTH)
        checked = DelegationChecked(n=entry.n, command=command, passed=passed, output=output)
        await live.commit(run, deps.journal, Change(entries=(checked,)))
        return checked

    async def _ended(
        self, run: Run, answer: str | None, why: str, *, merged: bool = False
    ) -> Outcome:
        """Commit the delegation's end with its note: ``continue`` when merged, else
        ``continue`` named :data:`NOT_USABLE`."""
        entry = self._entry
        if merged:
            where = f"on `{entry.branch}`: merged" if entry.branch else "in a copy: copied back"
            said = f"the expert fixed it {where} ({why})"
        else:
            said = f"the expert could not fix it: {why}"
        ended = DelegationEnded(
            n=entry.n,
            outcome="merged" if merged else "not_usable",
            why=why,
            summary=answer or "",
            branch=entry.branch,
        )
        note = ProgressNote(text=self._deps.redactor.redact(said), mark=MARK)
        await live.commit(run, self._deps.journal, Change(entries=(ended,), events=(note,)))
        log.info("conversation %s: delegation %d: %s", run.conversation_id, entry.n, said)
        return CONTINUE if merged else Outcome(Flow.CONTINUE, NOT_USABLE)


def _why_unfinished(name: str, reason: str, done: bool) -> str:
    """Why an expert that did not call ``finish`` left its work not usable."""
    if name == MODEL_FAILED:
        return f"its model call failed ({reason})" if reason else "its model call failed"
    if name == TURNS_USED_UP:
        return f"it used its {EXPERT_TURNS} model turns without calling finish"
    if done:
        return "it answered without calling finish"
    return "it stopped without calling finish"
