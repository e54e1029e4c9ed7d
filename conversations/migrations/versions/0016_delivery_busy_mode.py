"""delivery busy mode: what a reply sent while a run worked became, as its 👀 line said

Kept with the reply so a restart queues it again the same way, whatever the setting is
then (docs/architecture.md, "What a person sees"). Deliveries recorded before have none:
a restart routes them by the setting, as before.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.add_column(sa.Column("busy_mode", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.drop_column("busy_mode")
