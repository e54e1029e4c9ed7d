"""model call roles: the role whose model each call asked (planner, executor, expert)

Calls made before are kept with no role (``threadbot usage --by role`` counts them
under ``(none)``).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("model_calls") as batch:
        batch.add_column(sa.Column("role", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("model_calls") as batch:
        batch.drop_column("role")
