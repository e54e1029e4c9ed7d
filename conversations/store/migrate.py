"""Create or upgrade the store's schema with Alembic (at start, and ``threadbot db upgrade``).

The migration scripts live in ``conversations/migrations``; no ``alembic.ini`` is
needed. An upgrade is all or nothing: every migration it runs goes in one
transaction, on SQLite too (:func:`conversations.store.sql.create_engine` makes
SQLite's DDL transactional, and ``migrations/env.py`` tells Alembic so), so a
process killed half-way leaves the database as it was and the next start runs the
whole upgrade again. Raises ``sqlalchemy.exc.SQLAlchemyError`` when the database
cannot be reached.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, event
from sqlalchemy.ext.asyncio import AsyncEngine

from conversations.store.sql.database import BEGIN_IMMEDIATE
from core.faults import NO_FAULTS, Faults

_DDL = frozenset({"CREATE", "ALTER", "DROP"})


def alembic_config(url: str = "") -> Config:
    """An Alembic config pointing at the packaged migrations (and ``url`` for the CLI)."""
    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parents[1] / "migrations"))
    if url:
        config.set_main_option("sqlalchemy.url", url)
    return config


async def upgrade(
    engine: AsyncEngine, revision: str = "head", *, faults: Faults = NO_FAULTS
) -> None:
    """Upgrade the database behind ``engine`` to ``revision`` (default: the newest).

    One transaction for the whole upgrade, begun with ``BEGIN IMMEDIATE`` on
    SQLite, so two processes starting on one new file do not both create the
    schema: the second waits for the first (``busy_timeout``), then finds it at
    ``revision``. ``faults`` may kill the process after any DDL statement
    (the ``after_ddl`` point, for crash tests).
    """

    def run(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        with _faults_after_ddl(connection, faults):
            command.upgrade(config, revision)

    async with engine.connect() as connection:
        await connection.execution_options(**BEGIN_IMMEDIATE)
        async with connection.begin():
            await connection.run_sync(run)


@contextmanager
def _faults_after_ddl(connection: Connection, faults: Faults) -> Iterator[None]:
    """Hit ``after_ddl`` after each DDL statement ``connection`` runs meanwhile."""

    def after(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        words = statement.split(None, 1)
        if words and words[0].upper() in _DDL:
            faults.hit("after_ddl")

    event.listen(connection, "after_cursor_execute", after)
    try:
        yield
    finally:
        event.remove(connection, "after_cursor_execute", after)


async def current_revision(engine: AsyncEngine) -> str | None:
    """The revision the database is at, or None before the first migration."""
    from alembic.runtime.migration import MigrationContext

    def read(connection: Connection) -> str | None:
        return MigrationContext.configure(connection).get_current_revision()

    async with engine.connect() as connection:
        return await connection.run_sync(read)
