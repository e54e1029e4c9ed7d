"""Create or upgrade the store's schema with Alembic (at start, and ``threadbot db upgrade``).

The migration scripts live in ``conversations/migrations``; no ``alembic.ini`` is
needed. An upgrade is all or nothing: every migration it runs goes in one
transaction, on SQLite too (:func:`conversations.store.sql.create_engine` makes
SQLite's DDL transactional, and ``migrations/env.py`` tells Alembic so), so a
process killed half-way leaves the database as it was and the next start runs the
whole upgrade again. Raises ``sqlalchemy.exc.SQLAlchemyError`` when the database
cannot be reached, and :class:`SchemaNewer` when its schema is newer than these
scripts.

Several instances may start at once on one database (docs/architecture.md,
"Durability and exactly-once"): the upgrade runs once. On PostgreSQL each upgrade
first takes a transaction-level advisory lock (:data:`MIGRATION_LOCK`, released
when its transaction ends), so the others wait for the first and then find the
schema at the newest revision; on SQLite ``BEGIN IMMEDIATE`` takes the database's
write lock for the same effect.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Connection, event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from conversations.store.sql.database import BEGIN_IMMEDIATE
from core.faults import NO_FAULTS, Faults

_DDL = frozenset({"CREATE", "ALTER", "DROP"})

MIGRATION_LOCK = 0x7468726561646231
"""The PostgreSQL advisory lock key an upgrade holds for its transaction (a bigint: the
ASCII of ``threadb1``); https://www.postgresql.org/docs/current/explicit-locking.html,
"Advisory Locks"."""


class SchemaNewer(CommandError):
    """The database's schema is at a revision these migration scripts do not have: a newer
    threadbot upgraded it. Raised instead of running anything; its message names both
    revisions and how to go on. A ``CommandError``, so the CLI says it in one line
    and exits 2 (``threadbot run`` and ``threadbot db upgrade`` alike)."""

    def __init__(self, database: str, newest: str) -> None:
        self.database = database
        self.newest = newest
        super().__init__(
            f"the database's schema is at revision {database}, newer than this threadbot "
            f"knows (its newest is {newest}): a newer threadbot upgraded it. Run the newer "
            "threadbot on every instance (then `threadbot db upgrade` is a no-op), or "
            "restore a backup of the database taken before that upgrade"
        )


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
    SQLite and with ``pg_advisory_xact_lock(MIGRATION_LOCK)`` on PostgreSQL, so
    two processes starting on one new database do not both create the schema: the
    second waits for the first (SQLite: up to ``busy_timeout``; PostgreSQL: as
    long as the first takes), then finds it at ``revision``. Raises
    :class:`SchemaNewer`, having changed nothing, when the database is at a
    revision these scripts do not have. ``faults`` may kill the process after any
    DDL statement (the ``after_ddl`` point, for crash tests).
    """

    def run(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        refuse_newer(connection, config)
        with _faults_after_ddl(connection, faults):
            command.upgrade(config, revision)

    async with engine.connect() as connection:
        await connection.execution_options(**BEGIN_IMMEDIATE)
        async with connection.begin():
            if connection.dialect.name == "postgresql":
                await connection.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK}
                )
            await connection.run_sync(run)


def refuse_newer(connection: Connection, config: Config | None = None) -> None:
    """Raise :class:`SchemaNewer` when the database behind ``connection`` is at a revision
    the scripts of ``config`` (default: the packaged ones) do not have; else nothing."""
    from alembic.runtime.migration import MigrationContext

    scripts = ScriptDirectory.from_config(config or alembic_config())
    known = {script.revision for script in scripts.walk_revisions()}
    for current in MigrationContext.configure(connection).get_current_heads():
        if current not in known:
            raise SchemaNewer(current, scripts.get_current_head() or "none")


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


def newest_revision() -> str:
    """The newest revision of the packaged migrations (what ``threadbot db upgrade`` reaches)."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head() or "none"


async def current_revision(engine: AsyncEngine) -> str | None:
    """The revision the database is at, or None before the first migration."""
    from alembic.runtime.migration import MigrationContext

    def read(connection: Connection) -> str | None:
        return MigrationContext.configure(connection).get_current_revision()

    async with engine.connect() as connection:
        return await connection.run_sync(read)
