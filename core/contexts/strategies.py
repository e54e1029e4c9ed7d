"""The four context strategies: ``flat``, ``task_list``, ``task_tree`` and ``none``.

- ``flat``: the conversation as it went, nothing more; compaction keeps the newest
  ``keep_turns`` turns whole (2 by default: the engine as it always was).
- ``task_list``: the steps of the approved plan, pending and done, restated whenever
  one gets done (:mod:`core.contexts.plan`).
- ``task_tree``: the path from the root task (the conversation's request) through the
  plan step in hand to the current nested scope's task; the note expires when its
  step is done.
- ``none``: no state; compaction keeps no turn whole (the summary stands for all).

See docs/architecture.md, "Context strategies and notes".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from core.contexts.base import ContextStrategy, Note
from core.contexts.plan import current_plan, request_of
from core.vocabulary.snapshot import ConversationSnapshot

StrategyName = Literal["flat", "task_list", "task_tree", "none"]
"""A context strategy's name, as the settings give it."""

STRATEGIES: tuple[str, ...] = get_args(StrategyName)
"""Every strategy's name, the default (``flat``) first."""

DEFAULT_KEEP_TURNS = 2
"""Turns compaction keeps whole by default (``core.run.compaction.KEEP_TURNS``)."""


@dataclass(frozen=True)
class Flat:
    """``flat``: no state; compaction keeps the newest ``keep_turns`` turns."""

    keep_turns: int | None = DEFAULT_KEEP_TURNS
    name: str = "flat"

    def state(self, snapshot: ConversationSnapshot, path: Sequence[str]) -> str | None:
        """Nothing: the conversation is all the model reads."""
        return None

    def note(self, snapshot: ConversationSnapshot, path: Sequence[str]) -> Note | None:
        """Nothing."""
        return None


@dataclass(frozen=True)
class NoContext:
    """``none``: no state; compaction keeps no turn whole."""

    keep_turns: int | None = 0
    name: str = "none"

    def state(self, snapshot: ConversationSnapshot, path: Sequence[str]) -> str | None:
        """Nothing."""
        return None

    def note(self, snapshot: ConversationSnapshot, path: Sequence[str]) -> Note | None:
        """Nothing."""
        return None


@dataclass(frozen=True)
class TaskList:
    """``task_list``: the approved plan's steps, ``[x]`` done, ``[>]`` in hand, ``[ ]`` pending.

    For plan v1 of three steps with the first done::

        Task list (plan v1):
        [x] 1. Write the log
        [>] 2. Ask for the colour
        [ ] 3. Write the report

    None before a plan is approved.
    """

    keep_turns: int | None = DEFAULT_KEEP_TURNS
    lifetime_turns: int | None = None
    """Model turns each of its notes holds (None: until it changes)."""
    name: str = "task_list"

    def state(self, snapshot: ConversationSnapshot, path: Sequence[str]) -> str | None:
        """The task list, or None when no plan was approved since the newest request
        (``path`` is not shown: the list is the plan's)."""
        plan = current_plan(snapshot)
        if plan is None:
            return None
        lines = [f"Task list (plan v{plan.version}):"]
        for index, step in enumerate(plan.steps):
            mark = "x" if index < plan.done else ">" if index == plan.current else " "
            lines.append(f"[{mark}] {index + 1}. {step}")
        return "\n".join(lines)

    def note(self, snapshot: ConversationSnapshot, path: Sequence[str]) -> Note | None:
        """The task list, held until it changes (or for ``lifetime_turns``)."""
        text = self.state(snapshot, path)
        return None if text is None else Note(text, self.lifetime_turns)


@dataclass(frozen=True)
class TaskTree:
    """``task_tree``: ``Task path: <request> > <step N. text> > <scope task> > ...``.

    The root is the first line of the conversation's newest request; then the plan
    step in hand (when a plan was approved and a step is left); then ``path``, the
    nested scopes' tasks. None when there is no request.
    """

    keep_turns: int | None = DEFAULT_KEEP_TURNS
    lifetime_turns: int | None = None
    """Model turns each of its notes holds (None: until it changes)."""
    name: str = "task_tree"

    def state(self, snapshot: ConversationSnapshot, path: Sequence[str]) -> str | None:
        """The path from the root task to the current one, or None without a request."""
        parts = self._path(snapshot, path)
        return None if parts is None else "Task path: " + " > ".join(parts)

    def note(self, snapshot: ConversationSnapshot, path: Sequence[str]) -> Note | None:
        """The path; it expires when the plan step on it is done."""
        text = self.state(snapshot, path)
        if text is None:
            return None
        plan = current_plan(snapshot)
        step = plan.steps[plan.current] if plan is not None and plan.current is not None else None
        return Note(text, self.lifetime_turns, task=step)

    @staticmethod
    def _path(snapshot: ConversationSnapshot, path: Sequence[str]) -> list[str] | None:
        root = request_of(snapshot)
        if not root:
            return None
        parts = [root]
        plan = current_plan(snapshot)
        if plan is not None and plan.current is not None:
            parts.append(f"step {plan.current + 1}. {plan.steps[plan.current]}")
        parts.extend(path)
        return parts


def context_strategy(name: str, *, keep_turns: int | None = DEFAULT_KEEP_TURNS) -> ContextStrategy:
    """The strategy called ``name`` keeping ``keep_turns`` turns at compaction (``none``
    keeps none whatever it is given). Raises ``ValueError`` for an unknown name."""
    match name:
        case "flat":
            return Flat(keep_turns)
        case "task_list":
            return TaskList(keep_turns)
        case "task_tree":
            return TaskTree(keep_turns)
        case "none":
            return NoContext()
    raise ValueError(f"unknown context strategy {name!r}; known: {', '.join(STRATEGIES)}")
