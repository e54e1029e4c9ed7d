"""operator_sessions: the run inspector's signed-in browsers

One row per session: the SHA-256 of the id its cookie holds (never the id), the
operator's name, when it was opened and when it expires (docs/architecture.md, "The run
inspector").

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "operator_sessions",
        sa.Column("id_sha256", sa.String(length=64), nullable=False),
        sa.Column("operator", sa.String(length=64), nullable=False),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id_sha256", name="pk_operator_sessions"),
    )


def downgrade() -> None:
    op.drop_table("operator_sessions")
