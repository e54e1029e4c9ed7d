"""The governance tables of the store (SQLAlchemy 2 declarative, on
:class:`conversations.store.schema_base.Base`): the audit trail of decisions and refused
attempts, the approvals remembered past their call, and the app's installs with their
OAuth states (docs/architecture.md "The audit trail", "Approval scopes", "Several
instances": installs on every instance).
Changed only through migrations; times are timezone-aware UTC."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, ForeignKey, Index, Integer, PrimaryKeyConstraint, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from conversations.store.schema_base import Base


class AuditRow(Base):
    """One decision or refused attempt (:mod:`conversations.store.audit`): ``user_id`` (a
    platform user id) acted by ``means`` on ``request_kind`` ``request_id`` (plan
    ``version``) in the conversation ``conversation_id`` (null: none, a ``/stop`` in a
    channel) at ``platform``/``workspace``/``channel``, at ``at``; ``outcome`` and
    ``reason`` say what followed. Kept for good; ``id`` orders rows of one time."""

    __tablename__ = "audit"
    __table_args__ = (
        Index("ix_audit_at", "at", "id"),
        Index("ix_audit_conversation", "conversation_id", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime]
    conversation_id: Mapped[str | None] = mapped_column(ForeignKey("conversations.id"))
    platform: Mapped[str] = mapped_column(String(32))
    workspace: Mapped[str] = mapped_column(String(64))
    channel: Mapped[str] = mapped_column(String(64))
    request_kind: Mapped[str | None] = mapped_column(String(32))
    request_id: Mapped[str | None] = mapped_column(String(64))
    version: Mapped[int | None] = mapped_column(Integer)
    user_id: Mapped[str] = mapped_column(String(128))
    means: Mapped[str | None] = mapped_column(String(16))
    outcome: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text)


class InstallationRow(Base):
    """An install of the app in a workspace or organisation
    (:mod:`conversations.store.installations`):
    one row per ``(platform, enterprise, team)``, its tokens sealed (never in plain text),
    kept without them once removed (``removed_at``, ``removed_why``)."""

    __tablename__ = "installations"
    __table_args__ = (
        PrimaryKeyConstraint("platform", "enterprise", "team", name="pk_installations"),
    )

    platform: Mapped[str] = mapped_column(String(32))
    enterprise: Mapped[str] = mapped_column(String(64))
    team: Mapped[str] = mapped_column(String(64))
    bot_token: Mapped[str] = mapped_column(Text)
    refresh_token: Mapped[str | None] = mapped_column(Text)
    expires_at: Mapped[datetime | None]
    bot_id: Mapped[str] = mapped_column(String(64))
    bot_user_id: Mapped[str] = mapped_column(String(64))
    scopes: Mapped[str] = mapped_column(Text)
    app_id: Mapped[str] = mapped_column(String(64))
    team_name: Mapped[str] = mapped_column(String(256))
    enterprise_name: Mapped[str] = mapped_column(String(256))
    installer: Mapped[str] = mapped_column(String(64))
    enterprise_install: Mapped[bool] = mapped_column(Boolean)
    installed_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    removed_at: Mapped[datetime | None]
    removed_why: Mapped[str] = mapped_column(String(32))


class OAuthStateRow(Base):
    """An OAuth ``state`` the install page handed out, taken once before ``expires_at``."""

    __tablename__ = "oauth_states"
    __table_args__ = (PrimaryKeyConstraint("state", name="pk_oauth_states"),)

    state: Mapped[str] = mapped_column(String(128))
    expires_at: Mapped[datetime]


class OperatorSessionRow(Base):
    """A signed-in browser of the run inspector (:mod:`conversations.store.operator_sessions`):
    the SHA-256 of its cookie's id, never the id itself; ``token_digest`` (migration
    0023) ties it to the operator's token hash in force at the sign-in."""

    __tablename__ = "operator_sessions"
    __table_args__ = (PrimaryKeyConstraint("id_sha256", name="pk_operator_sessions"),)

    id_sha256: Mapped[str] = mapped_column(String(64))
    operator: Mapped[str] = mapped_column(String(64))
    opened_at: Mapped[datetime]
    expires_at: Mapped[datetime]
    token_digest: Mapped[str] = mapped_column(String(16), default="", server_default="")


class ApprovalRuleRow(Base):
    """An approval remembered past its call (:mod:`conversations.store.approvals`): its
    ``scope`` (``run`` or ``channel``), the channel of the conversation it was given in
    (``platform``, ``workspace``, ``channel``: the channel whose settings apply there), the
    conversation, its ``run`` (the ``seq`` of the request that began it) and the tool
    approval ``request_id``; what it covers (``tool``, and ``command_prefix`` or the exact
    ``arguments``); who gave it and when; and, once revoked, when and by which operator.
    Never deleted: a revoked rule stays, for the record."""

    __tablename__ = "approval_rules"
    __table_args__ = (
        Index("ix_approval_rules_channel", "platform", "workspace", "channel"),
        Index("ix_approval_rules_run", "conversation_id", "run"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    scope: Mapped[str] = mapped_column(String(16))
    platform: Mapped[str] = mapped_column(String(32))
    workspace: Mapped[str] = mapped_column(String(64))
    channel: Mapped[str] = mapped_column(String(64))
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id"))
    run: Mapped[int] = mapped_column(Integer)
    request_id: Mapped[str] = mapped_column(String(64))
    tool: Mapped[str] = mapped_column(String(128))
    command_prefix: Mapped[str | None] = mapped_column(Text)
    arguments: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    created_by_id: Mapped[str] = mapped_column(String(128))
    created_by_name: Mapped[str] = mapped_column(String(256))
    created_at: Mapped[datetime]
    revoked_at: Mapped[datetime | None]
    revoked_by: Mapped[str | None] = mapped_column(String(128))
