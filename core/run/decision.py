"""A model turn as a typed decision: what the model thought, what it does, in which order.

Every model turn (:class:`core.vocabulary.entries.AssistantTurn`) is read once into a
:class:`ModelDecision`: its text is the model's thinking (said in the thread as a
progress note when it calls tools, or the answer when it calls none), its
``tool_use`` blocks are its actions, in the model's order, each with its tool's
kind (:class:`core.models.base.ToolKind`: data, as pydantic-ai's ``ToolKind`` is).
The several ``tool_use`` blocks of one turn are independent of each other (the
Messages API gives every result back together, in the next user message:
https://docs.anthropic.com/en/docs/build-with-claude/tool-use), so read-only ones
run side by side (:meth:`ModelDecision.side_by_side`) and their results are
journaled in the model's order, whichever finished first.

Named ``ModelDecision``, not ``Decision``: a decision in threadbot's vocabulary is a
person's (:class:`core.vocabulary.inputs.Decision`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.models.base import ToolKind
from core.vocabulary.entries import AssistantTurn, ToolCall
from core.vocabulary.tool_records import ToolCallRecord


@dataclass(frozen=True)
class ToolAction:
    """One ``tool_use`` block of a turn: the call and its tool's kind."""

    call: ToolCall
    kind: ToolKind


@dataclass(frozen=True)
class ModelDecision:
    """One model turn, typed: ``thinking`` (its text, stripped), ``actions`` (its tool
    calls in the model's order) and ``independent`` (True when there are several:
    the calls of one turn never see each other's results)."""

    thinking: str
    actions: tuple[ToolAction, ...]

    @classmethod
    def of(cls, turn: AssistantTurn, kind: Callable[[str], ToolKind]) -> ModelDecision:
        """``turn`` read as a decision; ``kind(name)`` is the toolbox's kind of a tool (an
        unknown tool's kind is the toolbox's answer for it: admission refuses it)."""
        actions = tuple(ToolAction(call=c, kind=kind(c.name)) for c in turn.tool_calls)
        return cls(thinking=turn.text, actions=actions)

    @property
    def independent(self) -> bool:
        """Whether the actions may run in any order (several calls of one turn)."""
        return len(self.actions) > 1

    @property
    def answers(self) -> bool:
        """A turn without tool calls is the run's answer."""
        return not self.actions

    @property
    def order(self) -> dict[str, int]:
        """Each call's place in the model's order, by its ``tool_use`` id."""
        return {a.call.id: i for i, a in enumerate(self.actions)}

    @staticmethod
    def side_by_side(
        runnable: Sequence[ToolCallRecord], kind: Callable[[str], ToolKind]
    ) -> list[ToolCallRecord]:
        """The calls that run now, together: the first of ``runnable`` (in the model's
        order), and when it is read-only, the read-only calls right after it (a
        control call, or one that may change something, runs alone in its place)."""
        first = runnable[0]
        batch = [first]
        if first.read_only:
            for record in runnable[1:]:
                if not record.read_only or kind(record.name) is ToolKind.CONTROL:
                    break
                batch.append(record)
        return batch
