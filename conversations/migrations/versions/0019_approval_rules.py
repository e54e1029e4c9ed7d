"""approval_rules: approvals remembered for a run or always in a channel

``approval_rules``: one row per rule a person's approval for the run or the channel
left (docs/architecture.md, "Approval scopes"), kept when revoked (who, when).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "approval_rules",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("scope", sa.String(length=16), nullable=False),
        sa.Column("platform", sa.String(length=32), nullable=False),
        sa.Column("workspace", sa.String(length=64), nullable=False),
        sa.Column("channel", sa.String(length=64), nullable=False),
        sa.Column("conversation_id", sa.String(length=32), nullable=False),
        sa.Column("run", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=False),
        sa.Column("tool", sa.String(length=128), nullable=False),
        sa.Column("command_prefix", sa.Text(), nullable=True),
        sa.Column("arguments", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_by_id", sa.String(length=128), nullable=False),
        sa.Column("created_by_name", sa.String(length=256), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_by", sa.String(length=128), nullable=True),
        sa.ForeignKeyConstraint(["conversation_id"], ["conversations.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_approval_rules_channel", "approval_rules", ["platform", "workspace", "channel"]
    )
    op.create_index("ix_approval_rules_run", "approval_rules", ["conversation_id", "run"])


def downgrade() -> None:
    op.drop_index("ix_approval_rules_run", table_name="approval_rules")
    op.drop_index("ix_approval_rules_channel", table_name="approval_rules")
    op.drop_table("approval_rules")
