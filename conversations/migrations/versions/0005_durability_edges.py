"""durability at the edges: tool records per conversation, command processes, stop requests,
message links on requests

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

- ``tool_calls`` is keyed by ``(conversation_id, tool_use_id)`` (a model's ids are
  unique within one conversation only) and records the process group of a
  running command with its start time and the host's boot id, so a group that
  outlived a crash is killed at resume, and a reused id never is.
- ``stop_requests``: a stop handled by an instance that does not run the
  conversation, for the instance that does (it polls).
- ``pending_requests`` keeps the platform message it was posted as, copied here
  from the outbox, so old outbox rows can be pruned and a reaction on the
  request's message still finds it.
"""

import warnings

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with warnings.catch_warnings():
        # SQLAlchemy notes that the copied table's columns said another primary key:
        # replacing it is the point of this step.
        warnings.filterwarnings("ignore", message=".*_alembic_tmp_tool_calls.*primary_key")
        with op.batch_alter_table("tool_calls", recreate="always") as batch:
            batch.add_column(sa.Column("process_group", sa.Integer(), nullable=True))
            batch.add_column(sa.Column("process_started", sa.BigInteger(), nullable=True))
            batch.add_column(sa.Column("boot_id", sa.String(length=64), nullable=True))
            batch.create_primary_key("pk_tool_calls", ["conversation_id", "tool_use_id"])
    op.create_table(
        "stop_requests",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("conversation_id", sa.String(length=32), nullable=False),
        sa.Column("lease_epoch", sa.Integer(), nullable=False),
        sa.Column("requested_by_id", sa.String(length=128), nullable=False),
        sa.Column("requested_by_name", sa.String(length=256), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("handled_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["conversation_id"], ["conversations.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_stop_requests_open", "stop_requests", ["handled_at", "conversation_id"])
    with op.batch_alter_table("pending_requests") as batch:
        batch.add_column(sa.Column("message_platform", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("message_channel", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("message_id", sa.String(length=64), nullable=True))
        batch.create_index(
            "ix_pending_requests_message", ["message_platform", "message_channel", "message_id"]
        )
    original = (
        "SELECT o.{column} FROM outbox o WHERE o.request_id = pending_requests.id "
        "AND o.purpose = 'milestone' AND o.platform_message_id IS NOT NULL "
        "ORDER BY o.id DESC LIMIT 1"
    )
    op.execute(
        "UPDATE pending_requests SET "
        f"message_platform = ({original.format(column='platform')}), "
        f"message_channel = ({original.format(column='channel')}), "
        f"message_id = ({original.format(column='platform_message_id')})"
    )


def downgrade() -> None:
    with op.batch_alter_table("pending_requests") as batch:
        batch.drop_index("ix_pending_requests_message")
        batch.drop_column("message_id")
        batch.drop_column("message_channel")
        batch.drop_column("message_platform")
    op.drop_index("ix_stop_requests_open", table_name="stop_requests")
    op.drop_table("stop_requests")
    with op.batch_alter_table("tool_calls", recreate="always") as batch:
        batch.drop_column("boot_id")
        batch.drop_column("process_started")
        batch.drop_column("process_group")
