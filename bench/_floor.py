"""The floors' databases: the same schema, indexes and SQLite settings as threadbot's.

A floor never goes through threadbot's store. It gets a SQLite file migrated by
threadbot's own migrations (so tables and indexes are the app's), and opens it
with the settings the app gives every connection (``conversations/store/sql``):
``busy_timeout=10000``, ``journal_mode=WAL``, ``synchronous=NORMAL``,
``foreign_keys=ON``, the driver's own transaction handling off, and
``BEGIN IMMEDIATE`` for every write transaction. Three ways in, one per floor:

- :func:`core_engine`: SQLAlchemy Core on aiosqlite (an ``AsyncEngine``);
- :func:`aiosqlite_connection`: aiosqlite alone, one connection;
- :func:`sqlite3_connection`: the ``sqlite3`` module, synchronous.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import aiosqlite
from sqlalchemy import MetaData, event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

PRAGMAS = (
    "PRAGMA busy_timeout=10000",
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
)
"""What threadbot's store runs on every new SQLite connection, in this order."""

IMMEDIATE = {"bench_begin": "BEGIN IMMEDIATE"}
"""Execution options of a :func:`core_engine` connection whose transaction writes."""


def sqlite_url(path: Path, *, driver: str = "aiosqlite") -> str:
    """The SQLAlchemy URL of the SQLite file ``path``."""
    return f"sqlite+{driver}:///{path}"


async def migrated(path: Path) -> Path:
    """Create ``path`` as an empty database at threadbot's newest schema (its migrations)."""
    from conversations.render import render_event
    from conversations.store.backends import open_store

    store = await open_store(sqlite_url(path), render=render_event)
    await store.close()
    return path


def _on_connect(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    for pragma in PRAGMAS:
        cursor.execute(pragma)
    cursor.close()


def _on_begin(connection: Any) -> None:
    mode = connection.get_execution_options().get("bench_begin", "BEGIN")
    connection.exec_driver_sql(mode)


def core_engine(path: Path) -> AsyncEngine:
    """SQLAlchemy's async engine on aiosqlite for ``path``, set up as threadbot's.

    ``engine.begin()`` emits ``BEGIN``; with ``execution_options(**IMMEDIATE)`` on the
    connection, ``BEGIN IMMEDIATE``.
    """
    engine = create_async_engine(sqlite_url(path))
    event.listen(engine.sync_engine, "connect", _on_connect)
    event.listen(engine.sync_engine, "begin", _on_begin)
    return engine


async def reflect(engine: AsyncEngine) -> MetaData:
    """The tables of the database behind ``engine`` (as the migrations made them)."""
    metadata = MetaData()
    async with engine.connect() as conn:
        await conn.run_sync(metadata.reflect)
    return metadata


async def aiosqlite_connection(path: Path) -> aiosqlite.Connection:
    """One aiosqlite connection to ``path`` with threadbot's settings (close it after)."""
    conn = await aiosqlite.connect(path, isolation_level=None)
    for pragma in PRAGMAS:
        await conn.execute(pragma)
    return conn


def sqlite3_connection(path: Path) -> sqlite3.Connection:
    """One ``sqlite3`` connection to ``path`` with threadbot's settings (close it after)."""
    conn = sqlite3.connect(path, isolation_level=None)
    for pragma in PRAGMAS:
        conn.execute(pragma)
    return conn


def row_counts(path: Path, tables: tuple[str, ...]) -> dict[str, int]:
    """``{table: rows}`` of the database at ``path`` (to check a floor wrote the same rows)."""
    with sqlite3.connect(path) as db:
        return {t: int(db.execute(f"select count(*) from {t}").fetchone()[0]) for t in tables}
