"""operator_sessions.token_digest: a session holds only with the token it signed in with

A short digest of the operator's ``token_sha256`` in force at the sign-in, so a session
ends when the operator is no longer named in the settings or their token is changed
(docs/architecture.md, "The run inspector"). The sessions opened before this revision
have an empty digest, which matches no token: their operators sign in again.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-09
"""

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("operator_sessions") as batch:
        batch.add_column(
            sa.Column("token_digest", sa.String(length=16), nullable=False, server_default="")
        )


def downgrade() -> None:
    with op.batch_alter_table("operator_sessions") as batch:
        batch.drop_column("token_digest")
