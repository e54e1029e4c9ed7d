"""stops aimed at runs: a stop request names the run it was sent to end

``stop_requests.run_seq``: the ``seq`` of the request that began the run the stop was
aimed at (null: a request written before this revision, aimed at whatever runs). The
holder stops that run only; a later run goes on and the thread is told the stop came
too late (docs/architecture.md, "One mention, one approval, one stop").

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("stop_requests") as batch:
        batch.add_column(sa.Column("run_seq", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("stop_requests") as batch:
        batch.drop_column("run_seq")
