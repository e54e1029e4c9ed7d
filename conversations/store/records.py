"""Plain records the store hands out, and conversions between rows and core models.

The records are what every backend returns (:mod:`conversations.store.interfaces`);
the conversions map the SQL backend's rows. Everything here is pure: no session,
no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from conversations.events import OutboundAction, PlatformRef, outbound_adapter
from conversations.store import legacy
from conversations.store.schema import (
    ConversationRow,
    OutboxRow,
    RequestRow,
    ToolCallRow,
    utcnow,
)
from core.context import random_id
from core.vocabulary.journal import Change
from core.vocabulary.lifecycle import IDLE, Lifecycle, Status, WaitKind
from core.vocabulary.people import Person
from core.vocabulary.requests import PendingRequest, RequestState, request_adapter
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import CommandProcess, ToolCallRecord, ToolState
from core.vocabulary.verdicts import Verdict, verdict_adapter


@dataclass(frozen=True)
class Outgoing:
    """One outbox row to write: an action, why (``note`` or ``milestone``), its request."""

    action: OutboundAction
    purpose: str = "milestone"
    request_id: str | None = None


@dataclass(frozen=True)
class PendingSend:
    """An outbox row waiting for delivery; ``id`` doubles as the idempotency key."""

    id: int
    conversation_id: str
    purpose: str
    action: OutboundAction
    request_id: str | None = None


NO_EARLIER: Mapping[int, str | None] = MappingProxyType({})
"""No rows sent earlier whose marks were held back (``Outbox.mark_sent``'s ``earlier``)."""


@dataclass(frozen=True)
class RequestMessage:
    """A request's own message as the outbox holds it: the action posted, its row's
    ``state`` (``pending``, ``sent``, ``failed``) and the platform message id stored
    when it was sent (of its last part, when it was split)."""

    action: OutboundAction
    state: str
    message_id: str | None


@dataclass(frozen=True)
class ConversationInfo:
    """A conversation as the hub sees it: binding, requester and status; ``changed_at``:
    when it was last committed (UTC; every commit moves it, so a reader that polls
    knows when to read the journal again: :mod:`conversations.inspect.follow`);
    ``created_at``: when it was opened (UTC; a fork's, when it was forked)."""

    id: str
    binding: PlatformRef
    requester: Person
    status: Status
    changed_at: datetime | None = field(default=None, compare=False)
    created_at: datetime | None = field(default=None, compare=False)


@dataclass(frozen=True)
class DueRequest:
    """An open request whose reminder (``expired`` False) or expiry has come."""

    conversation_id: str
    request_id: str
    expired: bool


@dataclass(frozen=True)
class MessageLink:
    """What a bot message is about: its conversation and, if any, its pending request.

    Found through the request's own post, it also says the request's state and the
    conversation as the hub sees it, read with it (None when not read).
    """

    conversation_id: str
    request_id: str | None
    request_state: RequestState | None = field(default=None, compare=False)
    conversation: ConversationInfo | None = field(default=None, compare=False)


class Bound(Protocol):
    """The binding columns of a conversation, as a row or a ``RETURNING`` row has them."""

    platform: str
    workspace: str
    channel: str
    thread: str
    parent: str | None


def binding_of(row: Bound) -> PlatformRef:
    """The thread a conversation row (or its binding columns) is bound to."""
    return PlatformRef(
        platform=row.platform,
        workspace=row.workspace,
        channel=row.channel,
        thread=row.thread or None,
        parent=row.parent,
    )


def status_of(row: ConversationRow) -> Status:
    """The lifecycle status stored in a conversation row."""
    return Status(
        lifecycle=Lifecycle(row.lifecycle),
        wait=WaitKind(row.wait_kind) if row.wait_kind else None,
    )


def info_of(row: ConversationRow) -> ConversationInfo:
    """A conversation row as the hub sees it."""
    return ConversationInfo(
        id=row.id,
        binding=binding_of(row),
        requester=Person(id=row.requester_id, name=row.requester_name),
        status=status_of(row),
        changed_at=as_utc(row.updated_at),
        created_at=as_utc(row.created_at),
    )


def status_values(change: Change, now: datetime) -> dict[str, Any]:
    """The ``conversations`` columns ``change`` sets (status, position, plan version),
    with ``updated_at`` = ``now``."""
    values: dict[str, Any] = {"updated_at": now}
    if change.status is not None:
        values["lifecycle"] = change.status.lifecycle.value
        values["wait_kind"] = change.status.wait.value if change.status.wait else None
    if change.position is not None:
        values["position"] = change.position
    if change.plan_version is not None:
        values["plan_version"] = change.plan_version
    return values


def tool_record_of(row: ToolCallRow) -> ToolCallRecord:
    """A tool call row as a core record."""
    return ToolCallRecord(
        tool_use_id=row.tool_use_id,
        name=row.name,
        input=row.input,
        read_only=row.read_only,
        state=ToolState(legacy.tool_state(row.name, row.state)),
        turn_seq=row.turn_seq,
        index=row.idx,
        process=(
            CommandProcess(
                group=row.process_group,
                started=row.process_started,
                boot_id=row.boot_id,
                cgroup=row.process_cgroup,
            )
            if row.process_group is not None
            and row.process_started is not None
            and row.boot_id is not None
            else None
        ),
        request_id=row.request_id,
    )


def tool_values(conversation_id: str, record: ToolCallRecord) -> dict[str, Any]:
    """A core tool call record as the column values of its ``tool_calls`` row."""
    return {
        "tool_use_id": record.tool_use_id,
        "conversation_id": conversation_id,
        "name": record.name,
        "input": record.input,
        "read_only": record.read_only,
        "state": record.state.value,
        "turn_seq": record.turn_seq,
        "idx": record.index,
        "updated_at": utcnow(),
        "process_group": record.process.group if record.process else None,
        "process_started": record.process.started if record.process else None,
        "boot_id": record.process.boot_id if record.process else None,
        "process_cgroup": record.process.cgroup if record.process else None,
        "request_id": record.request_id,
    }


def request_of(row: RequestRow) -> PendingRequest:
    """A pending request row as a core request (rows from before 0006 included)."""
    decided_by = (
        Person(id=row.decided_by_id, name=row.decided_by_name or row.decided_by_id)
        if row.decided_by_id
        else None
    )
    return request_adapter.validate_python(
        legacy.request(
            {
                "id": row.id,
                "kind": row.kind,
                "state": row.state,
                "tool_use_id": row.tool_use_id,
                "plan_version": row.plan_version,
                "prompt": row.prompt,
                "budget": row.budget_scope,
                "tool_use_ids": (row.tool_use_ids or {}).get("ids", ()),
                "expires_at": as_utc(row.expires_at),
                "remind_at": as_utc(row.remind_at),
                "verdict": row.verdict,
                "decision": row.decision,
                "decided_by": decided_by,
            }
        )
    )


def request_row(conversation_id: str, request: PendingRequest) -> RequestRow:
    """A new core request as a row."""
    fields = request_adapter.dump_python(request)
    ids = fields.get("tool_use_ids") or ()
    return RequestRow(
        id=request.id,
        conversation_id=conversation_id,
        kind=request.kind.value,
        state=request.state.value,
        tool_use_id=fields.get("tool_use_id"),
        plan_version=fields.get("plan_version"),
        prompt=request.prompt,
        budget_scope=fields.get("budget"),
        tool_use_ids={"ids": list(ids)} if ids else None,
        expires_at=request.expires_at,
        remind_at=request.remind_at,
        verdict=verdict_json(request.verdict),
    )


def verdict_json(verdict: Verdict | None) -> dict[str, Any] | None:
    """A verdict as stored in a JSON column (None stays None)."""
    return None if verdict is None else verdict_adapter.dump_python(verdict, mode="json")


def as_utc(value: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; every time stored here is UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def outbox_values(conversation_id: str, out: Outgoing) -> dict[str, Any]:
    """The column values of a new pending outbox row for ``out``."""
    ref = out.action.ref
    return {
        "conversation_id": conversation_id,
        "request_id": out.request_id,
        "purpose": out.purpose,
        "platform": ref.platform,
        "channel": ref.channel,
        "action": outbound_adapter.dump_python(out.action, mode="json"),
        "state": "pending",
        "attempts": 0,
        "created_at": utcnow(),
    }


def outbox_row(conversation_id: str, out: Outgoing) -> OutboxRow:
    """A new pending outbox row for ``out``."""
    return OutboxRow(**outbox_values(conversation_id, out))


# --- records of leases, stop requests, retention and the outbox as stored --------------


def new_conversation_id() -> str:
    """A new conversation id: 32 lowercase hex digits."""
    return random_id()


@dataclass(frozen=True)
class Lease:
    """A held lease: the conversation, its owner and the epoch it was acquired at.

    ``changed_at``: when the conversation was last committed (its ``updated_at``),
    as the acquisition read it; None when not read. A run handed a snapshot
    computed at that time may start from it without reading the conversation back
    (:class:`core.run.state.Handover`).
    """

    conversation_id: str
    owner: str
    epoch: int
    changed_at: datetime | None = field(default=None, compare=False)


@dataclass(frozen=True)
class LeaseState:
    """Who holds a conversation's lease (``owner`` None: nobody), at which epoch, until when."""

    owner: str | None
    epoch: int
    until: datetime | None

    def live(self, now: datetime) -> bool:
        """Whether someone holds it and it has not lapsed."""
        until = as_utc(self.until)
        return self.owner is not None and until is not None and until > now


@dataclass(frozen=True)
class Pruned:
    """How many rows one prune deleted: outbox rows and deliveries."""

    outbox: int = 0
    deliveries: int = 0


@dataclass(frozen=True)
class OutboxRecord:
    """An outbox row as stored, whatever its state (``pending``, ``sent``, ``failed``,
    ``dropped``): for operators and tests; the deliverer reads :class:`PendingSend`."""

    id: int
    conversation_id: str
    purpose: str
    action: OutboundAction
    state: str
    request_id: str | None = None
    platform_message_id: str | None = None
    attempts: int = 0
    last_error: str | None = None

    def pending_send(self) -> PendingSend:
        """The row as the deliverer sends it (meaningful for a ``pending`` row)."""
        return PendingSend(
            id=self.id,
            conversation_id=self.conversation_id,
            purpose=self.purpose,
            action=self.action,
            request_id=self.request_id,
        )


OPENED_EPOCH = 1
"""The lease epoch of a conversation created leased (``open_conversation(lease=...)``):
the first acquisition's, as if the lease had been taken from free."""


def opened_lease(conversation_id: str, owner: str) -> Lease:
    """The lease ``owner`` holds on a conversation it just opened leased."""
    return Lease(conversation_id, owner, OPENED_EPOCH)


def opened_snapshot(
    conversation_id: str, *, requester: Person, position: str, workspace_root: Path
) -> ConversationSnapshot:
    """The snapshot of a conversation ``open_conversation`` just created with these
    arguments, as a load would read it: ``idle``, nothing journaled, no call, no
    request (the store contract suite checks it against a load)."""
    return ConversationSnapshot(
        id=conversation_id,
        requester=requester,
        status=IDLE,
        position=position,
        plan_version=0,
        workspace=str(workspace_root / conversation_id),
        journal=(),
        tool_calls={},
        requests=(),
    )


OutboxListener = Callable[[Sequence[OutboxRecord]], None]
"""Told, right after a write committed, the outbox rows it wrote: the new rows
(``pending``, or ``dropped`` for a note a stop in the same change made moot) and
the rows it settled on the way (notes a stop ``dropped``), oldest first. The
deliverer queues the pending ones and forgets the others, so it sends what a
commit wrote without reading it back (docs/architecture.md, "One mention, one
approval, one stop"). Never called for a write that touched no outbox row."""
