"""Kill a schema upgrade after each of its DDL statements, then start again.

Run as ``python -m tests.migration_crashes DIR`` (a fresh process, so forking is
safe): for every migration, in order, it builds the database as it was before
that migration with rows in every table (upgraded one revision at a time, rows
seeded at each), and a clean copy of it upgraded to the newest revision. Then,
for N = 1, 2, ...: a forked child upgrades a copy to that migration with
``after_ddl:N`` armed and dies by SIGKILL after its N-th DDL statement; the
driver then upgrades the copy to the newest revision as the next start does.
It stops when a child finishes without reaching its N-th statement. It prints a
JSON manifest of the databases it left in DIR for the test to check
(tests/test_migration_faults.py).

Forking one warm process per crash point keeps all of this to a few seconds;
each child still is a real process killed by the kernel in the middle of its
transaction.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import sys
import traceback
from pathlib import Path
from typing import Any, NoReturn

from alembic.script import ScriptDirectory

from conversations.store import migrate
from conversations.store.sql import create_engine
from core.faults import Faults

NOT_SEEDED = ("alembic_version",)


def revisions() -> list[str]:
    """Every migration's revision, oldest first."""
    script = ScriptDirectory.from_config(migrate.alembic_config())
    return [r.revision for r in reversed(list(script.walk_revisions()))]


def upgrade(db: Path, revision: str = "head", faults: Faults | None = None) -> None:
    """Upgrade the SQLite file ``db`` as the bot does at start."""

    async def run() -> None:
        engine = create_engine(f"sqlite+aiosqlite:///{db}")
        try:
            await migrate.upgrade(engine, revision, faults=faults or Faults())
        finally:
            await engine.dispose()

    asyncio.run(run())


def tables(db: Path) -> list[str]:
    """The store's tables in ``db``, ``conversations`` and ``prices`` first (others refer
    to them)."""
    with sqlite3.connect(db) as conn:
        names = [
            row[0]
            for row in conn.execute(
                "select name from sqlite_master where type = 'table' "
                "and name not like 'sqlite_%' order by name"
            )
            if row[0] not in NOT_SEEDED
        ]
    return sorted(names, key=lambda name: name not in ("conversations", "prices"))


def columns(db: Path, table: str) -> list[tuple[str, str]]:
    """``(name, declared type)`` of each column of ``table``."""
    with sqlite3.connect(db) as conn:
        return [(row[1], row[2]) for row in conn.execute(f"pragma table_info({table})")]


def seed(db: Path, tag: str, number: int, per_table: int = 2) -> None:
    """Insert ``per_table`` rows into every table of ``db``, every column filled.

    Values follow the declared type and are unique per ``tag`` (a revision) and
    ``number`` (for integer columns);
    ids that refer to another table agree (``conversation_id`` to a seeded
    conversation, an outbox row's ``request_id`` to a seeded request), so
    foreign keys hold and the data a migration copies is there to copy.
    """
    with sqlite3.connect(db) as conn:
        conn.execute("pragma foreign_keys = on")
        for table in tables(db):
            cols = columns(db, table)
            for n in range(1, per_table + 1):
                values = [
                    _value(table, name, kind, f"{tag}-{n}", number * 100 + n) for name, kind in cols
                ]
                marks = ", ".join("?" for _ in cols)
                names = ", ".join(name for name, _ in cols)
                conn.execute(f"insert into {table} ({names}) values ({marks})", values)


def _value(table: str, name: str, kind: str, tag: str, number: int) -> object:
    if name == "conversation_id" or (table == "conversations" and name == "id"):
        return f"c{tag}"
    if name == "request_id" or (table == "pending_requests" and name == "id"):
        return f"r{tag}"
    if name == "purpose":
        return "milestone"
    kind = kind.upper()
    if kind.startswith(("INTEGER", "BIGINT")):
        return number
    if kind == "BOOLEAN":
        return number % 2
    if kind == "DATETIME":
        return f"2026-01-01 12:00:{number % 60:02d}.000000"
    if kind == "JSON":
        return json.dumps({"seeded": tag})
    return f"{name}-{tag}"


def copy(source: Path | None, target: Path) -> Path:
    """``target``, a copy of the database ``source`` (a new, empty one for None)."""
    for leftover in (target, *(target.with_name(target.name + s) for s in ("-wal", "-shm"))):
        leftover.unlink(missing_ok=True)
    if source is not None:
        with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
            src.backup(dst)
    return target


def _die_after_ddl(db: Path, revision: str, n: int) -> NoReturn:
    """In a forked child: upgrade ``db`` to ``revision``, armed to die at DDL ``n``."""
    try:
        upgrade(db, revision, Faults(f"after_ddl:{n}"))
    except BaseException:
        traceback.print_exc()
        os._exit(1)
    os._exit(0)


def crash_once(db: Path, revision: str, n: int) -> str:
    """``"killed"``, ``"finished"`` (fewer than ``n`` DDL statements) or ``"failed"``."""
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        _die_after_ddl(db, revision, n)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
        return "killed"
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return "finished"
    return "failed"


def crash_every_ddl(folder: Path) -> dict[str, Any]:
    """Crash each migration after each DDL statement; the manifest of what is left."""
    manifest: dict[str, Any] = {"revisions": revisions(), "ddl_counts": {}, "crashes": []}
    growing = folder / "growing.db"
    before: Path | None = None
    for index, revision in enumerate(manifest["revisions"]):
        if index:
            upgrade(growing, manifest["revisions"][index - 1])
            seed(growing, manifest["revisions"][index - 1], index)
            before = copy(growing, folder / f"{revision}-before.db")
        clean = copy(before, folder / f"{revision}-clean.db")
        upgrade(clean)
        n = 1
        while True:
            db = copy(before, folder / f"{revision}-{n}.db")
            outcome = crash_once(db, revision, n)
            if outcome != "killed":
                break
            upgrade(db)  # the next start
            crash = {"revision": revision, "n": n, "db": str(db), "clean": str(clean)}
            manifest["crashes"].append(crash | {"before": str(before or "")})
            n += 1
        if outcome == "failed":
            raise SystemExit(f"migration {revision} failed (not killed) with after_ddl:{n}")
        manifest["ddl_counts"][revision] = n - 1
    return manifest


if __name__ == "__main__":
    print(json.dumps(crash_every_ddl(Path(sys.argv[1]))))
