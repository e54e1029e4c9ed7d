"""slots: runs, model calls and commands at once, queued by priority, kept in the store

Each row keeps its rank in the queue (fixed when asked, smaller first), indexed with
its category and state, so a pass reads the head of the queue only.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "slots",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("conversation_id", sa.String(length=32), nullable=False),
        sa.Column("category", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("holder", sa.String(length=64), nullable=False),
        sa.Column("workspace", sa.String(length=128), nullable=False),
        sa.Column("user_key", sa.String(length=192), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("rank", sa.Double(), nullable=False),
        sa.Column("enqueued_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("granted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("cluster_limit", sa.Integer(), nullable=True),
        sa.Column("process_limit", sa.Integer(), nullable=True),
        sa.Column("workspace_limit", sa.Integer(), nullable=True),
        sa.Column("user_limit", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_slots_queue", "slots", ["category", "state", "rank", "id"])
    op.create_index(
        "ix_slots_cluster", "slots", ["category", "state", "cluster_limit", "rank", "id"]
    )


def downgrade() -> None:
    op.drop_index("ix_slots_cluster", table_name="slots")
    op.drop_index("ix_slots_queue", table_name="slots")
    op.drop_table("slots")
