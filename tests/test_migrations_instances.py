"""Several instances on one database: the migrations run once, and a newer schema is refused.

Issue 26 ("PostgreSQL"): instances starting at once on an empty database upgrade it
once (an advisory lock on PostgreSQL, the write lock on SQLite), the same
migrations give PostgreSQL the declared schema, and an instance older than the
database's schema refuses to start, naming both revisions.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, event, text

from conversations.store import migrate
from conversations.store.schema import Base
from conversations.store.sql import create_engine
from tests.cli_harness import threadbot

HEAD = ScriptDirectory.from_config(migrate.alembic_config()).get_current_head()
FUTURE = "0999_from_a_newer_threadbot"


@pytest.fixture(params=["postgresql", "sqlite"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a database without any schema yet, on each SQL backend."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'new.db'}"
    url: str = request.getfixturevalue("empty_postgres_database")
    return url


@pytest.mark.timeout(120)  # without the lock the three upgrades may wait on each other
async def test_instances_starting_at_once_on_an_empty_database_migrate_it_once(
    empty_url: str,
) -> None:
    engines = [create_engine(empty_url) for _ in range(3)]
    first_stamps: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO ALEMBIC_VERSION"):
            first_stamps.append(statement)

    for engine in engines:
        event.listen(engine.sync_engine, "after_cursor_execute", seen)
    try:
        await asyncio.gather(*(migrate.upgrade(engine) for engine in engines))
        revisions = [await migrate.current_revision(engine) for engine in engines]
    finally:
        for engine in engines:
            await engine.dispose()

    assert revisions == [HEAD] * 3
    assert len(first_stamps) == 1, first_stamps  # the first migration ran once, not thrice


async def test_the_migrations_give_postgresql_the_declared_schema(
    empty_postgres_database: str,
) -> None:
    engine = create_engine(empty_postgres_database)
    try:
        await migrate.upgrade(engine)

        def differences(connection: Connection) -> list[Any]:
            return list(compare_metadata(MigrationContext.configure(connection), Base.metadata))

        async with engine.connect() as connection:
            assert await connection.run_sync(differences) == []
    finally:
        await engine.dispose()


async def _stamp(url: str, revision: str) -> None:
    engine = create_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.execute(
                text("UPDATE alembic_version SET version_num = :v"), {"v": revision}
            )
    finally:
        await engine.dispose()


async def test_an_instance_older_than_the_schema_refuses_it_naming_both_revisions(
    empty_url: str,
) -> None:
    engine = create_engine(empty_url)
    try:
        await migrate.upgrade(engine)
        await _stamp(empty_url, FUTURE)
        with pytest.raises(migrate.SchemaNewer) as refused:
            await migrate.upgrade(engine)
        assert await migrate.current_revision(engine) == FUTURE  # nothing changed
    finally:
        await engine.dispose()
    said = str(refused.value)
    assert FUTURE in said and f"its newest is {HEAD}" in said
    assert "newer threadbot" in said


def test_threadbot_run_and_db_upgrade_refuse_a_newer_schema_with_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "bot.db"
    env = {"THREADBOT_DATABASE_URL": f"sqlite+aiosqlite:///{db}"}
    assert threadbot(tmp_path, "db", "upgrade", env=env).returncode == 0
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE alembic_version SET version_num = ?", (FUTURE,))

    for command in (("db", "upgrade"), ("run",)):
        result = threadbot(tmp_path, *command, stdin="hi\n", env=env)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert FUTURE in result.stderr and HEAD in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
