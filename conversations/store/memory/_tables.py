"""The in-memory store's state: plain Python objects standing in for the SQL tables.

Each interface's module reads and changes these. A method of the in-memory store
does its checks and its changes with no ``await`` in between, so it is atomic on
the event loop, as a transaction is in SQL; and it begins with
:func:`checkpoint`, so a call lets other tasks run, as a database call does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from conversations.channels import BusyMode
from conversations.events import OutboundAction, PlatformRef
from conversations.store.approvals import Place
from conversations.store.audit import AuditEntry, entry_of
from conversations.store.feedback import FeedbackGiven
from conversations.store.installations import Installation
from conversations.store.interfaces import Renderer, SessionRenderer, no_sessions
from conversations.store.operator_sessions import OperatorSession
from conversations.store.records import ConversationInfo, OutboxListener, OutboxRecord
from conversations.store.schedules import ScheduleRun
from conversations.store.schema import utcnow
from core.pricing import Price
from core.requests.audit import version_of
from core.vocabulary.approvals import Remember, RememberedRule
from core.vocabulary.audit import Audited, Means
from core.vocabulary.entries import JournalRecord
from core.vocabulary.errors import ConversationNotFound
from core.vocabulary.lifecycle import Status
from core.vocabulary.people import Person
from core.vocabulary.requests import PendingRequest
from core.vocabulary.tool_records import ToolCallRecord


async def checkpoint() -> None:
    """Let other tasks run, as the await of a database call does."""
    await asyncio.sleep(0)


@dataclass
class Conversation:
    """A conversation: its binding, status, journal and tool records, and its lease."""

    id: str
    binding: PlatformRef
    requester: Person
    status: Status
    position: str
    workspace_dir: str
    created_at: datetime
    updated_at: datetime
    plan_version: int = 0
    journal: list[JournalRecord] = field(default_factory=list)
    tool_calls: dict[str, ToolCallRecord] = field(default_factory=dict)
    lease_owner: str | None = None
    lease_until: datetime | None = None
    lease_epoch: int = 0
    delivery_owner: str | None = None
    delivery_until: datetime | None = None
    delivery_epoch: int = 0

    def info(self) -> ConversationInfo:
        """As the hub sees it."""
        return ConversationInfo(
            id=self.id,
            binding=self.binding,
            requester=self.requester,
            status=self.status,
            changed_at=self.updated_at,
            created_at=self.created_at,
        )


@dataclass
class Delivery:
    """An inbound delivery; ``event`` is kept until ``handled_at``."""

    key: str
    conversation_id: str | None
    event: dict[str, Any] | None
    received_at: datetime
    handled_at: datetime | None = None
    busy_mode: BusyMode | None = None
    """What the reply became while a run worked (``Inbox.keep_busy_mode``)."""


@dataclass
class Request:
    """A pending request of a conversation, and the message it was posted as."""

    conversation_id: str
    request: PendingRequest
    created_at: datetime
    reminded_at: datetime | None = None
    decided_at: datetime | None = None
    message: tuple[str, str, str] | None = None
    """``(platform, channel, message id)`` of its own post, once sent."""


@dataclass
class OutboxRow:
    """An outbound row; ``id`` grows and is never reused."""

    id: int
    conversation_id: str
    purpose: str
    action: OutboundAction
    created_at: datetime
    request_id: str | None = None
    state: str = "pending"
    platform_message_id: str | None = None
    attempts: int = 0
    last_error: str | None = None
    sent_at: datetime | None = None

    @property
    def platform(self) -> str:
        """The platform the action goes to."""
        return self.action.ref.platform

    @property
    def channel(self) -> str:
        """The channel the action goes to."""
        return self.action.ref.channel

    def record(self) -> OutboxRecord:
        """As stored."""
        return OutboxRecord(
            id=self.id,
            conversation_id=self.conversation_id,
            purpose=self.purpose,
            action=self.action,
            state=self.state,
            request_id=self.request_id,
            platform_message_id=self.platform_message_id,
            attempts=self.attempts,
            last_error=self.last_error,
        )


@dataclass
class StopEntry:
    """A stop request for ``run`` (None: whatever runs), held at ``lease_epoch``, asked by
    ``means``."""

    id: int
    conversation_id: str
    lease_epoch: int
    by: Person
    created_at: datetime
    handled_at: datetime | None = None
    run: int | None = None
    means: Means | None = None


@dataclass
class Rule:
    """A remembered approval (``approval_rules`` in SQL): the rule, its place and tool
    approval, and its revocation once revoked."""

    rule: RememberedRule
    place: Place
    request_id: str
    revoked_at: datetime | None = None
    revoked_by: str | None = None


@dataclass
class Tables:
    """Everything the in-memory store holds, and what every interface shares.

    ``clock``: the current time, timezone-aware UTC; ``render``: run events to
    outbox rows; ``sessions``: a change's session rows; ``on_outbox``: called with the
    outbox rows a write wrote
    (:data:`~conversations.store.records.OutboxListener`).
    """

    render: Renderer
    clock: Callable[[], datetime] = utcnow
    sessions: SessionRenderer = no_sessions
    """A change's rows for its thread's agent session (none by default)."""
    on_outbox: OutboxListener = lambda _rows: None
    conversations: dict[str, Conversation] = field(default_factory=dict)
    deliveries: dict[str, Delivery] = field(default_factory=dict)
    requests: dict[str, Request] = field(default_factory=dict)
    outbox: dict[int, OutboxRow] = field(default_factory=dict)
    stops: list[StopEntry] = field(default_factory=list)
    prices: list[Price] = field(default_factory=list)
    outputs: dict[tuple[str, str], str] = field(default_factory=dict)
    schedule_runs: dict[tuple[str, datetime], ScheduleRun] = field(default_factory=dict)
    """Due times recorded, by ``(schedule, due)`` (UTC): ``schedule_runs`` in SQL."""
    feedback: dict[tuple[str, str], FeedbackGiven] = field(default_factory=dict)
    """People's feedback, by ``(conversation, user id)``: ``feedback`` in SQL."""
    audit: list[AuditEntry] = field(default_factory=list)
    """The audit trail, oldest first: ``audit`` in SQL."""
    installations: dict[tuple[str, str, str], Installation] = field(default_factory=dict)
    """Installs by ``(platform, enterprise, team)``: ``installations`` in SQL."""
    oauth_states: dict[str, datetime] = field(default_factory=dict)
    """OAuth states and their expiry: ``oauth_states`` in SQL."""
    operator_sessions: dict[str, OperatorSession] = field(default_factory=dict)
    """The run inspector's sessions by ``id_sha256``: ``operator_sessions`` in SQL."""
    rules: dict[int, Rule] = field(default_factory=dict)
    """Remembered approvals by id (growing, never reused): ``approval_rules`` in SQL."""
    last_outbox_id: int = 0
    last_stop_id: int = 0

    def conversation(self, conversation_id: str) -> Conversation:
        """The conversation; raises :class:`core.vocabulary.errors.ConversationNotFound`."""
        found = self.conversations.get(conversation_id)
        if found is None:
            raise ConversationNotFound(conversation_id)
        return found

    def add_rule(self, conversation: Conversation, remember: Remember, now: datetime) -> Rule:
        """The rule ``remember`` of ``conversation``, kept with the next id and its home
        channel (as the SQL journal writes it)."""
        binding = conversation.binding
        rule = Rule(
            rule=RememberedRule(
                id=len(self.rules) + 1,
                scope=remember.scope,
                pattern=remember.pattern,
                by=remember.by,
                at=now,
                conversation_id=conversation.id,
                run=remember.run,
            ),
            place=Place(binding.platform, binding.workspace, binding.home),
            request_id=remember.request_id,
        )
        self.rules[rule.rule.id] = rule
        return rule

    def add_outbox(
        self, conversation_id: str, action: OutboundAction, purpose: str, request_id: str | None
    ) -> OutboxRow:
        """A new pending row with the next id."""
        self.last_outbox_id += 1
        row = OutboxRow(
            id=self.last_outbox_id,
            conversation_id=conversation_id,
            purpose=purpose,
            action=action,
            created_at=self.clock(),
            request_id=request_id,
        )
        self.outbox[row.id] = row
        return row

    def add_audit(
        self,
        conversation_id: str | None,
        where: PlatformRef,
        audited: Audited,
        at: datetime | None = None,
    ) -> AuditEntry:
        """A new row of the audit trail with the next id, at ``at`` (None: now; its
        request's kind and plan version read when ``audited`` does not say them)."""
        found: tuple[str, int | None] | None = None
        request = self.requests.get(audited.request_id) if audited.request_id else None
        if request is not None:
            found = (request.request.kind.value, version_of(request.request))
        row_id = self.audit[-1].id + 1 if self.audit else 1
        entry = entry_of(row_id, at or self.clock(), conversation_id, where, audited, found)
        self.audit.append(entry)
        return entry
