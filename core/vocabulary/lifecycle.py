"""Conversation lifecycle status, kept apart from the workflow position; its table of moves.

The lifecycle says whether something runs (docs/architecture.md, "Conversation
lifecycle and workflow position"). Every change of a conversation's status goes
through :func:`move`, checked against :data:`MOVES`; nothing else puts a status
into a :class:`core.vocabulary.journal.Change` (a test walks the code for it)::

    idle                      -> running
    running                   -> waiting(kind) | done | failed | cancelled
    waiting(kind)             -> running (a person answered) | waiting(kind) (a plan
                                 rejected: what should change?) | failed | cancelled
    done | failed | cancelled -> running (a new message in the thread)

A move the table does not allow raises :class:`core.vocabulary.errors.IllegalTransition`
and writes nothing. The workflow position (``planning``, ``approval``, ...) lives in
:mod:`core.workflows` and is data, not one of these states.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from core.vocabulary.errors import IllegalTransition


class Lifecycle(StrEnum):
    """Whether a run holds the conversation, waits for a person, or has ended."""

    IDLE = "idle"
    RUNNING = "running"
    WAITING = "waiting"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class WaitKind(StrEnum):
    """What a waiting conversation waits for; each is one pending request."""

    PLAN_APPROVAL = "plan_approval"
    TOOL_APPROVAL = "tool_approval"
    QUESTION = "question"
    CONTINUE = "continue"
    RETRY = "retry"
    ESCALATION = "escalation"
    """The run is stuck (its commands keep failing) and asks the people in the thread."""
    TIMER = "timer"
    """A workflow's wait for a duration or until a time (a durable timer: the request's
    ``expires_at``, fired by the sweeper)."""


ENDED = frozenset({Lifecycle.DONE, Lifecycle.FAILED, Lifecycle.CANCELLED})
"""Statuses that end a run (not the conversation: a new message starts the next run)."""


class Status(BaseModel):
    """A lifecycle status with its waiting kind, e.g. ``waiting(question)``.

    Raises ``ValueError`` when ``wait`` is given without ``WAITING`` or missing with it.
    """

    model_config = ConfigDict(frozen=True)

    lifecycle: Lifecycle
    wait: WaitKind | None = None

    def model_post_init(self, _context: object) -> None:
        if (self.lifecycle is Lifecycle.WAITING) != (self.wait is not None):
            raise ValueError("a wait kind goes with the waiting lifecycle, and only with it")

    def __str__(self) -> str:
        return f"waiting({self.wait})" if self.wait else str(self.lifecycle)

    @property
    def active(self) -> bool:
        """True while a run holds the conversation or it waits for a person."""
        return self.lifecycle in (Lifecycle.RUNNING, Lifecycle.WAITING)


IDLE = Status(lifecycle=Lifecycle.IDLE)
RUNNING = Status(lifecycle=Lifecycle.RUNNING)
DONE = Status(lifecycle=Lifecycle.DONE)
FAILED = Status(lifecycle=Lifecycle.FAILED)
CANCELLED = Status(lifecycle=Lifecycle.CANCELLED)


def waiting(kind: WaitKind) -> Status:
    """The ``waiting(kind)`` status."""
    return Status(lifecycle=Lifecycle.WAITING, wait=kind)


L = Lifecycle
MOVES: Mapping[Lifecycle, frozenset[Lifecycle]] = {
    L.IDLE: frozenset({L.RUNNING}),
    L.RUNNING: frozenset({L.WAITING, L.DONE, L.FAILED, L.CANCELLED}),
    L.WAITING: frozenset({L.RUNNING, L.WAITING, L.FAILED, L.CANCELLED}),
    **{ended: frozenset({L.RUNNING}) for ended in ENDED},
}
"""``{lifecycle: lifecycles it may move to}`` (a waiting kind may change with a wait)."""


def allowed(before: Status, after: Status) -> bool:
    """Whether the table lets a conversation in ``before`` move to ``after``."""
    return after.lifecycle in MOVES[before.lifecycle]


def move(before: Status, to: Status) -> Status:
    """``to``, the status a change gives a conversation now in ``before``.

    The one writer of a conversation's lifecycle: a change sets its ``status`` with
    what this returns. Raises :class:`IllegalTransition` when :data:`MOVES` does
    not allow the move (a bug: nothing is written).
    """
    if not allowed(before, to):
        raise IllegalTransition(f"a conversation {before} cannot move to {to}")
    return to
