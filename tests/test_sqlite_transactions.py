"""SQLite through ``create_engine``: real transactions, the pragmas, writers that wait.

The sqlite3 driver's legacy mode emits no BEGIN before DDL (nor before a SELECT),
so SQLAlchemy emits it (issue 10). These tests pin what that must keep: DDL rolls
back with its transaction, the connection pragmas are still in effect, and write
transactions of several processes on one file wait for each other instead of
failing with "database is locked".
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from conversations.render import render_event
from conversations.store import Store, migrate
from conversations.store.sql import SqlStore, create_engine, database


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'store.db'}")
    await migrate.upgrade(engine)
    yield engine
    await engine.dispose()


async def test_ddl_rolls_back_with_its_transaction(engine: AsyncEngine) -> None:
    with pytest.raises(RuntimeError):
        async with engine.begin() as connection:
            await connection.execute(text("create table scratch (x integer)"))
            await connection.execute(text("insert into scratch values (1)"))
            raise RuntimeError("killed half-way")

    async with engine.connect() as connection:
        found = await connection.execute(
            text("select name from sqlite_master where name = 'scratch'")
        )
        assert found.all() == []


async def test_every_connection_keeps_its_pragmas(engine: AsyncEngine) -> None:
    async with engine.connect() as connection:
        pragmas = {
            name: (await connection.execute(text(f"pragma {name}"))).scalar_one()
            for name in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
        }
    assert pragmas == {
        "journal_mode": "wal",
        "synchronous": 1,  # NORMAL
        "foreign_keys": 1,
        "busy_timeout": 10000,
    }


async def test_writers_on_one_file_wait_for_each_other(tmp_path: Path, engine: AsyncEngine) -> None:
    """Four stores, each its own engine and write lock, as four processes would be.

    Each delivery is a transaction that reads, then writes; with a deferred BEGIN
    some would fail at once with SQLITE_BUSY when another store committed between.
    """
    url = f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    stores = [SqlStore(engine=create_engine(url), render=render_event) for _ in range(4)]

    async def deliver(store: Store, name: str) -> list[bool]:
        return [await store.inbox.record_delivery(f"{name}-{n % 20}") for n in range(40)]

    try:
        taken = await asyncio.gather(*(deliver(s, f"s{i}") for i, s in enumerate(stores)))
    finally:
        for store in stores:
            await store.close()

    assert all(t == [True] * 20 + [False] * 20 for t in taken)  # each key taken once


class LockedCursor:
    """A cursor whose ``PRAGMA journal_mode=WAL`` fails ``locked`` times, as it does
    while another process turns a new file to WAL at the same moment."""

    def __init__(self, locked: int, error: str = "database is locked") -> None:
        self.locked = locked
        self.error = error
        self.tries = 0

    def execute(self, statement: str) -> None:
        self.tries += 1
        if self.tries <= self.locked:
            raise sqlite3.OperationalError(self.error)


def test_turning_wal_on_is_tried_again_while_another_process_holds_the_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(database, "WAL_WAIT", 0)
    cursor = LockedCursor(locked=3)
    database._wal(cursor)
    assert cursor.tries == 4
    for hopeless in (LockedCursor(locked=1, error="disk I/O error"), LockedCursor(10**6)):
        with pytest.raises(sqlite3.OperationalError):
            database._wal(hopeless)
    assert hopeless.tries == database.WAL_TRIES
