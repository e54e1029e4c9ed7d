"""Alembic environment: runs on a connection handed in by
:func:`conversations.store.migrate.upgrade`.

Follows Alembic's cookbook recipe "Programmatic API use (connection sharing) with
asyncio": https://alembic.sqlalchemy.org/en/latest/cookbook.html

Migrations are transactional on SQLite too. Alembic treats SQLite as a database
without transactional DDL and then runs the migrations outside any transaction;
``transactional_ddl=True`` makes it run them inside one
(https://alembic.sqlalchemy.org/en/latest/api/runtime.html, ``EnvironmentContext.configure``),
and the engine from :func:`conversations.store.sql.create_engine` makes SQLite
really begin one, so a migration killed half-way leaves nothing behind. When
:func:`conversations.store.migrate.upgrade` hands in a connection already in its
transaction, Alembic runs everything in that one.
"""

import asyncio

from alembic import context
from sqlalchemy import Connection

from conversations.store.schema import Base
from conversations.store.sql.database import BEGIN_IMMEDIATE, create_engine

target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,
        transactional_ddl=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_from_url(url: str) -> None:
    """The ``alembic`` command line, e.g. ``alembic revision --autogenerate``."""
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            await connection.execution_options(**BEGIN_IMMEDIATE)
            await connection.run_sync(_run)
    finally:
        await engine.dispose()


connection = context.config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    asyncio.run(_run_from_url(context.config.get_main_option("sqlalchemy.url") or ""))
