"""The agent, composed: ``Loop(until done) { tool steps -> notes -> model step }``.

Built from the primitives of :mod:`core.run.compose` and the steps of
:mod:`core.run.steps` (docs/architecture.md, "The agent as a composition")::

    Loop(until: not running, or the process is stopping;
         cap: the state's cap, else settings.step_turn_limit model turns in the
              workflow step, counted
              since the step was entered or a person last gave the run work;
         on cap: OpenContinue)
      Sequence
        Delegating                    the delegation the run waited or died in, to its end
        ToolSteps                     the calls the last turn decided (a crashed turn's too;
                                      a message that interrupts cancels those not run)
        Running                       a decision beside the run may have ended it
        States                        the workflow's own states (actions, people's
                                      steps, waits, ends) until an agent state
        Escalate                      stuck (failed commands in a row): the expert, or
                                      the people
        Stuck                         stuck on nudges (a second early finish or reply
                                      in prose): the same
        TakeNotes, StepTold           what came in meanwhile; where the model is
        OverBudget                    a budget used up: ask to go on
        Branch(Sequence(ContextNoted, Compact, ModelStep),
               model_failed: ModelFailed)

The round starts with the tool steps (after a delegation the run was in: the calls
its expert's last turn decided run in the expert's workspace, :mod:`core.run.delegation`),
so a run resumed after a crash or a person's
decision first finishes the calls its last turn decided, and the cap is checked
between a model turn and its tool steps. The count is derived from the journal
(:func:`turns_in_step`), so a run killed and restarted, or one that waited for a
person, counts the same as one that went straight through.
"""

from __future__ import annotations

import collections.abc

from core.run.compose import CONTINUE, DONE, Branch, Loop, Outcome, Sequence, Step
from core.run.deps import RunDeps
from core.run.escalation import Delegating, Escalate, Stuck
from core.run.failing import ModelFailed
from core.run.state import Run
from core.run.states import States
from core.run.steps import (
    MODEL_FAILED,
    Compact,
    ContextNoted,
    ModelStep,
    OpenContinue,
    OverBudget,
    StepTold,
    TakeNotes,
    ToolSteps,
)
from core.vocabulary.entries import (
    AssistantTurn,
    DecisionEntry,
    JournalRecord,
    StepEntered,
    UserText,
)
from core.vocabulary.inputs import Inbox
from core.vocabulary.lifecycle import Lifecycle


def turns_in_step(journal: collections.abc.Sequence[JournalRecord]) -> int:
    """Model turns (:class:`core.vocabulary.entries.AssistantTurn` entries) journaled in
    the run's current workflow step: since the step was entered
    (:class:`core.vocabulary.entries.StepEntered`) or since a person last gave the run
    its work, whichever is later. A person gives work with a request, an answer, plan
    feedback (:class:`core.vocabulary.entries.UserText` other than a note) or a decision
    (:class:`core.vocabulary.entries.DecisionEntry`: an approval, "go on"). Read from the
    end, so it costs the turns since, not the journal.

    The expert's turns in a delegation count toward its own cap, not this one
    (:mod:`core.run.expert`). A position without instructions journals no
    ``StepEntered`` (the default workflow's are all entered on a person's word anyway:
    a request, an approval, feedback)."""
    turns = 0
    for record in reversed(journal):
        entry = record.entry
        if _counts(entry):
            turns += 1
        elif _starts_count(entry):
            break
    return turns


def _counts(entry: object) -> bool:
    """Whether ``entry`` is a model turn the run's cap counts (not the expert's, nor a
    turn the workflow made itself)."""
    return isinstance(entry, AssistantTurn) and not entry.experts and not entry.workflow


def _starts_count(entry: object) -> bool:
    """Whether the turn count starts again after ``entry``: a step entered, or a person's
    word that gives the run work."""
    return isinstance(entry, StepEntered | DecisionEntry) or (
        isinstance(entry, UserText) and entry.role != "note"
    )


class TurnCount:
    """:func:`turns_in_step` of a run's journal as it grows: each call reads only the
    records appended since the last (a long run's journal holds hundreds of turns since
    its approval: reading them all before every turn made each turn slower than the
    one before). Any other journal (one read back from the store that does not go on
    from the records read so far) is counted again whole."""

    def __init__(self) -> None:
        self._read = 0
        self._last_seq: int | None = None
        self._turns = 0

    def __call__(self, journal: collections.abc.Sequence[JournalRecord]) -> int:
        """The count for ``journal``."""
        read = self._read
        if read == 0 or len(journal) < read or journal[read - 1].seq != self._last_seq:
            self._turns = turns_in_step(journal)
        else:
            for record in journal[read:]:
                if _counts(record.entry):
                    self._turns += 1
                elif _starts_count(record.entry):
                    self._turns = 0
        self._read = len(journal)
        self._last_seq = journal[-1].seq if journal else None
        return self._turns


class Running:
    """``continue`` while the conversation is ``running``, else ``done``: a decision or a
    stop that landed beside the run may have moved it."""

    async def go(self, run: Run) -> Outcome:
        """Whether the run goes on."""
        return CONTINUE if run.snap.status.lifecycle is Lifecycle.RUNNING else DONE


def step_cap(run: Run) -> int:
    """Model turns the run's current state allows: the workflow state's ``cap``, else the
    ``step_turn_limit`` setting."""
    return run.workflow.state(run.snap.position).cap or run.settings.step_turn_limit


def agent(deps: RunDeps, inbox: Inbox | None = None) -> Step:
    """The agent loop of a run (see the module docstring); ``inbox`` gives the messages
    that came while it works (None: none come)."""

    counted = TurnCount()

    def stops(run: Run) -> bool:
        return deps.suspended() or run.snap.status.lifecycle is not Lifecycle.RUNNING

    return Loop(
        Sequence(
            Delegating(deps),
            ToolSteps(deps, inbox),
            Running(),
            States(deps),
            Escalate(deps),
            Stuck(deps),
            TakeNotes(deps, inbox),
            StepTold(deps),
            OverBudget(deps),
            Branch(
                Sequence(ContextNoted(deps), Compact(deps), ModelStep(deps)),
                {MODEL_FAILED: lambda failed: ModelFailed(deps, failed)},
            ),
        ),
        until=stops,
        cap=lambda run: step_cap(run),
        count=lambda run: counted(run.snap.journal),
        on_cap=OpenContinue(deps, lambda run: counted(run.snap.journal), cap=step_cap),
    )
