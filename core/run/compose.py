"""The execution primitives a run is composed of: steps, sequences, loops and branches.

The agent is not a loop class that grows: it is ``Loop(until done) { model step ->
tool steps }`` built from these few pieces (:mod:`core.run.agent`), and a workflow,
a role or an escalation composes them instead of editing the agent
(docs/architecture.md, "The agent as a composition"). Each primitive is a small
class with one async method, ``go(run)``, that takes the run
(:class:`core.run.state.Run`) and returns an :class:`Outcome`:

- a :class:`Step` does one thing: one model call (:class:`core.run.steps.ModelStep`),
  one tool call (:class:`core.run.steps.ToolStep`), one commit;
- :class:`Sequence` goes through its steps while each says ``continue``;
- :class:`Loop` repeats its body until a condition holds, never past its cap; the
  count it compares with the cap is derived from the journal (``count``), never
  kept in memory, so a run that waited for a person or was killed counts the same;
- :class:`Branch` goes on with the step named by the outcome of its first one.

What a primitive needs (the journal, the model, the tools) it is given when it is
built; what it knows is the run's. None keeps state of its own across turns.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from core.run.state import Run


class Flow(StrEnum):
    """Where a run goes after a step: on to the next one, wait for a person, done.

    ``SUSPENDED``: the process is shutting down; the run ends here and goes on from
    the store at the next start (the conversation stays ``running``).
    """

    CONTINUE = "continue"
    WAIT = "wait"
    DONE = "done"
    SUSPENDED = "suspended"


@dataclass(frozen=True)
class Outcome:
    """What a step did: its ``flow``, and a ``name`` a :class:`Branch` may choose by
    (``"answered"``, ``"model_failed"``...; empty when there is nothing to choose).
    ``reason``: words for the step that handles it (a model failure's message)."""

    flow: Flow
    name: str = ""
    reason: str = ""

    @property
    def goes_on(self) -> bool:
        """Whether the next step of a sequence runs."""
        return self.flow is Flow.CONTINUE


CONTINUE = Outcome(Flow.CONTINUE)
WAIT = Outcome(Flow.WAIT)
DONE = Outcome(Flow.DONE)
SUSPENDED = Outcome(Flow.SUSPENDED)


class Step(Protocol):
    """Anything a run can go through: one async method that takes the run and says what
    happened. A composite (:class:`Sequence`, :class:`Loop`, :class:`Branch`) is a
    step too, so they nest."""

    async def go(self, run: Run) -> Outcome:
        """Do this step for ``run``; what happened."""
        ...


class Do:
    """A step made of a function: ``Do("take notes", take_notes)`` runs
    ``await take_notes(run)`` and returns its outcome."""

    def __init__(self, name: str, work: Callable[[Run], Awaitable[Outcome]]) -> None:
        self.name = name
        self._work = work

    async def go(self, run: Run) -> Outcome:
        """``work(run)``'s outcome."""
        return await self._work(run)

    def __repr__(self) -> str:
        return f"Do({self.name!r})"


class Sequence:
    """Its steps in order, while each says ``continue``; the first other outcome ends
    it, and is its outcome (``continue`` when all went on)."""

    def __init__(self, *steps: Step) -> None:
        self.steps = steps

    async def go(self, run: Run) -> Outcome:
        """Go through the steps; the outcome of the one that stopped, else ``continue``."""
        for step in self.steps:
            outcome = await step.go(run)
            if not outcome.goes_on:
                return outcome
        return CONTINUE


class Loop:
    """``body`` again and again until ``until(run)`` holds, at most ``cap(run)`` times.

    ``count(run)``: how many times the body has gone round, derived from what the run
    knows (its journal), so a restarted or resumed run counts from where it was;
    when it reaches the cap, ``on_cap`` runs instead (a request to go on, say) and
    its outcome is the loop's. A body outcome other than ``continue`` ends the loop
    with it. ``until`` is asked before each round: the loop ends ``continue``
    when it holds (the caller's next step decides what follows).

    A cap is required: a loop without one is a run that never ends.
    """

    def __init__(
        self,
        body: Step,
        *,
        until: Callable[[Run], bool],
        cap: Callable[[Run], int],
        count: Callable[[Run], int],
        on_cap: Step,
    ) -> None:
        self.body = body
        self._until = until
        self._cap = cap
        self._count = count
        self.on_cap = on_cap

    async def go(self, run: Run) -> Outcome:
        """Round after round; see the class docstring for when it ends."""
        while not self._until(run):
            if self._count(run) >= self._cap(run):
                return await self.on_cap.go(run)
            outcome = await self.body.go(run)
            if not outcome.goes_on:
                return outcome
        return CONTINUE


class Branch:
    """``step``, then the step ``cases`` gives for its outcome's name (each case is
    given the outcome that chose it: a failure's reason, say); an outcome no case
    names is the branch's own."""

    def __init__(self, step: Step, cases: Mapping[str, Callable[[Outcome], Step]]) -> None:
        self.step = step
        self.cases = dict(cases)

    async def go(self, run: Run) -> Outcome:
        """The chosen case's outcome, or the first step's when none is chosen."""
        outcome = await self.step.go(run)
        case = self.cases.get(outcome.name)
        if case is None:
            return outcome
        return await case(outcome).go(run)
