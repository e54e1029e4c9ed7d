"""The steps the agent is composed of (:mod:`core.run.agent`), each one thing a turn does.

Each is a step of :mod:`core.run.compose`: built with the run's deps
(:class:`core.run.deps.RunDeps`), ``go(run)`` returns an outcome. In the order the
agent takes them in a round:

- :class:`ToolSteps`: the tool calls the last model turn decided, driven to their end
  from whatever the store holds (:class:`core.run.tool_calls.ToolCalls`; each call a
  :class:`core.run.one_call.ToolStep`);
- :class:`TakeNotes`: the messages that came while the run worked, journaled as notes;
- :class:`StepTold`: the position's instructions, for a journal that has none;
- :class:`OverBudget`: a pause with a request to go on when a budget is used up;
- :class:`ContextNoted`: the scope's context strategy's state, as a note when it changed;
- :class:`Compact`: the oldest turns summarized when the context grew past its share;
- :class:`ModelStep`: one model call, its turn admitted and committed (named outcome
  ``model_failed`` when the model fails);
- :class:`ModelFailed`: after a failure a retry may mend, a request to try again;
  otherwise the run ends ``failed``;
- :class:`OpenContinue`: at the workflow step's turn cap, the request whether to go on;
- :class:`InScope`: a composed step that goes on in a scope nested in the run's
  (:mod:`core.run.scope`), with strategies of its own.

Every commit folds into the run's snapshot (:mod:`core.run.live`): a step never
reads back what the step before it committed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from core.contexts import note_change
from core.models.base import Message
from core.requests import go_on
from core.run import live
from core.run.admission import admit_turn, denial_notes
from core.run.arrivals import ends_run, finished
from core.run.budget import budget_reached
from core.run.compaction import compaction
from core.run.compose import CONTINUE, DONE, WAIT, Flow, Outcome, Step
from core.run.decision import ModelDecision
from core.run.deps import RunDeps
from core.run.model_turn import consults_expert, model_turn, own_plan
from core.run.nudges import prose_reply
from core.run.scope import INHERIT, left_since_request, open_scopes
from core.run.state import Run
from core.run.tool_calls import ToolCalls
from core.vocabulary.entries import (
    AssistantTurn,
    ScopeEntered,
    ScopeLeft,
    StepEntered,
)
from core.vocabulary.errors import ModelError
from core.vocabulary.inputs import Inbox, said_to_run
from core.vocabulary.journal import Change
from core.vocabulary.run_events import ProgressNote
from core.vocabulary.snapshot import ConversationSnapshot

log = logging.getLogger(__name__)

MODEL_FAILED = "model_failed"
"""The outcome name of a :class:`ModelStep` whose model call failed for good."""


async def _commit(run: Run, deps: RunDeps, change: Change) -> None:
    await live.commit(run, deps.journal, change)


class ToolSteps:
    """The open tool calls of the last model turn, run to their end: ``continue`` when
    the model may be called again, ``wait`` for a person, ``done``, or ``suspended``.
    ``inbox``: the run's (a message in it may interrupt the turn; None: none)."""

    def __init__(self, deps: RunDeps, inbox: Inbox | None = None) -> None:
        self._deps = deps
        self._inbox = inbox

    async def go(self, run: Run) -> Outcome:
        """Run what the last turn still needs (:meth:`ToolCalls.continue_turn`)."""
        flow = await ToolCalls(run, self._deps, self._inbox).continue_turn()
        return Outcome(flow)


class TakeNotes:
    """Journal the messages that came while the run worked as notes (``inbox()`` gives
    them; None: there is no inbox); one that interrupts the run, come after the turn's
    last call ran, as the person's instruction (:mod:`core.run.interrupting`)."""

    def __init__(self, deps: RunDeps, inbox: Inbox | None) -> None:
        self._deps = deps
        self._inbox = inbox

    async def go(self, run: Run) -> Outcome:
        """Commit the notes, their deliveries marked handled; always ``continue``."""
        messages = list(self._inbox()) if self._inbox else []
        if not messages:
            return CONTINUE
        settings = run.settings
        read = [
            await self._deps.files.read(
                run.snap, m, text_limit=settings.file_text_limit, repo=settings.git_repo
            )
            for m in messages
        ]
        notes, keys = said_to_run(read)
        await _commit(run, self._deps, Change(entries=notes, handled=keys))
        return CONTINUE


