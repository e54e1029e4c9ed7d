"""The runner protocol: the front end asks for a run, a runner carries it out, wherever.

The bot processes keep the platform connections, the inbox, the outbox and the
conversations' leases; a *runner* carries out one run of a conversation and streams
back what it committed until the run finishes or waits for a person
(docs/architecture.md, "Runners"). :class:`core.runner.local.LocalRunner` runs it as
an asyncio task in the bot process; the Ray runner (``bot/ray_runner.py``) on an
async actor of a Ray cluster. Whatever runs it, the run's commits go to the store
(journal and outbox in one transaction), fenced by the conversation's lease, so a
run's outcome never depends on the stream reaching the front end: the stream is
what the front end learns, not what it must keep.

The shape is the one of the LoopRunner protocol of agent frameworks (a request with
a deadline, an attempt number, a verified resume), narrowed to what threadbot's
runs take: a new request, a message in the thread, going on from the journal, a
request's time that ran out, and the interruption of calls a shutdown cut.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from enum import StrEnum
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.vocabulary.errors import CoreError
from core.vocabulary.inputs import ThreadMessage
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.run_events import RunEvent
from core.vocabulary.snapshot import ConversationSnapshot


class RunKind(StrEnum):
    """What a run is asked to do with its conversation."""

    START = "start"
    """A new request (a mention, a message after the run ended): ``message``."""
    REPLY = "reply"
    """A message in the thread while a run is active: ``message``, maybe ``answers``."""
    GO_ON = "go_on"
    """Go on from the journal (after a decision, a crash, a takeover)."""
    EXPIRE = "expire"
    """The open request ``request_id`` waited too long (the sweeper found it)."""
    INTERRUPT = "interrupt"
    """Record the calls still running as interrupted, saying ``reason`` (a shutdown cut them)."""


class RunRequest(BaseModel):
    """One run asked of a runner.

    ``conversation_id`` and ``run_id`` (unique per request: :meth:`Runner.cancel`
    names it). ``message``: the person's message (``START``, ``REPLY``). ``answers``:
    for a ``REPLY``, the id of the pending clarification or decision the message
    answers, as the front end saw it; the runner checks it against the pending request
    in the store before using the message as its answer, and a request no longer
    pending (answered, stopped, expired, another one asked since) makes the message an
    ordinary one (a note while the run works; :func:`verified_reply`). Without it the
    message answers what is pending when the run reads the conversation.
    ``request_id``: the request whose time ran out (``EXPIRE``); ``reason``: what an
    ``INTERRUPT`` records. ``deadline``: seconds the run may take from when the runner
    starts it (None: no limit); past it the run is cut as a stop cuts it and ends with
    :attr:`RunEnded.deadline_passed`. ``attempt``: 1, then one more each time the same
    input is sent out again after its runner was lost (:class:`RunnerLost`).
    ``snapshot``: the conversation as stored now, a hint a runner in the same process
    may start from instead of reading it (:class:`core.run.state.Handover`); a runner
    elsewhere drops it and reads the store.

    Raises :class:`pydantic.ValidationError` when a kind lacks what it needs.
    """

    model_config = ConfigDict(frozen=True)

    conversation_id: str = Field(min_length=1)
    run_id: str = Field(min_length=1)
    kind: RunKind
    message: ThreadMessage | None = None
    answers: str | None = None
    request_id: str | None = None
    reason: str = ""
    deadline: float | None = Field(default=None, gt=0)
    attempt: int = Field(default=1, ge=1)
    snapshot: ConversationSnapshot | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _complete(self) -> RunRequest:
        if self.kind in (RunKind.START, RunKind.REPLY) and self.message is None:
            raise ValueError(f"a {self.kind} run needs the message")
        if self.kind is RunKind.EXPIRE and not self.request_id:
            raise ValueError("an expire run needs the request_id")
        if self.answers is not None and self.kind is not RunKind.REPLY:
            raise ValueError("only a reply answers a pending request")
        return self


class RunUpdate(BaseModel):
    """What one commit of the run wrote: its run events (what the thread is shown, in
    the outbox already) and, when it moved, the conversation's lifecycle."""

    model_config = ConfigDict(frozen=True)

    events: tuple[RunEvent, ...] = ()
    lifecycle: Lifecycle | None = None


class RunEnded(BaseModel):
    """The last item of a run's stream: the run returned.

    ``lifecycle``: the conversation's as the run left it (``waiting`` for a person,
    ``done``, ``failed``, ``cancelled``; ``running`` when it ended at a shutdown's
    step boundary; None when the run committed nothing). ``deadline_passed``: it was
    cut at its deadline (its running calls recorded ``interrupted``).
    """

    model_config = ConfigDict(frozen=True)

    lifecycle: Lifecycle | None = None
    deadline_passed: bool = False


RunItem = RunUpdate | RunEnded
"""What a run's stream yields: updates, then one :class:`RunEnded`."""


class RunnerLost(CoreError):
    """The runner that carried out a run is gone (its actor or node died, its connection
    was lost): what the run committed is in the store, and the input is sent out again
    (the next attempt goes on from the journal, a call that was running marked
    ``unknown`` as after a restart)."""


class Runner(Protocol):
    """Carries out runs (docs/architecture.md, "Runners").

    :meth:`run` streams a run's items until it ends; leaving the stream early (the
    caller's task cancelled: a stop) cancels the run and returns once it has ended.
    Raises what the run raised: :class:`core.vocabulary.errors.LeaseLost` when the
    conversation's lease was taken over, :class:`RunnerLost` when the runner is gone.
    """

    def run(self, request: RunRequest) -> AsyncIterator[RunItem]:
        """Carry out ``request``; yields :class:`RunUpdate` items, then one :class:`RunEnded`."""
        ...

    async def cancel(self, run_id: str) -> bool:
        """Stop the run ``run_id`` at once (its model call cancelled, its command killed);
        returns once it has ended, True if it was running here."""
        ...

    async def suspend(self) -> None:
        """Start no new step in any run: each ends after the step it is in (shutting down)."""
        ...
