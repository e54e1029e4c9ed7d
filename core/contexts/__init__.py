"""Context strategies and notes: what a scope tells the model besides the conversation.

A pure room (docs/architecture.md, "Context strategies and notes"): it reads the
snapshot and imports only :mod:`core.vocabulary` and :mod:`core.tools.control` (whose
helpers read a plan and its progress), never :mod:`core.run`, which calls it::

    base        the ContextStrategy protocol (name, keep_turns, state, note); Note
    strategies  flat, task_list, task_tree, none; context_strategy(name) builds one
    plan        the approved plan read from the journal: steps, done, the step in hand
    notes       note_change (a ContextNote when the state changed), note lifetimes,
                what compaction leaves out (expired notes)
"""

from core.contexts.base import ContextStrategy, Note
from core.contexts.notes import expired_after, note_change
from core.contexts.strategies import (
    DEFAULT_KEEP_TURNS,
    STRATEGIES,
    Flat,
    NoContext,
    StrategyName,
    TaskList,
    TaskTree,
    context_strategy,
)

__all__ = [
    "DEFAULT_KEEP_TURNS",
    "STRATEGIES",
    "ContextStrategy",
    "Flat",
    "NoContext",
    "Note",
    "StrategyName",
    "TaskList",
    "TaskTree",
    "context_strategy",
    "expired_after",
    "note_change",
]
