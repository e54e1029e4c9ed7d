"""feedback: a person's latest 👍 / 👎 on a conversation's answers

``feedback``: one row per (conversation, platform user id), replaced by the person's
later feedback (docs/architecture.md, "What a person sees").

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "feedback",
        sa.Column("conversation_id", sa.String(length=32), nullable=False),
        sa.Column("user_id", sa.String(length=128), nullable=False),
        sa.Column("positive", sa.Boolean(), nullable=False),
        sa.Column("given_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["conversation_id"], ["conversations.id"]),
        sa.PrimaryKeyConstraint("conversation_id", "user_id", name="pk_feedback"),
    )


def downgrade() -> None:
    op.drop_table("feedback")
