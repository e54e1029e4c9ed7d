"""Create or upgrade the store's schema with Alembic (at start, and ``threadbot db upgrade``).

The migration scripts live in ``conversations/migrations``; no ``alembic.ini`` is
needed. Raises ``sqlalchemy.exc.SQLAlchemyError`` when the database cannot be reached.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncEngine


def alembic_config(url: str = "") -> Config:
    """An Alembic config pointing at the packaged migrations (and ``url`` for the CLI)."""
    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    if url:
        config.set_main_option("sqlalchemy.url", url)
    return config


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Upgrade the database behind ``engine`` to ``revision`` (default: the newest)."""

    def run(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.upgrade(config, revision)

    async with engine.begin() as connection:
        await connection.run_sync(run)


async def current_revision(engine: AsyncEngine) -> str | None:
    """The revision the database is at, or None before the first migration."""
    from alembic.runtime.migration import MigrationContext

    def read(connection: Connection) -> str | None:
        return MigrationContext.configure(connection).get_current_revision()

    async with engine.connect() as connection:
        return await connection.run_sync(read)
