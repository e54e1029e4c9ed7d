"""What a context strategy is: the state it shows the model, and how much compaction keeps.

A strategy is pure: it reads a conversation's snapshot (and the path of nested scope
tasks it is asked about) and says what the model should be told now, as a
:class:`Note` with a lifetime; :func:`core.contexts.notes.note_change` journals it
when it changed (docs/architecture.md, "Context strategies and notes").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from core.vocabulary.snapshot import ConversationSnapshot


@dataclass(frozen=True)
class Note:
    """Information for the model with a lifetime.

    ``text``: what the model reads; ``lifetime_turns``: the model turns after the note
    was journaled during which it holds (None: no limit); ``task``: the plan step it
    is about (its text): the note expires when that step is done (None: none).
    """

    text: str
    lifetime_turns: int | None = None
    task: str | None = None


class ContextStrategy(Protocol):
    """How a scope's context is kept (docs/architecture.md, "Context strategies and notes").

    ``name``: as in the settings (``flat``, ``task_list``, ``task_tree``, ``none``).
    ``keep_turns``: the newest model turns compaction keeps whole (0: none, the summary
    stands for all; None: compaction leaves this scope's history whole).
    """

    @property
    def name(self) -> str:
        """The strategy's name, as the settings and the journaled notes give it."""
        ...

    @property
    def keep_turns(self) -> int | None:
        """Newest model turns compaction keeps whole (None: it trims nothing)."""
        ...

    def state(self, snapshot: ConversationSnapshot, path: Sequence[str]) -> str | None:
        """The text the model should see now (None: nothing); ``path``: the tasks of the
        nested scopes from the run's down to the current one (empty for the run)."""
        ...

    def note(self, snapshot: ConversationSnapshot, path: Sequence[str]) -> Note | None:
        """:meth:`state` as a :class:`Note`, with its lifetime (None: nothing to say)."""
        ...
