"""fenced leases: an epoch per conversation lease; an index for pending outbox rows

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("conversations") as batch:
        batch.add_column(sa.Column("lease_epoch", sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("outbox") as batch:
        batch.create_index("ix_outbox_pending", ["state", "conversation_id", "id"])


def downgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.drop_index("ix_outbox_pending")
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("lease_epoch")
