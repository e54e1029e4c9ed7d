"""typed requests: tool records point at the request they opened, verdicts as JSON

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

- ``tool_calls.request_id``: a control call (``propose_plan``, ``ask_user``) keeps
  its ``approved`` record while it waits and points at the request it opened;
  the request carries the wait. Records written before, with the tool state the
  call borrowed (``pending_approval``, ``running``), are read by ``conversations.store.legacy``.
- ``pending_requests.verdict``: what was decided, a tagged union
  (``core.vocabulary.verdicts``) as JSON. Rows decided before keep their text in
  ``decision`` and are read by ``conversations.store.legacy``; no row is rewritten.
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tool_calls") as batch:
        batch.add_column(sa.Column("request_id", sa.String(length=64), nullable=True))
    with op.batch_alter_table("pending_requests") as batch:
        batch.add_column(sa.Column("verdict", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pending_requests") as batch:
        batch.drop_column("verdict")
    with op.batch_alter_table("tool_calls") as batch:
        batch.drop_column("request_id")
