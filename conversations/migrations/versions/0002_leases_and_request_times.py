"""leases, request reminders and expiry, gated tool calls

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("conversations") as batch:
        batch.add_column(sa.Column("lease_owner", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("pending_requests") as batch:
        batch.add_column(sa.Column("tool_use_ids", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("remind_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("reminded_at", sa.DateTime(timezone=True), nullable=True))
        batch.create_index("ix_pending_requests_due", ["state", "remind_at", "expires_at"])


def downgrade() -> None:
    with op.batch_alter_table("pending_requests") as batch:
        batch.drop_index("ix_pending_requests_due")
        batch.drop_column("reminded_at")
        batch.drop_column("remind_at")
        batch.drop_column("expires_at")
        batch.drop_column("tool_use_ids")
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("lease_until")
        batch.drop_column("lease_owner")
