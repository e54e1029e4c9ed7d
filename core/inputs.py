"""What people give a conversation, as the engine takes it.

The hub turns chat events into these: a mention or a new message in an ended
conversation's thread is a :class:`Start`; any other message in the thread is a
:class:`Reply` (an answer, plan feedback, or a note mid-run); a reaction or button
on a pending request is a :class:`Decision`. Stop is not an input: it jumps the
queue (:meth:`core.engine.Engine.stop`).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from core.journal import Person


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


class Decision(BaseModel):
    """A person's approve (``approved``) or reject on the pending request ``request_id``."""

    model_config = ConfigDict(frozen=True)
    request_id: str
    approved: bool
    by: Person
    call: int | None = None
    """For a tool approval: the call's number (from 1) to decide alone; None decides
    every call still undecided."""


class DecideOutcome(StrEnum):
    """What became of a decision: taken, too late, or about no open request."""

    DECIDED = "decided"
    ALREADY_DECIDED = "already_decided"
    NOT_OPEN = "not_open"
    NO_SUCH_CALL = "no_such_call"
