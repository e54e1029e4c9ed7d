"""Tables of the store (SQLAlchemy 2 declarative). Changed only through migrations.

Times are timezone-aware UTC. JSON columns hold pydantic dumps of the core and
chat models (``model_dump(mode="json")``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Double,
    ForeignKey,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from conversations.store.schema_base import Base as Base
from core.context import now


def utcnow() -> datetime:
    """The current time, timezone-aware UTC (:func:`core.context.now`)."""
    return now()


class ConversationRow(Base):
    """A conversation, its thread binding, lifecycle status and workflow position."""

    __tablename__ = "conversations"
    __table_args__ = (
        UniqueConstraint("platform", "workspace", "channel", "thread"),
        Index("ix_conversations_started", "created_at", "id"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    platform: Mapped[str] = mapped_column(String(32))
    workspace: Mapped[str] = mapped_column(String(64))
    channel: Mapped[str] = mapped_column(String(64))
    thread: Mapped[str] = mapped_column(String(64))
    parent: Mapped[str | None] = mapped_column(String(64))
    """The channel a thread channel was started in (Discord), when known."""
    requester_id: Mapped[str] = mapped_column(String(128))
    requester_name: Mapped[str] = mapped_column(String(256))
    lifecycle: Mapped[str] = mapped_column(String(16))
    wait_kind: Mapped[str | None] = mapped_column(String(32))
    position: Mapped[str] = mapped_column(String(64))
    plan_version: Mapped[int] = mapped_column(Integer, default=0)
    workspace_dir: Mapped[str] = mapped_column(Text)
    lease_owner: Mapped[str | None] = mapped_column(String(64))
    """Process that may run the conversation until ``lease_until`` (one run per conversation)."""
    lease_until: Mapped[datetime | None]
    lease_epoch: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Goes up each time the lease is taken from free, expired or dead (never on renewal):
    a run's commits name the epoch they were started under (fencing)."""
    delivery_owner: Mapped[str | None] = mapped_column(String(64))
    """Process that may deliver the conversation's outbox rows until ``delivery_until``
    (one deliverer per conversation: :mod:`conversations.store.claims`)."""
    delivery_until: Mapped[datetime | None]
    delivery_epoch: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Goes up each time the delivery claim is taken (fencing, as ``lease_epoch``)."""
    delivery_taken_from: Mapped[str | None] = mapped_column(String(64))
    """Who held the delivery claim before its last taker (set by the taking ``UPDATE``,
    which returns it: one statement tells whether the claim was taken over)."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class DeliveryRow(Base):
    """An inbound delivery seen once; a second one with the same key is a duplicate."""

    __tablename__ = "deliveries"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    conversation_id: Mapped[str | None] = mapped_column(String(32))
    received_at: Mapped[datetime] = mapped_column(default=utcnow)
    event: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    """The inbound event, kept until its effect is journaled (then ``handled_at``)."""
    handled_at: Mapped[datetime | None]
    busy_mode: Mapped[str | None] = mapped_column(String(16))
    """What the reply became while a run worked, as its acknowledgement said (``steer``,
    ``queue``, ``interrupt``); None when no busy mode was decided for it."""


