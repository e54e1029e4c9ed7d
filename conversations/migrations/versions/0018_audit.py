"""audit: every decision and every refused attempt, who, how, on what, when, what followed

``audit``: one row per decision on a pending request, per stop, and per attempt that
changed nothing (someone who may not decide, a plan version replaced, a request decided
already), written in the transaction of what it records where there is one; kept for
good, read by ``threadbot audit`` (docs/architecture.md, "The audit trail").
``stop_requests.means``: how the stop a holder carries out for another instance was
given (null: a request written before this revision).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("conversation_id", sa.String(length=32), nullable=True),
        sa.Column("platform", sa.String(length=32), nullable=False),
        sa.Column("workspace", sa.String(length=64), nullable=False),
        sa.Column("channel", sa.String(length=64), nullable=False),
        sa.Column("request_kind", sa.String(length=32), nullable=True),
        sa.Column("request_id", sa.String(length=64), nullable=True),
        sa.Column("version", sa.Integer(), nullable=True),
        sa.Column("user_id", sa.String(length=128), nullable=False),
        sa.Column("means", sa.String(length=16), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["conversation_id"], ["conversations.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_audit_at", "audit", ["at", "id"])
    op.create_index("ix_audit_conversation", "audit", ["conversation_id", "id"])
    with op.batch_alter_table("stop_requests") as batch:
        batch.add_column(sa.Column("means", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("stop_requests") as batch:
        batch.drop_column("means")
    op.drop_index("ix_audit_conversation", table_name="audit")
    op.drop_index("ix_audit_at", table_name="audit")
    op.drop_table("audit")
