"""Alembic environment: runs on a connection handed in by :func:`conversations.migrate.upgrade`.

Follows Alembic's cookbook recipe "Programmatic API use (connection sharing) with
asyncio": https://alembic.sqlalchemy.org/en/latest/cookbook.html
"""

from alembic import context
from sqlalchemy import create_engine

from conversations.store.schema import Base

target_metadata = Base.metadata


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:  # the `alembic` command line, e.g. `alembic revision --autogenerate`
    url = context.config.get_main_option("sqlalchemy.url").replace("+aiosqlite", "")
    with create_engine(url).connect() as sync_connection:
        _run(sync_connection)
        sync_connection.commit()
