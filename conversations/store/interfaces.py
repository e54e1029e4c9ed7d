"""The store's interfaces: one small protocol per consumer, all over one database.

Who takes which (docs/architecture.md, "Inside the packages"):

- ``Journal`` (core's :class:`core.vocabulary.journal.Journal`): a conversation's journal, tool
  records, requests and status, loaded and committed; the one way state moves.
  Taken by the engine.
- :class:`Threads`: conversations and the threads they are bound to, and which
  conversation a bot message is about. Taken by the hub, the stopper and the
  sweeper (ended conversations' workspaces).
- :class:`Inbox`: inbound deliveries, a dedupe key each, and the durable inbox of
  messages not yet journaled. Taken by the hub.
- :class:`Outbox`: outbound rows, written, delivered and settled (declared in
  :mod:`conversations.store.outbox`). Taken by the deliverer (and by the hub, for
  notices).
- :class:`LeaseStore`: fenced leases (declared in :mod:`conversations.store.leases`, beside
  :class:`conversations.store.leases.Leases`, which takes them).
- :class:`StopRequests`: stops for a run another instance holds (declared in
  :mod:`conversations.store.stops`). Taken by the stopper.
- :class:`Requests`: pending requests, reminders and expiry. Taken by hub and sweeper.
- :class:`Retention`: pruning what served delivery and dedupe. Taken by the sweeper.
- :class:`~conversations.store.schedules.Schedules`: scheduled runs' due times, each
  recorded once. Taken by the sweeper's scheduler and the hub.
- :class:`~conversations.store.forks.Forks`: a conversation forked at a journal entry,
  written whole. Taken by :mod:`conversations.forks`.
- :class:`~conversations.store.usage.Usage`: prices and model calls. Taken by the bot.
- :class:`~conversations.store.slots.SlotStore`: slots of runs and steps, queued by
  priority, granted in the store. Taken by :mod:`conversations.slots`.
- :class:`core.outputs.OutputStore`: large tool outputs kept whole. Taken by the engine.
- :class:`~conversations.store.feedback.Feedback`: people's 👍 / 👎 on a conversation's
  answers, one row per person. Taken by the hub and ``threadbot usage``.
- :class:`~conversations.store.audit.AuditTrail`: decisions and refused attempts. Taken
  by the hub, the stopper and ``threadbot audit``.
- :class:`~conversations.store.installations.Installations` and ``OAuthStates``: the
  app's installs, tokens sealed. Taken by :mod:`conversations.installs`.
- :class:`~conversations.store.operator_sessions.OperatorSessions`: the run inspector's
  signed-in browsers. Taken by :mod:`bot.inspector`.
- :class:`~conversations.store.approvals.ApprovalRules`: approvals remembered for a run
  or a channel. Taken by the engine, ``threadbot policy`` and ``settings explain``.
- :class:`~conversations.store.inspection.Inspection`: the conversations listed, filtered
  and paged. Taken by the run inspector (``bot/inspector/``).

A backend implements every interface over one database and hands them out as one
:class:`Store` (``conversations.store.sql``: SQLAlchemy, SQLite the embedded default;
``conversations.store.memory``: plain Python, for fast tests). Both pass the same
contract suite (``tests/test_store_contract.py``). A consumer names only the
interfaces it uses, never a backend.

Errors every backend raises the same way: :class:`core.vocabulary.errors.ConversationNotFound`
(an unknown id), :class:`core.vocabulary.errors.RequestConflict` (a compare-and-set lost),
:class:`core.vocabulary.errors.LeaseLost` (a fenced commit refused).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from conversations.events import PlatformRef
from conversations.store.approvals import ApprovalRules
from conversations.store.audit import AuditTrail
from conversations.store.claims import DeliveryClaims
from conversations.store.feedback import Feedback
from conversations.store.forks import Forks
from conversations.store.health import StoreHealth
from conversations.store.inbox import Inbox as Inbox
from conversations.store.inspection import Inspection
from conversations.store.installations import Installations, OAuthStates
from conversations.store.leases import LeaseStore as LeaseStore
from conversations.store.operator_sessions import OperatorSessions
from conversations.store.outbox import Outbox as Outbox
from conversations.store.records import (
    ConversationInfo,
    MessageLink,
    OutboxListener,
)
from conversations.store.renderers import Renderer as Renderer
from conversations.store.renderers import SessionRenderer as SessionRenderer
from conversations.store.renderers import no_sessions as no_sessions
from conversations.store.schedules import Schedules
from conversations.store.slots import SlotStore
from conversations.store.stops import StopRequests as StopRequests
from conversations.store.upkeep import Requests as Requests
from conversations.store.upkeep import Retention as Retention
from conversations.store.usage import Usage
from conversations.store.wakeups import Wakeups
from core.outputs import OutputStore
from core.vocabulary.journal import Journal
from core.vocabulary.people import Person

Counts = tuple[int, int]
Ended = list[tuple[str, str]]


class Threads(Protocol):
    """Conversations and their thread bindings, and the bot messages that lead back to them."""

    async def open_conversation(
        self,
        *,
        delivery_key: str,
        binding: PlatformRef,
        requester: Person,
        workspace_root: Path,
        position: str,
        event: dict[str, Any] | None = None,
        lease: tuple[str, float] | None = None,
    ) -> str | None:
        """Record the delivery ``delivery_key`` and create an ``idle`` conversation bound
        to ``binding.thread``, with its workspace at ``workspace_root / <id>``.

        Returns the new id (32 hex digits), or None when the delivery was seen before
        (and nothing is written). ``event`` is kept in the inbox until a change names
        the key in ``Change.handled`` (see :meth:`Inbox.unhandled`). ``lease``
        (owner, seconds): the conversation is created leased to that owner for that
        long, at epoch 1 (:func:`opened_lease`), so the process that opens it runs it
        without taking the lease in a write of its own; its delivery claim likewise
        (:func:`conversations.store.claims.opened_claim`).
        """
        ...

    async def find_by_thread(self, ref: PlatformRef) -> ConversationInfo | None:
        """The conversation bound to ``ref``'s ``(platform, workspace, channel, thread)``;
        None for a top-level ``ref`` or an unbound thread."""
        ...

    async def find_by_message(
        self, platform: str, channel: str, message: str
    ) -> MessageLink | None:
        """What the bot's message ``message`` in ``channel`` is about, if the bot sent it.

        A request's own message is found through the link on its request, kept for
        good; any other message through its outbox row, which goes after the
        retention time (:meth:`Retention.prune`): then, as for a message the bot
        did not send, None.
        """
        ...

    async def find(self, conversation_id: str) -> ConversationInfo | None:
        """One conversation, or None if there is no such conversation."""
        ...

    async def info(self, conversation_id: str) -> ConversationInfo:
        """One conversation; raises :class:`core.vocabulary.errors.ConversationNotFound`."""
        ...

    async def active(
        self, *, platform: str, workspace: str | None = None, channel: str | None = None
    ) -> list[ConversationInfo]:
        """Conversations ``running`` or ``waiting`` on ``platform``, oldest first,
        optionally only in one workspace and channel."""
        ...

    async def started_by(self, *, platform: str, requester_id: str, since: datetime) -> Counts:
        """``(active, started)``: of ``requester_id``'s conversations on ``platform``, how
        many run or wait, and how many opened at or after ``since`` (UTC)."""
        ...

    async def ended_between(self, after: datetime | None, before: datetime) -> Ended:
        """``(id, workspace_dir)`` of conversations ended (done, failed, cancelled) in
        ``[after, before)`` (no ``after``: from the first), oldest first."""
        ...

    async def running(self) -> list[str]:
        """Ids of conversations left ``running`` (to resume at start), least recent first;
        not those still on their placeholder thread (a fork waiting for its thread:
        :mod:`conversations.store.forks`)."""
        ...

    async def conversations(self) -> list[ConversationInfo]:
        """Every conversation, oldest first (for operators and tests)."""
        ...


class Store(Protocol):
    """One database, handed out as one interface per consumer; ``on_outbox`` is called
    with the outbox rows after every write that added some (or dropped pending notes:
    :data:`~conversations.store.records.OutboxListener`); the bot hands them to the
    deliverer."""

    on_outbox: OutboxListener

    @property
    def journal(self) -> Journal:
        """Core's journal: ``load`` and ``commit`` (the engine's interface)."""
        ...

    @property
    def threads(self) -> Threads:
        """Conversations and their threads."""
        ...

    @property
    def inbox(self) -> Inbox:
        """Inbound deliveries."""
        ...

    @property
    def outbox(self) -> Outbox:
        """Outbound rows."""
        ...

    @property
    def leases(self) -> LeaseStore:
        """Fenced leases."""
        ...

    @property
    def claims(self) -> DeliveryClaims:
        """Who delivers each conversation's outbox rows (:mod:`conversations.store.claims`)."""
        ...

    @property
    def wakeups(self) -> Wakeups:
        """How instances on this database tell each other (:mod:`conversations.store.wakeups`)."""
        ...

    @property
    def stops(self) -> StopRequests:
        """Stop requests."""
        ...

    @property
    def requests(self) -> Requests:
        """Pending requests."""
        ...

    @property
    def retention(self) -> Retention:
        """Pruning."""
        ...

    @property
    def usage(self) -> Usage:
        """Price entries and model calls."""
        ...

    @property
    def outputs(self) -> OutputStore:
        """Large tool outputs."""
        ...

    @property
    def schedules(self) -> Schedules:
        """Scheduled runs' due times (:mod:`conversations.store.schedules`)."""
        ...

    @property
    def forks(self) -> Forks:
        """Forks of conversations, each written whole (:mod:`conversations.store.forks`)."""
        ...

    @property
    def slots(self) -> SlotStore:
        """Slots of runs and steps (:mod:`conversations.store.slots`)."""
        ...

    @property
    def health(self) -> StoreHealth:
        """Reachability and levels, for an operator (:mod:`conversations.store.health`)."""
        ...

    @property
    def feedback(self) -> Feedback:
        """People's feedback on conversations (:mod:`conversations.store.feedback`)."""
        ...

    @property
    def audit(self) -> AuditTrail:
        """Decisions and refused attempts (:mod:`conversations.store.audit`)."""
        ...

    @property
    def installations(self) -> Installations:
        """The app's installs (:mod:`conversations.store.installations`)."""
        ...

    @property
    def oauth_states(self) -> OAuthStates:
        """The OAuth flow's states (:mod:`conversations.store.installations`)."""
        ...

    @property
    def operator_sessions(self) -> OperatorSessions:
        """The run inspector's sessions (:mod:`conversations.store.operator_sessions`)."""
        ...

    @property
    def approvals(self) -> ApprovalRules:
        """Approvals remembered past their call (:mod:`conversations.store.approvals`)."""
        ...

    @property
    def inspection(self) -> Inspection:
        """The conversations as the run inspector lists them
        (:mod:`conversations.store.inspection`)."""
        ...

    async def close(self) -> None:
        """Release the database (connections); the store is not used after."""
        ...
