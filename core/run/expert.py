"""The expert at work in a delegation's scope: its brief, its model step and its loop.

A delegation (:mod:`core.run.delegation`) goes on in the scope ``delegation-<n>``,
whose model is the expert's and whose tool calls run in the fork of the workspace
(:class:`core.run.scope.Scope`). There the expert reads a view of its own
(:func:`core.run.own_views.scope_view`): first its brief (:func:`brief`: why the run is
stuck, the request and the approved plan, each failed call and the end of its
output, the instruction to finish the sub-task within the plan), then its own turns.
Its loop (:func:`expert_loop`) ends when it calls ``finish`` (which hands the work
back: :func:`core.run.control.handed_back`), answers without a tool call, reaches
:data:`EXPERT_TURNS` turns, or its model call fails: a failed step of the
delegation, never the run's. Everything it reads is derived from the journal
(:func:`expert_end`), so a run that goes on after a restart goes on the same way.
"""

from __future__ import annotations

import logging

from core.contexts.plan import current_plan, request_of
from core.requests.escalation import stuck_reason
from core.run import live
from core.run.compose import CONTINUE, Branch, Flow, Loop, Outcome, Step
from core.run.compose import Sequence as Steps
from core.run.decision import ModelDecision
from core.run.deps import RunDeps
from core.run.history import build_messages
from core.run.model_turn import model_turn
from core.run.own_views import scope_view
from core.run.scope import turns_in_scope
from core.run.state import Run
from core.run.steps import MODEL_FAILED, ModelStep, OverBudget, ToolSteps, model_failed
from core.tools.command import RunCommand
from core.tools.control import finishes
from core.vocabulary.entries import (
    AssistantTurn,
    Delegated,
    DelegationBrief,
    ScopeEntered,
)
from core.vocabulary.errors import ModelError
from core.vocabulary.journal import Change
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.run_events import ProgressNote
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolState

log = logging.getLogger(__name__)

EXPERT_TURNS = 16
"""Model turns the expert takes at most in one delegation (its loop's cap)."""
TURNS_USED_UP = "turns_used_up"
"""The outcome name of an expert's loop that reached :data:`EXPERT_TURNS`."""
MARK = "🎓"
"""The mark of a delegation's progress notes in the thread."""
COMMAND = RunCommand.spec.name
"""The tool whose last failed call the expert's work must make pass (``run_command``)."""


def scope_of(n: int) -> str:
    """The id of delegation ``n``'s scope: ``delegation-<n>``."""
    return f"delegation-{n}"


def brief(snap: ConversationSnapshot, entry: Delegated, workspace: str) -> str:
    """The expert's brief for ``entry``: why the run is stuck, the request and the approved
    plan (:func:`core.contexts.plan.current_plan`), each failed call and the end of its
    output, and the instruction to finish the sub-task within the plan in
    ``workspace`` (words: where it works)."""
    plan = current_plan(snap)
    lines = [
        "[threadbot: you are the expert. The executor carrying out the approved plan below "
        f"is stuck ({stuck_reason(entry.failures, entry.reason)}), so the work is yours now.]",
        "",
        f"The request: {plan.request if plan else request_of(snap)}",
    ]
    if plan is not None:
        lines += ["", "The approved plan:"]
        lines += [f"{number}. {step}" for number, step in enumerate(plan.steps, start=1)]
    if entry.failures:
        lines += ["", "What failed, oldest first:"]
        for number, failed in enumerate(entry.failures, start=1):
            lines.append(f"{number}. {failed.call}")
            if failed.output:
                lines.append("```\n" + failed.output + "\n```")
    last = last_command(snap, entry)
    check = (
        f"threadbot then runs `{last}` again, and your work is merged only if it exits 0"
        if last
        else "threadbot then merges your work back"
    )
    lines += [
        "",
        f"Finish the sub-task within the plan: fix what makes this fail, with the tools, in "
        f"{workspace}, a copy of the executor's workspace. Do not go beyond the plan and do "
        "not propose a new one. When you are done, call finish with a short summary of "
        f"what you changed; {check}. If you cannot fix it, call finish and say why.",
    ]
    return "\n".join(lines)


def last_command(snap: ConversationSnapshot, entry: Delegated) -> str:
    """The command line that failed last in ``entry``'s failures ("" when none did)."""
    for failed in reversed(entry.failures):
        record = snap.tool_calls.get(failed.tool_use_id)
        if record is not None and record.name == COMMAND:
            command = record.input.get("command")
            return command if isinstance(command, str) else ""
    return ""


