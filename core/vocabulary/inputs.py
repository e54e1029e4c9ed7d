"""What people give a conversation, as the engine takes it.

The hub turns chat events into these: a person's message in the thread is a
:class:`ThreadMessage`, whether it starts a run (the mention, a new message after
the end: :meth:`core.run.engine.Engine.start`) or comes while the conversation is
active (an answer, plan feedback, a note mid-run: :meth:`core.run.engine.Engine.reply`);
a reaction or button on a pending request is a :data:`Decision`, :class:`Approve`
or :class:`Reject`, or :class:`Choose` for one of a question's options.
Stop is not an input: it jumps the queue (:meth:`core.run.engine.Engine.stop`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from core.vocabulary.approvals import ApprovalScope
from core.vocabulary.audit import Means
from core.vocabulary.entries import UserText
from core.vocabulary.people import Person


class SharedFile(BaseModel):
    """A file shared with a message, fetched by the caller (the hub, through the
    platform's adapter): core never learns where it came from.

    ``name``: the file name as the person gave it (not yet safe as a path);
    ``media_type``: the MIME type the platform gave (``application/octet-stream``
    when none; the engine trusts the bytes over it for images); ``size``: bytes, the
    length of ``data`` when fetched, else the platform's figure (None: unknown);
    ``data``: the file's bytes, None when it was not fetched; ``problem``: why not
    (a cap it went over, a failed download), said to the model in its place.
    """

    model_config = ConfigDict(frozen=True)
    name: str
    media_type: str = "application/octet-stream"
    size: int | None = None
    data: bytes | None = None
    problem: str | None = None


class ThreadMessage(BaseModel):
    """A person's message in the conversation's thread: the mention, a new message
    after the end, an answer, plan feedback, or a note mid-run.

    ``may_continue``: the author may carry on a failed run where it stopped (the
    requester or an approver); anyone else's message starts over at the plan, and
    after a stop only theirs starts the conversation again (:mod:`core.run.restart`).
    ``delivery_key`` names the inbound message, marked handled once journaled.
    ``files``: files shared with the message, fetched; the engine reads them into
    ``blocks`` before it journals the message (:class:`core.files.FileReader`), and
    ``blocks`` are what the model reads of them: Messages API content blocks, kept
    as :attr:`core.vocabulary.entries.UserText.files`.
    ``interrupts``: sent mid-run in a conversation whose busy mode is ``interrupt``
    by someone who may stop it: the run's turn stops at its next tool boundary
    (:mod:`core.run.interrupting`). ``queued``: kept for the run after the one at
    work (busy mode ``queue``), or several such :func:`joined`: it was written before
    the person saw what that run asks, so it is taken as words, never as the pick of a
    question's option (:func:`core.requests.question.answer`). ``also_handled``: the
    delivery keys of the messages :func:`joined` into this one (handled with it).
    """

    model_config = ConfigDict(frozen=True)
    text: str
    author: Person
    may_continue: bool = False
    delivery_key: str | None = None
    files: tuple[SharedFile, ...] = ()
    blocks: tuple[dict[str, Any], ...] = ()
    interrupts: bool = False
    queued: bool = False
    also_handled: tuple[str, ...] = ()


Inbox = Callable[[], Sequence[ThreadMessage]]
"""Returns (and removes) messages that arrived while the run works; called at turn boundaries."""


@runtime_checkable
class InterruptibleInbox(Protocol):
    """An :data:`Inbox` that also tells, without taking anything, whether a message
    that interrupts the run (:attr:`ThreadMessage.interrupts`) waits in it
    (docs/architecture.md, "What a person sees")."""

    def __call__(self) -> Sequence[ThreadMessage]:
        """Return (and remove) the messages that arrived while the run works."""
        ...

    def interrupting(self) -> bool:
        """Whether a message that interrupts the run waits (nothing is taken)."""
        ...


def delivery_keys(message: ThreadMessage) -> tuple[str, ...]:
    """The delivery keys of ``message`` (its own, if any, then those of the messages
    joined into it), for ``Change.handled``."""
    own = (message.delivery_key,) if message.delivery_key else ()
    return (*own, *message.also_handled)


def said_to_run(
    messages: Sequence[ThreadMessage], *, instructions: bool = True
) -> tuple[tuple[UserText, ...], tuple[str, ...]]:
    """``messages`` sent while a run worked, as the run journals them: one ``note`` each
    (an interrupting one the person's ``instruction``, unless not ``instructions``: a
    stopped run takes none), its files' blocks with it; and their delivery keys, for
    ``Change.handled``."""
    entries = tuple(
        UserText(
            author=m.author,
            text=m.text,
            role="instruction" if instructions and m.interrupts else "note",
            files=m.blocks,
        )
        for m in messages
    )
    return entries, tuple(k for m in messages for k in delivery_keys(m))


def joined(messages: Sequence[ThreadMessage]) -> ThreadMessage:
    """``messages`` (at least one; queued while a run worked) as one request, in order.

    Their words are joined with a blank line between, each prefixed with its author's
    name when they are not all one person's; their files are kept in order. The first
    message gives the author, ``may_continue`` and delivery key; the others' keys are
    ``also_handled``; it is ``queued`` when one of them is. Raises ``ValueError`` for no messages.
    """
    if not messages:
        raise ValueError("nothing to join")
    first = messages[0]
    if len(messages) == 1:
        return first
    one_author = all(m.author.id == first.author.id for m in messages)
    text = "\n\n".join(m.text if one_author else f"{m.author.name}: {m.text}" for m in messages)
    keys = tuple(k for m in messages[1:] for k in delivery_keys(m))
    return first.model_copy(
        update={
            "text": text,
            "files": tuple(f for m in messages for f in m.files),
            "blocks": tuple(b for m in messages for b in m.blocks),
            "also_handled": (*first.also_handled, *keys),
            "interrupts": False,
            "queued": any(m.queued for m in messages),
        }
    )


class Approve(BaseModel):
    """``by`` says yes to the pending request ``request_id`` (go on, run the call).

    ``call``: for a tool approval, the call's number (from 1) to decide alone;
    None decides every call still undecided. ``means``: how ``by`` gave it, as the
    platform's adapter said (recorded in the audit trail, never interpreted; None: not
    said), in every kind of decision. ``scope``: for a tool approval, how far the
    approval reaches (:mod:`core.vocabulary.approvals`): this call (a reaction's), the
    rest of the run, or always in the channel.
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["approve"] = "approve"
    request_id: str
    by: Person
    call: int | None = None
    means: Means | None = None
    scope: ApprovalScope = ApprovalScope.ONCE


class Reject(BaseModel):
    """``by`` says no to the pending request ``request_id`` (``call`` and ``means`` as in
    :class:`Approve`)."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["reject"] = "reject"
    request_id: str
    by: Person
    call: int | None = None
    means: Means | None = None


class Choose(BaseModel):
    """``by`` picks option ``option`` (from 1) of the question ``request_id`` (an
    ``ask_user`` call with options), by button or number reaction."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["choose"] = "choose"
    request_id: str
    by: Person
    option: int = Field(ge=1)
    means: Means | None = None


Decision = Annotated[Approve | Reject | Choose, Field(discriminator="kind")]
"""A person's decision on a pending request; ``kind`` tells which."""


class StopOutcome(StrEnum):
    """What became of a stop (:meth:`core.run.engine.Engine.stop`): the run it was
    aimed at was stopped; nothing was active; or the run it was aimed at had ended
    (on its own, or stopped by someone else), a later one maybe working, and nothing
    was stopped; ``ALREADY_STOPPED`` when that run ended by a stop."""

    STOPPED = "stopped"
    NOTHING_ACTIVE = "nothing_active"
    ENDED = "ended"
    ALREADY_STOPPED = "already_stopped"


class DecideOutcome(StrEnum):
    """What became of a decision (:meth:`core.run.engine.Engine.decide`): taken, too
    late, or about no open request."""

    DECIDED = "decided"
    ALREADY_DECIDED = "already_decided"
    """Another decision won (compare-and-set), or the call was decided already."""
    NOT_OPEN = "not_open"
    """The request is unknown, superseded, cancelled, expired or answered in words only
    (a :class:`Choose` decides only a question)."""
    NO_SUCH_CALL = "no_such_call"
    """A call number the tool approval does not have, or an option the question does not."""
    SCOPE_NOT_OFFERED = "scope_not_offered"
    """An approval for the run or the channel where the settings offer no such scope
    (``approval_scopes``), or on a request that is not a tool approval."""
    EXPIRED = "expired"
    """The request's time ran out before the sweeper came by (nothing written): the
    caller queues its expiry (:meth:`core.run.engine.Engine.expire`) behind the
    conversation's run."""
