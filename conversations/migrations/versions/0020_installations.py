"""installations: the app's installs per workspace (tokens sealed), and the OAuth states

``installations``: one row per ``(platform, enterprise, team)``, its bot token and refresh
token sealed with the key of ``THREADBOT_TOKEN_KEYS`` (never in plain text), kept without
them once the app is uninstalled. ``oauth_states``: the install page's ``state`` values,
each taken once before it expires (docs/architecture.md, "Several instances").

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "installations",
        sa.Column("platform", sa.String(length=32), nullable=False),
        sa.Column("enterprise", sa.String(length=64), nullable=False),
        sa.Column("team", sa.String(length=64), nullable=False),
        sa.Column("bot_token", sa.Text(), nullable=False),
        sa.Column("refresh_token", sa.Text(), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("bot_id", sa.String(length=64), nullable=False),
        sa.Column("bot_user_id", sa.String(length=64), nullable=False),
        sa.Column("scopes", sa.Text(), nullable=False),
        sa.Column("app_id", sa.String(length=64), nullable=False),
        sa.Column("team_name", sa.String(length=256), nullable=False),
        sa.Column("enterprise_name", sa.String(length=256), nullable=False),
        sa.Column("installer", sa.String(length=64), nullable=False),
        sa.Column("enterprise_install", sa.Boolean(), nullable=False),
        sa.Column("installed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("removed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("removed_why", sa.String(length=32), nullable=False),
        sa.PrimaryKeyConstraint("platform", "enterprise", "team", name="pk_installations"),
    )
    op.create_table(
        "oauth_states",
        sa.Column("state", sa.String(length=128), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("state", name="pk_oauth_states"),
    )


def downgrade() -> None:
    op.drop_table("oauth_states")
    op.drop_table("installations")
