"""The chain every inbound event goes through, and what its steps tell each other.

Each step is a small object called with the :class:`Inbound` and the rest of the
chain (``next``): it does its one concern and calls ``next()``, or stops the event
there (slack-bolt's middleware, ``slack_bolt/middleware/``). The steps, in order
(assembled in one place, ``conversations.hub.Hub._chain``):

1. **bind** (:mod:`~conversations.hub._bind`): what the event is about, read from
   the store without writing: its conversation (by thread, by a bot message, by a
   button's action) and what it asks for, an :data:`Intent`; events about nothing
   this bot knows stop here;
2. **dedupe** (:mod:`~conversations.hub._dedupe`): the delivery key is recorded;
   a duplicate stops here, in the database (a mention's key is recorded with its
   new conversation, in one write);
3. **authorise** (:mod:`~conversations.hub._authorise`): a stop or a decision by
   someone who may not becomes a refusal in the thread, and in the audit trail;
4. **route** (:mod:`~conversations.hub._route`): the intent is carried out: a run
   queued, a decision taken, a stop, feedback stored, a refusal recorded, a notice or a
   reply.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from conversations.channels import BusyMode
from conversations.events import (
    Author,
    Button,
    CommandInvoked,
    InboundEvent,
    MessagePosted,
    PlatformRef,
)
from conversations.store import ConversationInfo
from core.vocabulary.approvals import ApprovalScope
from core.vocabulary.audit import Audited, Means
from core.vocabulary.people import Person
from core.vocabulary.snapshot import ConversationSnapshot

Next = Callable[[], Awaitable[None]]
"""The rest of the chain."""


# --- intents: what an event asks for -----------------------------------------------------


@dataclass(frozen=True)
class Open:
    """A mention outside any bound thread: open a conversation bound to ``binding``."""

    event: MessagePosted
    binding: PlatformRef


@dataclass(frozen=True)
class Begin:
    """Start the run of the conversation ``conversation_id`` just opened for ``event``;
    ``snapshot``: the conversation as opened (the run starts from it, no read)."""

    conversation_id: str
    event: MessagePosted
    snapshot: ConversationSnapshot | None = None


@dataclass(frozen=True)
class Answer:
    """A message in a conversation's thread; ``may_continue``: its author may decide;
    ``resumed``: queued again after a restart (it was acknowledged when it came);
    ``busy_mode``: what its acknowledgement told it became while a run worked, kept in
    the store (None: none was decided for it), which it becomes again."""

    conversation: ConversationInfo
    event: MessagePosted
    may_continue: bool = False
    resumed: bool = False
    busy_mode: BusyMode | None = None


@dataclass(frozen=True)
class StopRun:
    """Stop the conversation's run, asked by ``who`` by ``means``."""

    conversation: ConversationInfo
    who: Author
    means: Means


@dataclass(frozen=True)
class Decide:
    """Decide request ``request_id`` (or its call ``call``, from 1): approve or not
    (``scope``: how far an approval of a tool call reaches); or, ``choice`` set (from
    1), pick that option of a question (``approve`` unused); ``who`` decided by
    ``means``."""

    conversation: ConversationInfo
    request_id: str
    approve: bool
    who: Author
    means: Means
    call: int | None = None
    choice: int | None = None
    scope: ApprovalScope = ApprovalScope.ONCE


@dataclass(frozen=True)
class GiveFeedback:
    """``who``'s 👍 (``positive``) or 👎 on the conversation's answer: anyone in the
    channel may give it (:mod:`conversations.feedback`)."""

    conversation: ConversationInfo
    who: Author
    positive: bool


@dataclass(frozen=True)
class StopInChannel:
    """``/stop`` outside a thread: stop the one conversation here ``who`` may stop, or list them."""

    event: CommandInvoked


@dataclass(frozen=True)
class Notice:
    """Post ``text`` in the conversation's thread (through the outbox)."""

    conversation: ConversationInfo
    text: str


@dataclass(frozen=True)
class Refuse:
    """An attempt that changes nothing (``audited``, outcome ``refused``): recorded in the
    audit trail with the notice ``text`` to the thread, if any, in one write."""

    conversation: ConversationInfo
    audited: Audited
    text: str = ""


@dataclass(frozen=True)
class Respond:
    """Answer where no conversation is bound, straight to the adapter; ``to``: only to them."""

    ref: PlatformRef
    text: str
    to: str | None = None
    buttons: tuple[Button, ...] = ()


@dataclass(frozen=True)
class Ignore:
    """Nothing to do (logged with ``reason``, if any), once the delivery is recorded."""

    reason: str = ""


Intent = (
    Open
    | Begin
    | Answer
    | StopRun
    | Decide
    | GiveFeedback
    | StopInChannel
    | Notice
    | Refuse
    | Respond
    | Ignore
)
"""What an inbound event asks the hub for (set by the bind step, refined by the others)."""


def person_of(author: Author) -> Person:
    """The core's view of an event's author: platform id and display name."""
    return Person(id=author.id, name=author.name)


# --- the chain ---------------------------------------------------------------------------


@dataclass
class Inbound:
    """One inbound event on its way through the chain, and what the steps found."""

    event: InboundEvent
    intent: Intent = Ignore()
    conversation: ConversationInfo | None = None
    """The conversation whose thread the event is in (messages only: its delivery is
    recorded with it)."""


class Step(Protocol):
    """One concern of the chain: call ``next()`` to go on, or return to stop the event."""

    async def __call__(self, inbound: Inbound, next: Next) -> None:
        """Handle ``inbound``'s concern."""
        ...


async def run(steps: Sequence[Step], inbound: Inbound) -> None:
    """Pass ``inbound`` through ``steps`` in order, each deciding whether to go on."""

    async def at(index: int) -> None:
        if index < len(steps):
            await steps[index](inbound, lambda: at(index + 1))

    await at(0)
