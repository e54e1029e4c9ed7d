"""delivery claims: one process at a time delivers a conversation's outbox rows

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("conversations") as batch:
        batch.add_column(sa.Column("delivery_owner", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("delivery_until", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(
            sa.Column("delivery_epoch", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("delivery_taken_from", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("delivery_taken_from")
        batch.drop_column("delivery_epoch")
        batch.drop_column("delivery_until")
        batch.drop_column("delivery_owner")