def expert_end(snap: ConversationSnapshot, scope_id: str) -> tuple[bool, str | None]:
    """Whether the expert in ``scope_id`` is done (it called ``finish``, or answered in
    prose), and its ``finish`` answer (None: it did not finish). Reads back to the
    scope's entry only."""
    journal = snap.journal
    for at in range(len(journal) - 1, -1, -1):
        entry = journal[at].entry
        if isinstance(entry, ScopeEntered) and entry.scope == scope_id:
            return False, None
        if not isinstance(entry, AssistantTurn):
            continue
        if not entry.tool_calls:
            return True, None
        for call in entry.tool_calls:
            record = snap.tool_calls.get(call.id)
            if finishes(call.name) and record is not None and record.state is ToolState.DONE:
                answer = call.input.get("answer")
                return True, answer if isinstance(answer, str) else ""
        return False, None
    return False, None


class ExpertStep(ModelStep):
    """One model call of the expert: its scope's view of the history
    (:func:`core.run.own_views.scope_view`) to the expert's model; a turn without tool
    calls is committed as it is (the expert is done, without ``finish``), any other as
    :class:`core.run.steps.ModelStep` commits it."""

    async def go(self, run: Run) -> Outcome:
        """Call the expert's model and commit its turn."""
        deps = self._deps
        view = scope_view(run.snap.journal, run.scope.id)
        try:
            turn = await model_turn(run, deps, run.snap, build_messages(view))
        except ModelError as exc:
            return model_failed(exc)
        if not ModelDecision.of(turn, deps.toolbox.kind).answers:
            return await self._after(run, turn)
        notes = (ProgressNote(text=turn.text, mark=MARK),) if turn.text else ()
        await live.commit(run, deps.journal, Change(entries=(turn,), events=notes))
        return CONTINUE


class _Failed:
    """The expert's model call failed: its loop ends (``done``, named ``model_failed``
    with the failure's words), never the run."""

    def __init__(self, failed: Outcome) -> None:
        self._failed = failed

    async def go(self, run: Run) -> Outcome:
        """End the expert's loop with the failure."""
        log.info(
            "conversation %s: the expert's call failed: %s",
            run.conversation_id,
            self._failed.reason,
        )
        return Outcome(Flow.DONE, MODEL_FAILED, self._failed.reason)


class _UsedUp:
    """At the expert's turn cap: the calls its last turn decided are run, then its loop
    ends (``done``, named :data:`TURNS_USED_UP`)."""

    def __init__(self, deps: RunDeps) -> None:
        self._tools = ToolSteps(deps)

    async def go(self, run: Run) -> Outcome:
        """Finish the last turn's calls; end the loop."""
        outcome = await self._tools.go(run)
        if not outcome.goes_on:
            return outcome
        return Outcome(Flow.DONE, TURNS_USED_UP)


class Briefed:
    """Commit delegation ``n``'s brief as the first entry of its scope (once)."""

    def __init__(self, deps: RunDeps, entry: Delegated, workspace: str) -> None:
        self._deps = deps
        self._entry = entry
        self._workspace = workspace

    async def go(self, run: Run) -> Outcome:
        """The brief, unless the scope holds it already; ``continue``."""
        view = scope_view(run.snap.journal, run.scope.id)
        if not any(isinstance(r.entry, DelegationBrief) for r in view):
            text = brief(run.snap, self._entry, self._workspace)
            said = DelegationBrief(n=self._entry.n, text=text)
            await live.commit(run, self._deps.journal, Change(entries=(said,)))
        return CONTINUE


def expert_loop(deps: RunDeps, n: int) -> Step:
    """The expert's loop in delegation ``n``'s scope::

    Loop(until: the expert called finish, or answered without a tool call, or the
         conversation is no longer running;
         cap: EXPERT_TURNS model turns since the scope's entry;
         at the cap: its last turn's calls, then the end)
      Sequence(ToolSteps, OverBudget,
               Branch(ExpertStep, model_failed: the end, never the run's))
    """
    scope_id = scope_of(n)

    def ends(run: Run) -> bool:
        if run.snap.status.lifecycle is not Lifecycle.RUNNING:
            return True
        return expert_end(run.snap, scope_id)[0]

    return Loop(
        Steps(
            ToolSteps(deps),
            OverBudget(deps),
            Branch(ExpertStep(deps), {MODEL_FAILED: _Failed}),
        ),
        until=ends,
        cap=lambda run: EXPERT_TURNS,
        count=lambda run: turns_in_scope(run.snap.journal, scope_id),
        on_cap=_UsedUp(deps),
    )
