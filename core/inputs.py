"""What people give a conversation, as the engine takes it.

The hub turns chat events into these: a mention or a new message in an ended
conversation's thread is a :class:`Start`; any other message in the thread is a
:class:`Reply` (an answer, plan feedback, or a note mid-run); a reaction or button
on a pending request is a :data:`Decision`, :class:`Approve` or :class:`Reject`.
Stop is not an input: it jumps the queue (:meth:`core.run.engine.Engine.stop`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.people import Person


class Start(BaseModel):
    """A request that starts a run: the mention, or a new message after the end.

    ``may_continue``: the author may carry on a failed run where it stopped (the
    requester or an approver); anyone else's message starts over at the plan.
    ``delivery_key`` names the inbound message, marked handled once journaled.
    """

    model_config = ConfigDict(frozen=True)
    text: str
    author: Person
    may_continue: bool = False
    delivery_key: str | None = None


class Reply(BaseModel):
    """A message in the conversation's thread (fields as in :class:`Start`)."""

    model_config = ConfigDict(frozen=True)
    text: str
    author: Person
    may_continue: bool = False
    delivery_key: str | None = None


Inbox = Callable[[], Sequence[Reply]]
"""Returns (and removes) replies that arrived while the run works; called at turn boundaries."""


def delivery_keys(message: Start | Reply) -> tuple[str, ...]:
    """The delivery key of ``message``, if it has one, for ``Change.handled``."""
    return (message.delivery_key,) if message.delivery_key else ()


class Approve(BaseModel):
    """``by`` says yes to the pending request ``request_id`` (go on, run the call).

    ``call``: for a tool approval, the call's number (from 1) to decide alone;
    None decides every call still undecided.
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["approve"] = "approve"
    request_id: str
    by: Person
    call: int | None = None


class Reject(BaseModel):
    """``by`` says no to the pending request ``request_id`` (``call`` as in :class:`Approve`)."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["reject"] = "reject"
    request_id: str
    by: Person
    call: int | None = None


Decision = Annotated[Approve | Reject, Field(discriminator="kind")]
"""A person's decision on a pending request; ``kind`` tells which."""


class DecideOutcome(StrEnum):
    """What became of a decision: taken, too late, or about no open request."""

    DECIDED = "decided"
    ALREADY_DECIDED = "already_decided"
    NOT_OPEN = "not_open"
    NO_SUCH_CALL = "no_such_call"
    EXPIRED = "expired"
    """The request's time ran out before the sweeper came by: the caller queues its
    expiry (:meth:`core.run.engine.Engine.expire`) behind the conversation's run."""
