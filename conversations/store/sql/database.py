"""The one database every SQL interface shares: its engine, sessions and write transactions.

Every write is one transaction. Writes of one process are serialised by one lock
(SQLite has one writer anyway; WAL lets readers go on), and each begins with
``BEGIN IMMEDIATE`` on SQLite (:class:`WriteTransaction` says why).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from sqlalchemy import Table, event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from conversations.store.schema import ConversationRow
from core.errors import ConversationNotFound

_BEGIN_MODE = "threadbot_sqlite_begin"
_BEGIN_MODES = frozenset({"DEFERRED", "IMMEDIATE", "EXCLUSIVE"})

BEGIN_IMMEDIATE: Mapping[str, str] = MappingProxyType({_BEGIN_MODE: "IMMEDIATE"})
"""Execution options for a connection whose transactions will write: on SQLite they
begin with ``BEGIN IMMEDIATE`` (see :func:`create_engine`); other databases ignore them."""


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    """On each new connection: the driver's own transaction handling off, then the pragmas.

    With ``isolation_level = None`` the sqlite3 driver (under aiosqlite) emits no
    BEGIN of its own; :func:`_sqlite_begin` emits it instead (SQLAlchemy's recipe,
    https://docs.sqlalchemy.org/en/20/dialects/sqlite.html#serializable-isolation-savepoints-transactional-ddl).
    The pragmas run here, before any transaction: ``journal_mode`` cannot change
    inside one (https://www.sqlite.org/pragma.html#pragma_journal_mode) and
    ``foreign_keys`` is a no-op inside one
    (https://www.sqlite.org/pragma.html#pragma_foreign_keys).
    """
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout=10000")  # first: turning WAL on may wait for a lock
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _sqlite_begin(connection: Connection) -> None:
    """Emit the BEGIN of a SQLAlchemy transaction: ``BEGIN``, or ``BEGIN IMMEDIATE`` for
    a connection with :data:`BEGIN_IMMEDIATE`. Raises ``ValueError`` for another mode."""
    mode = connection.get_execution_options().get(_BEGIN_MODE)
    if mode is not None and mode not in _BEGIN_MODES:
        raise ValueError(f"{_BEGIN_MODE} must be one of {sorted(_BEGIN_MODES)}, not {mode!r}")
    connection.exec_driver_sql(f"BEGIN {mode}" if mode else "BEGIN")


def create_engine(url: str, **options: Any) -> AsyncEngine:
    """An async engine for ``url``; for SQLite, makes the file's folder and sets it up.

    SQLite gets WAL (readers go on while one process writes), ``synchronous=NORMAL``,
    foreign keys, a 10 s ``busy_timeout``, and real transactions: SQLAlchemy emits
    ``BEGIN`` when a transaction begins, so every statement of it, DDL included,
    commits or rolls back together (the sqlite3 driver's legacy mode emits BEGIN
    only before INSERT/UPDATE/DELETE, so each ``CREATE TABLE`` committed on its own:
    https://docs.sqlalchemy.org/en/20/dialects/sqlite.html#serializable-isolation-savepoints-transactional-ddl).
    A transaction on a connection with :data:`BEGIN_IMMEDIATE` takes the write lock
    at ``BEGIN`` (see :class:`WriteTransaction` for why). ``options`` go to
    SQLAlchemy's ``create_async_engine`` (a pool size, for one).
    """
    parsed = make_url(url)
    engine = create_async_engine(url, **options)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        event.listen(engine.sync_engine, "begin", _sqlite_begin)
    return engine


def writer_engine(engine: AsyncEngine) -> AsyncEngine:
    """The engine a process writes through: one connection, its transactions ``BEGIN IMMEDIATE``.

    For a SQLite file, a second engine on the same file whose pool holds one
    connection: every write of the process goes through it, one transaction at a
    time, while reads take the other engine's connections and, in WAL mode, never
    wait for it (https://www.sqlite.org/wal.html). An in-memory SQLite database
    cannot be opened twice, and a server database has no single-writer rule: there
    the engine itself is used.
    """
    url = engine.url
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        writer = create_engine(
            url.render_as_string(hide_password=False), pool_size=1, max_overflow=0
        )
    else:
        writer = engine
    return writer.execution_options(**BEGIN_IMMEDIATE)


class Database:
    """One engine for reads, one writer connection, the write lock, and who to tell about
    new outbox rows.

    ``read()`` opens a session for reads (deferred: never waits for a writer);
    ``write()`` one write transaction on the writer connection
    (:func:`writer_engine`). ``on_outbox`` is called after a write that added
    outbox rows committed (the deliverer wakes up).
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._writer = writer_engine(engine)
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)
        self._write_sessions = async_sessionmaker(self._writer, expire_on_commit=False)
        self._write_lock = asyncio.Lock()
        self._upserts: dict[tuple[Table, tuple[str, ...]], Any] = {}
        self.on_outbox: Callable[[], None] = lambda: None

    def upsert(self, table: Table, keys: tuple[str, ...]) -> Any:
        """``INSERT`` into ``table`` that updates every other column of a row whose ``keys``
        exist (``ON CONFLICT (keys) DO UPDATE``; SQLite and PostgreSQL spell it alike:
        https://docs.sqlalchemy.org/en/20/dialects/sqlite.html#insert-on-conflict-upsert).
        Execute it with a list of rows. Raises ``NotImplementedError`` on another database."""
        cached = self._upserts.get((table, keys))
        if cached is not None:
            return cached
        name = self.engine.dialect.name
        if name == "sqlite":
            from sqlalchemy.dialects.sqlite import insert
        elif name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert  # type: ignore[assignment]
        else:
            raise NotImplementedError(f"no upsert for the {name} database")
        stmt = insert(table)
        columns = [c.name for c in table.columns if c.name not in keys]
        upsert = stmt.on_conflict_do_update(
            index_elements=list(keys), set_={c: stmt.excluded[c] for c in columns}
        )
        self._upserts[(table, keys)] = upsert
        return upsert

    def read(self) -> AsyncSession:
        """A session for reads: ``async with db.read() as session``."""
        return self._sessions()

    def write(self) -> WriteTransaction:
        """One write transaction: ``async with db.write() as session`` commits on a clean exit."""
        return WriteTransaction(self._write_sessions, self._write_lock)

    async def close(self) -> None:
        """Close every pooled connection, the writer's too."""
        await self._writer.dispose()
        await self.engine.dispose()


class WriteTransaction:
    """``async with``: take the write lock, open a session, commit or roll back.

    The transaction begins at once, with :data:`BEGIN_IMMEDIATE`: on SQLite it takes
    the database's write lock at ``BEGIN``, waiting up to ``busy_timeout`` while
    another process writes. A plain (deferred) ``BEGIN`` would read first and ask
    for the write lock at the first write; in WAL mode, when another process has
    committed since the read, that upgrade fails with ``SQLITE_BUSY`` at once,
    without waiting (https://www.sqlite.org/lang_transaction.html, "Read
    transactions versus write transactions"; https://www.sqlite.org/wal.html,
    "Sometimes Queries Return SQLITE_BUSY In WAL Mode"), and several bot
    processes share one file. Reads elsewhere stay deferred, so they never wait
    for a writer. Raises ``sqlalchemy.exc.OperationalError`` ("database is locked")
    when the lock is not had within ``busy_timeout``.
    """

    def __init__(self, sessions: async_sessionmaker[AsyncSession], lock: asyncio.Lock) -> None:
        self._sessions = sessions
        self._lock = lock
        self._session: AsyncSession | None = None

    async def __aenter__(self) -> AsyncSession:
        await self._lock.acquire()
        self._session = self._sessions()
        try:
            await self._session.begin()
            await self._session.connection()  # BEGIN IMMEDIATE: the writer engine's option
        except BaseException:
            await self._session.close()
            self._lock.release()
            raise
        return self._session

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        assert self._session is not None
        try:
            if exc_type is None:
                await self._session.commit()
            else:
                await self._session.rollback()
        finally:
            await self._session.close()
            self._lock.release()


async def conversation_row(session: AsyncSession, conversation_id: str) -> ConversationRow:
    """The conversation's row; raises :class:`core.errors.ConversationNotFound`."""
    row = await session.get(ConversationRow, conversation_id)
    if row is None:
        raise ConversationNotFound(conversation_id)
    return row


def changed(result: object) -> int:
    """Rows an UPDATE, DELETE or INSERT ... SELECT touched (0 when the driver cannot say)."""
    return int(getattr(result, "rowcount", 0) or 0)