class StepTold:
    """Journal the position's instructions first if the journal has none at all (a
    conversation from before they were journaled, when they were in the system
    prompt): the model is told where it is either way."""

    def __init__(self, deps: RunDeps) -> None:
        self._deps = deps

    async def go(self, run: Run) -> Outcome:
        """Commit the instructions when missing; always ``continue``."""
        snap = run.snap
        if any(isinstance(r.entry, StepEntered) for r in snap.journal):
            return CONTINUE
        step = run.workflow.entered(snap.position, snap.position, first=True)
        if step:
            await _commit(run, self._deps, Change(entries=step))
        return CONTINUE


class OverBudget:
    """Pause with a request to go on when a budget is used up (:mod:`core.run.budget`):
    ``wait`` then, else ``continue``; ``suspended`` when the process is stopping."""

    def __init__(self, deps: RunDeps) -> None:
        self._deps = deps

    async def go(self, run: Run) -> Outcome:
        """Check the budgets; commit the request when one is used up."""
        if self._deps.suspended():
            return Outcome(Flow.SUSPENDED)
        now = run.context.now()
        used_up = await budget_reached(
            run.snap, run.settings.budgets, now, self._deps.channel_spend
        )
        if used_up is None:
            return CONTINUE
        log.info("conversation %s: the %s budget is used up", run.conversation_id, used_up.scope)
        await _commit(run, self._deps, go_on.open_budget(run.snap, used_up, run.opening))
        return WAIT


def model_failed(exc: ModelError) -> Outcome:
    """The outcome of a model call that failed for good: named ``model_failed``, its
    message as the reason; ``wait`` when a retry may mend it, else ``done``."""
    return Outcome(Flow.WAIT if exc.retryable else Flow.DONE, MODEL_FAILED, reason=str(exc))


class ContextNoted:
    """Journal the run's scope's context strategy's state as a note when it changed
    (:func:`core.contexts.note_change`; ``flat``, the default, never has one); always
    ``continue``."""

    def __init__(self, deps: RunDeps) -> None:
        self._deps = deps

    async def go(self, run: Run) -> Outcome:
        """Commit the note when there is something new to tell."""
        scope = run.scope
        change = note_change(run.snap, scope.context, scope.id, scope.path)
        if change is not None:
            await _commit(run, self._deps, change)
        return CONTINUE


class Compact:
    """Summarize the oldest turns first when the context has grown past its share of the
    model's window (:mod:`core.run.compaction`), keeping the turns the scope's context
    strategy keeps (its note restated if the summary took it): ``continue``, or
    ``model_failed``."""

    def __init__(self, deps: RunDeps) -> None:
        self._deps = deps

    async def go(self, run: Run) -> Outcome:
        """Commit the compaction when one is due; ``model_failed`` when its summary's
        model call fails (as :class:`ModelStep`'s)."""
        deps = self._deps

        async def summary_turn(
            snap: ConversationSnapshot, messages: list[Message]
        ) -> AssistantTurn:
            return await model_turn(run, deps, snap, messages)

        keep, plan = run.scope.context.keep_turns, own_plan(run, deps, run.snap)
        try:
            change = await compaction(run.snap, run.settings, summary_turn, keep, plan)
        except ModelError as exc:
            return model_failed(exc)
        if change is not None:
            await _commit(run, deps, change)
            await ContextNoted(deps).go(run)  # restated if the summary took it
        return CONTINUE


class ModelStep:
    """One model call: its turn read as a :class:`core.run.decision.ModelDecision`,
    admitted (:mod:`core.run.admission`: the workflow position chooses the tools)
    and committed with a record per tool call.

    Outcomes: ``done`` (the answer: a turn without tool calls where no call is due),
    ``continue`` or ``wait`` for a reply in prose where a call was due (nudged, or
    escalated: :func:`core.run.nudges.prose_reply`), ``wait`` or ``done``
    when the turn's one call ends it at once (a plan, a question, ``finish``: one
    commit with the turn), ``continue`` (tool calls to run), or ``model_failed``
    (with the failure's message as ``reason``; ``wait`` when a retry may mend it,
    else ``done``), which a :class:`core.run.compose.Branch` hands to
    :class:`ModelFailed`.
    """

    def __init__(self, deps: RunDeps) -> None:
        self._deps = deps

    async def go(self, run: Run) -> Outcome:
        """Call the model and commit its turn."""
        try:
            turn = await model_turn(run, self._deps, run.snap)
        except ModelError as exc:
            return model_failed(exc)
        return await self._after(run, turn)

    async def _after(self, run: Run, turn: AssistantTurn) -> Outcome:
        deps, workflow = self._deps, run.workflow
        snap = run.snap
        decision = ModelDecision.of(turn, deps.toolbox.kind)
        totals = run.totals.of(snap.journal, run.context.now(), pending=turn)
        tools = ToolCalls(run, deps)
        if decision.answers:
            nudged = await prose_reply(run, deps, turn, totals)
            if nudged is not None:
                return nudged
            answer = decision.thinking or "(the model gave no answer)"
            stats = await tools.with_changes(snap, totals)
            after = finished(workflow, snap, answer, stats, run.settings)
            await _commit(run, deps, Change(entries=(turn,)).then(after))
            return DONE if ends_run(workflow, snap) else CONTINUE
        records, denials = admit_turn(
            turn,
            snap.last_seq + 1,
            snap,
            workflow,
            deps.toolbox,
            run.settings.tool_policy,
            expert=consults_expert(run),
        )
        notes = (ProgressNote(text=decision.thinking, totals=totals),) if decision.thinking else ()
        change = Change(
            entries=(turn, *denials),
            tool_calls=records,
            events=(*notes, *denial_notes(turn, denials)),
        )
        ending = tools.ends_at_once(records)
        if ending is not None:  # the turn and its ending call are one commit
            flow = await tools.end_with(change, ending)
        else:
            await _commit(run, deps, change)
            flow = Flow.CONTINUE
        deps.faults.hit("after_model_response")
        return Outcome(flow)


