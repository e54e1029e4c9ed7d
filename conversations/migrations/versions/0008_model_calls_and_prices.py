"""model calls and prices: every call's run, position, latency, price entry and cost

The ``model_usage`` table becomes ``model_calls`` (its rows copied over, their new
columns empty), dated ``prices`` entries are added, and a continue request may
name the budget that asked it.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_COPIED = (
    "id, conversation_id, model, input_tokens, output_tokens, cache_read_tokens, "
    "cache_write_tokens, created_at"
)


def upgrade() -> None:
    op.create_table(
        "prices",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("input", sa.BigInteger(), nullable=False),
        sa.Column("output", sa.BigInteger(), nullable=False),
        sa.Column("cache_read", sa.BigInteger(), nullable=False),
        sa.Column("cache_write", sa.BigInteger(), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_prices_model", "prices", ["model"])
    op.create_table(
        "model_calls",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("conversation_id", sa.String(length=32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=True),
        sa.Column("run_id", sa.String(length=32), nullable=True),
        sa.Column("position", sa.String(length=64), nullable=True),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("cache_read_tokens", sa.Integer(), nullable=False),
        sa.Column("cache_write_tokens", sa.Integer(), nullable=False),
        sa.Column("latency_ms", sa.Integer(), nullable=True),
        sa.Column("price_id", sa.Integer(), nullable=True),
        sa.Column("cost_micro_usd", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["conversation_id"], ["conversations.id"]),
        sa.ForeignKeyConstraint(["price_id"], ["prices.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_model_calls_conversation_id", "model_calls", ["conversation_id"])
    op.create_index("ix_model_calls_created_at", "model_calls", ["created_at"])
    op.execute(f"INSERT INTO model_calls ({_COPIED}) SELECT {_COPIED} FROM model_usage")
    op.drop_index("ix_model_usage_conversation_id", table_name="model_usage")
    op.drop_table("model_usage")
    with op.batch_alter_table("pending_requests") as batch:
        batch.add_column(sa.Column("budget_scope", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pending_requests") as batch:
        batch.drop_column("budget_scope")
    op.create_table(
        "model_usage",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("conversation_id", sa.String(length=32), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("cache_read_tokens", sa.Integer(), nullable=False),
        sa.Column("cache_write_tokens", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["conversation_id"], ["conversations.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_model_usage_conversation_id", "model_usage", ["conversation_id"])
    op.execute(f"INSERT INTO model_usage ({_COPIED}) SELECT {_COPIED} FROM model_calls")
    op.drop_table("model_calls")
    op.drop_table("prices")