class JournalRow(Base):
    """One append-only journal entry, ordered per conversation by ``seq``."""

    __tablename__ = "journal"
    __table_args__ = (UniqueConstraint("conversation_id", "seq"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id"))
    seq: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(32))
    body: Mapped[dict[str, Any]]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ToolCallRow(Base):
    """The durable record of one tool call, keyed by its conversation and ``tool_use_id``.

    A model's ids are unique within one conversation only (the scripted and demo
    models number them per conversation). ``process_group``, ``process_started``
    (the group leader's start time, in clock ticks since boot, from
    ``/proc/<pid>/stat``) and ``boot_id`` name the process group of a running
    command, so a group that outlived a crash is killed when its run resumes on
    the same host, and a reused id never is; ``process_cgroup`` names the command's
    own cgroup (``threadbot-<hex>``), emptied and removed whole then.
    """

    __tablename__ = "tool_calls"
    __table_args__ = (PrimaryKeyConstraint("conversation_id", "tool_use_id", name="pk_tool_calls"),)

    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id"), index=True)
    tool_use_id: Mapped[str] = mapped_column(String(128))
    name: Mapped[str] = mapped_column(String(128))
    input: Mapped[dict[str, Any]]
    read_only: Mapped[bool]
    state: Mapped[str] = mapped_column(String(32))
    turn_seq: Mapped[int] = mapped_column(Integer)
    idx: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    process_group: Mapped[int | None] = mapped_column(Integer)
    process_started: Mapped[int | None] = mapped_column(BigInteger)
    boot_id: Mapped[str | None] = mapped_column(String(64))
    process_cgroup: Mapped[str | None] = mapped_column(String(64))
    request_id: Mapped[str | None] = mapped_column(String(64))
    """The request a control call opened (``propose_plan``, ``ask_user``), if any."""


class StopRequestRow(Base):
    """A stop for a run that another instance runs: the holder of the lease polls for it.

    ``lease_epoch`` names the holder's lease when the stop was asked (the request is
    written only while it is live); ``run_seq`` the run the stop was aimed at (the
    ``seq`` of its request; null: whatever runs); ``handled_at`` is set once the
    holder stopped it (or found it ended).
    """

    __tablename__ = "stop_requests"
    __table_args__ = (Index("ix_stop_requests_open", "handled_at", "conversation_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id"))
    lease_epoch: Mapped[int] = mapped_column(Integer)
    run_seq: Mapped[int | None] = mapped_column(Integer)
    requested_by_id: Mapped[str] = mapped_column(String(128))
    requested_by_name: Mapped[str] = mapped_column(String(256))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    handled_at: Mapped[datetime | None]
    means: Mapped[str | None] = mapped_column(String(16))
    """How the stop was given (``core.vocabulary.audit.Means``), for the audit trail;
    null in rows written before migration 0018."""


class RequestRow(Base):
    """A pending request (plan approval, question, ...), decided once."""

    __tablename__ = "pending_requests"
    __table_args__ = (
        Index("ix_pending_requests_due", "state", "remind_at", "expires_at"),
        Index("ix_pending_requests_message", "message_platform", "message_channel", "message_id"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id"), index=True)
    kind: Mapped[str] = mapped_column(String(32))
    state: Mapped[str] = mapped_column(String(16))
    tool_use_id: Mapped[str | None] = mapped_column(String(128))
    plan_version: Mapped[int | None] = mapped_column(Integer)
    prompt: Mapped[str] = mapped_column(Text, default="")
    budget_scope: Mapped[str | None] = mapped_column(String(16))
    """For a continue request asked by a budget: ``conversation`` or ``channel_day``."""
    tool_use_ids: Mapped[dict[str, Any] | None]
    """``{"ids": [...]}``: the gated calls of a tool approval request."""
    expires_at: Mapped[datetime | None]
    remind_at: Mapped[datetime | None]
    reminded_at: Mapped[datetime | None]
    decision: Mapped[str | None] = mapped_column(String(32))
    """The decision as text, in rows decided before 0006 (read by
    ``conversations.store.legacy``)."""
    verdict: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    """The verdict (``core.vocabulary.verdicts``, as JSON) of a request decided since 0006."""
    decided_by_id: Mapped[str | None] = mapped_column(String(128))
    decided_by_name: Mapped[str | None] = mapped_column(String(256))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    decided_at: Mapped[datetime | None]
    message_platform: Mapped[str | None] = mapped_column(String(32))
    message_channel: Mapped[str | None] = mapped_column(String(64))
    message_id: Mapped[str | None] = mapped_column(String(64))
    """The platform message the request was posted as (kept when old outbox rows go)."""


class OutboxRow(Base):
    """An outbound chat action, written with the change that caused it, sent at least once."""

    __tablename__ = "outbox"
    __table_args__ = (
        Index("ix_outbox_message", "platform", "channel", "platform_message_id"),
        Index("ix_outbox_pending", "state", "conversation_id", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id"), index=True)
    request_id: Mapped[str | None] = mapped_column(String(64))
    purpose: Mapped[str] = mapped_column(String(16))
    platform: Mapped[str] = mapped_column(String(32))
    channel: Mapped[str] = mapped_column(String(64))
    action: Mapped[dict[str, Any]]
    state: Mapped[str] = mapped_column(String(16), index=True)
    platform_message_id: Mapped[str | None] = mapped_column(String(64))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    sent_at: Mapped[datetime | None]


class ModelCallRow(Base):
    """One model call: where it was made, the tokens the API reported, its latency and cost.

    ``seq``: the journal entry of the assistant turn it answered with (written in the
    same transaction); ``cost_micro_usd``: integer micro-dollars, computed at call
    time with price entry ``price_id`` (None: the model had no price). Calls from
    before migration 0008 have no seq, run, position, latency, price or cost; ``role``:
    the role whose model was asked (``planner``, ``executor``, ``expert``; none before
    migration 0012).
    """

    __tablename__ = "model_calls"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id"), index=True)
    seq: Mapped[int | None] = mapped_column(Integer)
    run_id: Mapped[str | None] = mapped_column(String(32))
    position: Mapped[str | None] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(String(128))
    input_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    cache_read_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cache_write_tokens: Mapped[int] = mapped_column(Integer, default=0)
    latency_ms: Mapped[int | None] = mapped_column(Integer)
    price_id: Mapped[int | None] = mapped_column(ForeignKey("prices.id"))
    cost_micro_usd: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    role: Mapped[str | None] = mapped_column(String(16))


class PriceRow(Base):
    """A dated price entry of one model, in micro-dollars per million tokens of each kind.

    A new entry is added at start for each model whose price in the settings changed;
    entries are never changed, so past calls keep the price they were costed with.
    """

    __tablename__ = "prices"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    model: Mapped[str] = mapped_column(String(128), index=True)
    input: Mapped[int] = mapped_column(BigInteger)
    output: Mapped[int] = mapped_column(BigInteger)
    cache_read: Mapped[int] = mapped_column(BigInteger)
    cache_write: Mapped[int] = mapped_column(BigInteger)
    since: Mapped[datetime] = mapped_column(default=utcnow)


class ToolOutputRow(Base):
    """A tool output kept whole (:mod:`core.outputs`): the model read its preview, and
    ``read_output`` pages through it. Kept as long as the journal."""

    __tablename__ = "tool_outputs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id"), index=True)
    content: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ScheduleRunRow(Base):
    """One due time of a schedule, recorded once (:mod:`conversations.store.schedules`):
    the key ``(schedule, due_at)`` lets one instance's record in, so one instance
    starts that time's conversation (``conversation_id``; none for a time ``skipped`` or
    ``seen``). ``claimed_by``: the instance that recorded it, at ``claimed_at``."""

    __tablename__ = "schedule_runs"
    __table_args__ = (PrimaryKeyConstraint("schedule", "due_at", name="pk_schedule_runs"),)

    schedule: Mapped[str] = mapped_column(String(128))
    due_at: Mapped[datetime]
    outcome: Mapped[str] = mapped_column(String(16))
    claimed_by: Mapped[str] = mapped_column(String(64))
    claimed_at: Mapped[datetime]
    conversation_id: Mapped[str | None] = mapped_column(String(32))


class SlotRow(Base):
    """A run's or a step's ask for a slot (:mod:`conversations.store.slots`): its
    conversation and ``category`` (``run``, ``model``, ``command``), the keys its limits
    count by (``holder``: the instance holding it; ``workspace``: ``platform:workspace``;
    ``user_key``: ``platform:user id``), its own limits by key (None: none), its
    ``priority`` and ``rank`` in the queue (smaller first, fixed when asked:
    :func:`conversations.store.slots.rank_of`), ``state`` (``waiting`` or ``held``) and
    ``until`` (UTC), renewed like a lease's expiry. Granted by the pass of its category,
    in the store, which reads the waiting rows in queue order (``ix_slots_queue``) and
    asks whether any left has no cluster limit (``ix_slots_cluster``)."""

    __tablename__ = "slots"
    __table_args__ = (
        Index("ix_slots_queue", "category", "state", "rank", "id"),
        Index("ix_slots_cluster", "category", "state", "cluster_limit", "rank", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(String(32))
    category: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16))
    holder: Mapped[str] = mapped_column(String(64))
    workspace: Mapped[str] = mapped_column(String(128))
    user_key: Mapped[str] = mapped_column(String(192))
    priority: Mapped[int] = mapped_column(Integer)
    rank: Mapped[float] = mapped_column(Double)
    enqueued_at: Mapped[datetime]
    granted_at: Mapped[datetime | None]
    until: Mapped[datetime]
    cluster_limit: Mapped[int | None] = mapped_column(Integer)
    process_limit: Mapped[int | None] = mapped_column(Integer)
    workspace_limit: Mapped[int | None] = mapped_column(Integer)
    user_limit: Mapped[int | None] = mapped_column(Integer)


class FeedbackRow(Base):
    """A person's latest feedback on a conversation's answers (:mod:`conversations.store.feedback`):
    ``positive`` (👍) or not (👎), by the platform user id ``user_id``, given at ``given_at``;
    one row per (conversation, person), replaced by their later feedback."""

    __tablename__ = "feedback"
    __table_args__ = (PrimaryKeyConstraint("conversation_id", "user_id", name="pk_feedback"),)

    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id"))
    user_id: Mapped[str] = mapped_column(String(128))
    positive: Mapped[bool] = mapped_column(Boolean)
    given_at: Mapped[datetime]


# The governance tables (audit, installs, remembered approvals) are in a module of their
# own on the same base, imported here so that every table is on ``Base.metadata`` and
# importable from this module.
from conversations.store.governance_schema import (  # noqa: E402
    ApprovalRuleRow,
    AuditRow,
    InstallationRow,
    OAuthStateRow,
    OperatorSessionRow,
)

__all__ = ["ApprovalRuleRow", "AuditRow", "InstallationRow", "OAuthStateRow", "OperatorSessionRow"]


# --- the tables as SQLAlchemy Core statements take them --------------------------------

CONVERSATIONS = cast(Table, ConversationRow.__table__)
DELIVERIES = cast(Table, DeliveryRow.__table__)
JOURNAL = cast(Table, JournalRow.__table__)
TOOL_CALLS = cast(Table, ToolCallRow.__table__)
OUTBOX = cast(Table, OutboxRow.__table__)
MODEL_CALLS = cast(Table, ModelCallRow.__table__)