class OpenContinue:
    """At the workflow step's turn cap (``step_turn_limit``, or the state's own ``cap``):
    ask whether to go on (:func:`core.requests.go_on.open_continue`); ``wait``.
    ``count(run)``: the model turns the step has used (the loop's count; None: the
    cap); ``cap(run)``: the step's cap (None: the setting)."""

    def __init__(
        self,
        deps: RunDeps,
        count: Callable[[Run], int] | None = None,
        cap: Callable[[Run], int] | None = None,
    ) -> None:
        self._deps = deps
        self._count = count
        self._cap = cap

    async def go(self, run: Run) -> Outcome:
        """Commit the request to go on."""
        cap = run.settings.step_turn_limit if self._cap is None else self._cap(run)
        turns = cap if self._count is None else self._count(run)
        change = go_on.open_continue(run.snap, turns, run.opening, cap=cap)
        await _commit(run, self._deps, change)
        return WAIT


class InScope:
    """``body`` in a scope nested in the run's current one, for ``task``.

    ``ScopeEntered`` is committed first, unless the journal says the run is inside
    it already (it was killed there, or waited for a person there: it goes on
    inside); the run's scope is the child while ``body`` goes; ``ScopeLeft`` is
    committed when ``body`` ends other than by waiting or stopping (those keep it
    open), and the step then says ``continue`` with ``body``'s outcome name (and
    reason), so the steps after it go on; a scope left since the conversation's
    newest request is not gone through again. ``strategies``: the child's own
    ``context``, ``cache`` or ``retry``, and ``role``, ``workspace``, ``hands_back``
    (:meth:`core.run.scope.Scope.child`; those not named are its parent's; a
    ``role`` is journaled with the entry, the scope's view of its own). The
    ``after_scope_entered`` fault point is reached once the entry is committed.
    """

    KEYS = frozenset({"context", "cache", "retry", "role", "workspace", "hands_back"})
    """What a scope may have of its own (:meth:`core.run.scope.Scope.child`)."""

    def __init__(self, deps: RunDeps, id: str, task: str, body: Step, **strategies: Any) -> None:
        unknown = set(strategies) - self.KEYS
        if unknown:
            raise TypeError(f"a scope's own settings are {sorted(self.KEYS)}, not {unknown}")
        self._deps = deps
        self.id = id
        self.task = task
        self.body = body
        self._strategies = {key: INHERIT for key in self.KEYS} | strategies

    async def go(self, run: Run) -> Outcome:
        """Enter (or find itself entered), go through ``body``, leave; ``continue`` at once
        when the scope was left since the conversation's newest request."""
        deps, outer = self._deps, run.scope
        done = left_since_request(run.snap.journal, self.id)
        if done is not None:
            return Outcome(Flow.CONTINUE, done.outcome)
        scope = outer.child(self.id, self.task, **self._strategies)
        if self.id not in open_scopes(run.snap.journal):
            role = scope.role if scope.role != outer.role else None
            entered = ScopeEntered(scope=self.id, parent=outer.id, task=self.task, role=role)
            await _commit(run, deps, Change(entries=(entered,)))
            deps.faults.hit("after_scope_entered")
        run.scope = scope
        try:
            outcome = await self.body.go(run)
        finally:
            run.scope = outer
        if outcome.flow in (Flow.WAIT, Flow.SUSPENDED):
            return outcome
        left = ScopeLeft(scope=self.id, outcome=outcome.name or outcome.flow.value)
        await _commit(run, deps, Change(entries=(left,)))
        return Outcome(Flow.CONTINUE, outcome.name, outcome.reason)
