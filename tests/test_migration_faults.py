"""A schema upgrade killed anywhere leaves a database the next start upgrades, rows intact.

Issue 10, acceptance 1: a fault point after every DDL statement of every
migration (``THREADBOT_FAULT=after_ddl:N``). The crash points are run by
``tests/migration_crashes.py`` in a process of its own (a forked child per
point); this module checks what each crash and the start after it left behind,
against the same database upgraded without a crash.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine as create_sync_engine

from conversations.store.schema import Base
from tests import forkserver, migration_crashes
from tests.migration_crashes import columns, copy, seed, tables, upgrade

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def crashes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The manifest of ``tests/migration_crashes.py``, run once for this module."""
    folder = tmp_path_factory.mktemp("migration-crashes")
    driver = forkserver.run(
        [sys.executable, "-m", "tests.migration_crashes", str(folder)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(),
        timeout=100,
    )
    assert driver.returncode == 0, driver.stderr
    manifest: dict[str, Any] = json.loads(driver.stdout)
    return manifest


def test_every_migration_is_killed_after_each_of_its_ddl_statements(
    crashes: dict[str, Any],
) -> None:
    revisions = crashes["revisions"]
    assert revisions == migration_crashes.revisions()
    assert all(crashes["ddl_counts"][r] > 0 for r in revisions), crashes["ddl_counts"]
    points = {(c["revision"], c["n"]) for c in crashes["crashes"]}
    assert points == {(r, n) for r in revisions for n in range(1, crashes["ddl_counts"][r] + 1)}


def test_after_each_kill_the_next_start_keeps_every_row_and_the_clean_schema(
    crashes: dict[str, Any],
) -> None:
    head = crashes["revisions"][-1]
    for crash in crashes["crashes"]:
        db, clean, where = Path(crash["db"]), Path(crash["clean"]), crash
        assert _version(db) == head, where
        if crash["before"]:
            before = Path(crash["before"])
            for table in tables(before):
                kept = _rows(db, RENAMED.get(table, table), before, table)
                assert kept == _rows(before, table, before), (table, where)
        assert _dump(db) == _dump(clean), where
        assert _schema(db) == _schema(clean), where
        assert _compare(db) == [], where


def test_a_clean_upgrade_matches_the_declared_schema(crashes: dict[str, Any]) -> None:
    clean = {c["clean"] for c in crashes["crashes"]}
    assert clean and all(_compare(Path(db)) == [] for db in clean)


def test_a_bot_killed_while_creating_its_schema_starts_next_time(tmp_path: Path) -> None:
    env = _env() | {"THREADBOT_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}"}
    killed = _bot(tmp_path, env | {"THREADBOT_FAULT": "after_ddl:5"}, "hello\n", "run")
    assert killed.returncode == -signal.SIGKILL
    with sqlite3.connect(tmp_path / "bot.db") as db:
        assert db.execute("select name from sqlite_master").fetchall() == []

    started = _bot(tmp_path, env, "hello\n", "run")
    assert started.returncode == 0, started.stderr
    assert "📋 Plan (v1)" in started.stdout


def test_db_upgrade_killed_in_the_tool_record_key_change_keeps_the_tool_records(
    tmp_path: Path,
) -> None:
    db = tmp_path / "bot.db"
    upgrade(db, "0004")
    seed(db, "0004", 4)
    before = copy(db, tmp_path / "before.db")
    records = _rows(before, "tool_calls", before)
    env = _env() | {"THREADBOT_DATABASE_URL": f"sqlite+aiosqlite:///{db}"}
    # 0005's third DDL statement drops the old tool_calls, its rows copied aside
    killed = _bot(tmp_path, env | {"THREADBOT_FAULT": "after_ddl:3"}, "", "db", "upgrade")
    assert killed.returncode == -signal.SIGKILL
    assert _version(db) == "0004"

    upgraded = _bot(tmp_path, env, "", "db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    assert _version(db) == migration_crashes.revisions()[-1]
    assert len(records) == 2 and _rows(db, "tool_calls", before) == records


# --- reading the databases ------------------------------------------------------


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "THREADBOT_"))}
    return env | {"PYTHONPATH": str(ROOT)}


def _bot(
    folder: Path, env: dict[str, str], stdin: str, *command: str
) -> subprocess.CompletedProcess[str]:
    return forkserver.run(
        [sys.executable, "-m", "bot", *command],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=folder,
        env=env | {"THREADBOT_WORKSPACE_ROOT": str(folder / "workspaces")},
        timeout=60,
    )


def _query(db: Path, statement: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(statement).fetchall()


def _version(db: Path) -> str:
    return str(_query(db, "select version_num from alembic_version")[0][0])


RENAMED = {"model_usage": "model_calls"}
"""Tables a migration renamed (0008), their rows kept under the new name."""


def _rows(
    db: Path, table: str, shape: Path, shape_table: str | None = None
) -> list[tuple[Any, ...]]:
    """Rows of ``table`` in ``db``, sorted, in the columns ``shape_table`` (``table``) has
    in ``shape``."""
    names = ", ".join(name for name, _ in columns(shape, shape_table or table))
    return sorted(_query(db, f"select {names} from {table}"), key=repr)


def _dump(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    return {table: _rows(db, table, db) for table in tables(db)}


def _schema(db: Path) -> list[tuple[Any, ...]]:
    return sorted(_query(db, "select type, name, tbl_name, sql from sqlite_master"), key=repr)


def _compare(db: Path) -> list[Any]:
    """Alembic's differences between ``db`` and the declared tables (none: same schema)."""
    engine = create_sync_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            return list(compare_metadata(MigrationContext.configure(conn), Base.metadata))
    finally:
        engine.dispose()
