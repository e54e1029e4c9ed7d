"""Conversation lifecycle status, kept apart from the workflow position.

The lifecycle says whether something runs (docs/architecture.md, "Conversation
lifecycle and workflow position")::

    idle -> running -> waiting(kind) | done | failed | cancelled
    waiting(kind) --person answers--> running
    done | failed | cancelled --new message in the thread--> running

The workflow position (``planning``, ``approval``, ...) lives in
:mod:`core.workflow` and is data, not one of these states.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict


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
