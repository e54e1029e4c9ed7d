"""inspection indexes: the run inspector's list of conversations, newest first

``ix_conversations_started`` on ``conversations (created_at, id)``: the list's order,
so a page walks the index from its cursor and stops at the page's end instead of
sorting every conversation (docs/architecture.md, "The run inspector"). The page's
model calls are summed over ``ix_model_calls_conversation_id``, and its first requests
and workflows read by the journal's key, both there already.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-08
"""

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_conversations_started", "conversations", ["created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_conversations_started", table_name="conversations")
