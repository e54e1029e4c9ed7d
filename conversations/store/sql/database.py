"""The one database every SQL interface shares: its engine, sessions and write transactions.

Every write is one transaction, a function of a synchronous session run by the
process's one writer (:mod:`conversations.store.sql.writer`); writes of one
process go one at a time (SQLite has one writer anyway; WAL lets readers go on),
and each begins with ``BEGIN IMMEDIATE`` on SQLite (:class:`Database` says why).
Reads are async sessions on the engine's pool.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar
from urllib.parse import quote

from sqlalchemy import Engine, Executable, Table, event
from sqlalchemy.engine import Connection, Result, make_url
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import Session

from conversations.store.records import OutboxListener
from conversations.store.schema import ConversationRow
from conversations.store.sql.writer import Runner, Transaction, WriteSession
from core.vocabulary.errors import ConversationNotFound

T = TypeVar("T")

_BEGIN_MODE = "threadbot_sqlite_begin"
_BEGIN_MODES = frozenset({"DEFERRED", "IMMEDIATE", "EXCLUSIVE", "NONE"})

BEGIN_IMMEDIATE: Mapping[str, str] = MappingProxyType({_BEGIN_MODE: "IMMEDIATE"})
"""Execution options for a connection whose transactions will write: on SQLite they
begin with ``BEGIN IMMEDIATE`` (see :func:`create_engine`); other databases ignore them."""

NO_BEGIN: Mapping[str, str] = MappingProxyType({_BEGIN_MODE: "NONE"})
"""Execution options for reads of one statement each: on SQLite no ``BEGIN`` is sent,
so each statement is its own transaction (SQLite's autocommit,
https://www.sqlite.org/lang_transaction.html, "Implicit versus explicit
transactions") and a read costs one statement instead of three (``BEGIN``, the
``SELECT``, ``ROLLBACK``); other databases ignore them."""


WAL_TRIES = 200
"""Tries at turning WAL on, :data:`WAL_WAIT` seconds apart (10 s in all, the busy timeout)."""
WAL_WAIT = 0.05


def _wal(cursor: Any) -> None:
    """``PRAGMA journal_mode=WAL``, tried again while another process holds the file:
    switching a new file to WAL fails at once with "database is locked", without the
    busy timeout's wait, when another connection is switching it at the same moment
    (seen with two instances starting together on a new file)."""
    for attempt in range(WAL_TRIES):
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == WAL_TRIES - 1:
                raise
            time.sleep(WAL_WAIT)


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
    _wal(cursor)
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _sqlite_begin(connection: Connection) -> None:
    """Emit the BEGIN of a SQLAlchemy transaction: ``BEGIN``, ``BEGIN IMMEDIATE`` for a
    connection with :data:`BEGIN_IMMEDIATE`, nothing for one with :data:`NO_BEGIN`.
    Raises ``ValueError`` for another mode."""
    mode = connection.get_execution_options().get(_BEGIN_MODE)
    if mode is not None and mode not in _BEGIN_MODES:
        raise ValueError(f"{_BEGIN_MODE} must be one of {sorted(_BEGIN_MODES)}, not {mode!r}")
    if mode == "NONE":
        return
    connection.exec_driver_sql(f"BEGIN {mode}" if mode else "BEGIN")


def create_engine(url: str, **options: Any) -> AsyncEngine:
    """An async engine for ``url``; for SQLite, makes the file's folder and sets it up.

    A folder it makes is the bot's alone (0700): the database holds every
    conversation, and another local user, or a command run without a sandbox as
    ``nobody``, must not read it.

    SQLite gets WAL (readers go on while one process writes), ``synchronous=NORMAL``,
    foreign keys, a 10 s ``busy_timeout``, and real transactions: SQLAlchemy emits
    ``BEGIN`` when a transaction begins, so every statement of it, DDL included,
    commits or rolls back together (the sqlite3 driver's legacy mode emits BEGIN
    only before INSERT/UPDATE/DELETE, so each ``CREATE TABLE`` committed on its own:
    https://docs.sqlalchemy.org/en/20/dialects/sqlite.html#serializable-isolation-savepoints-transactional-ddl).
    A transaction on a connection with :data:`BEGIN_IMMEDIATE` takes the write lock
    at ``BEGIN`` (see :class:`Database` for why). ``options`` go to
    SQLAlchemy's ``create_async_engine`` (a pool size, for one).
    """
    parsed = make_url(url)
    engine = create_async_engine(url, **options)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        setup_sqlite(engine.sync_engine)
    return engine


def create_read_only_engine(url: str) -> AsyncEngine:
    """An async engine for ``url`` that cannot write: a SQLite file opened ``mode=ro``
    (https://www.sqlite.org/uri.html; its folder is not made, and a file that is not there
    fails at the first connection), or PostgreSQL sessions with
    ``default_transaction_read_only`` on (every transaction read-only:
    https://www.postgresql.org/docs/current/runtime-config-client.html). A write through it
    raises ``sqlalchemy.exc.OperationalError`` (SQLite) or ``InternalError`` (PostgreSQL).
    For operators' reports (``threadbot audit``). Raises ``ValueError`` for an in-memory
    SQLite database, which no reader could see."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        read_only = {"server_settings": {"default_transaction_read_only": "on"}}
        return create_async_engine(url, connect_args=read_only)
    if not parsed.database or parsed.database == ":memory:":
        raise ValueError("an in-memory SQLite database cannot be read by another connection")
    file = quote(str(Path(parsed.database).absolute()))
    query = {"mode": "ro", "uri": "true"}
    engine = create_async_engine(parsed.set(database=f"file:{file}", query=query))
    setup_sqlite(engine.sync_engine)  # WAL stays as it is: asking for it again writes nothing
    return engine


def conflict_insert(dialect: str, table: Table) -> Any:
    """An ``INSERT`` into ``table`` that can say what to do on a conflicting key
    (``on_conflict_do_nothing``, ``on_conflict_do_update``): SQLAlchemy has it for
    SQLite and PostgreSQL, with the same API
    (https://docs.sqlalchemy.org/en/20/dialects/sqlite.html#insert-on-conflict-upsert).
    Raises ``ValueError`` for another ``dialect``."""
    if dialect == "sqlite":
        from sqlalchemy.dialects import sqlite

        return sqlite.insert(table)
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table)
    raise ValueError(f"the store needs SQLite or PostgreSQL, not {dialect}")


def setup_sqlite(engine: Engine) -> None:
    """Set SQLite's pragmas on each new connection of ``engine`` (a synchronous engine,
    or an async engine's ``sync_engine``) and emit ``BEGIN`` ourselves (see
    :func:`create_engine`)."""
    event.listen(engine, "connect", _sqlite_pragmas)
    event.listen(engine, "begin", _sqlite_begin)


def changed(result: object) -> int:
    """Rows an UPDATE, DELETE or INSERT ... SELECT touched (0 when the driver cannot say)."""
    return int(getattr(result, "rowcount", 0) or 0)


class Database:
    """The engine reads go through, the writer every write goes through, and who to tell
    about new outbox rows.

    ``read()`` opens a session for reads of a statement each (never waits for a
    writer), ``read_in_thread(read)`` runs a read in the reader thread, in one read
    transaction when asked;
    ``write(transaction)`` runs one write transaction, a function of a synchronous
    :class:`~sqlalchemy.orm.Session`, in the process's one writer
    (:mod:`conversations.store.sql.writer`: on a SQLite file, one thread with one
    connection). Every write transaction begins with :data:`BEGIN_IMMEDIATE`: on
    SQLite it takes the database's write lock at ``BEGIN``, waiting up to
    ``busy_timeout`` while another process writes. A plain (deferred) ``BEGIN``
    would read first and ask for the write lock at the first write; in WAL mode,
    when another process has committed since the read, that upgrade fails with
    ``SQLITE_BUSY`` at once, without waiting
    (https://www.sqlite.org/lang_transaction.html, "Read transactions versus write
    transactions"; https://www.sqlite.org/wal.html, "Sometimes Queries Return
    SQLITE_BUSY In WAL Mode"), and several bot processes share one file.
    ``write_alone(statement)`` runs a write of one statement without ``BEGIN``: SQLite's
    autocommit makes that statement its own transaction (see :meth:`write_alone`).
    ``on_outbox`` is called with the outbox rows a write wrote, after it committed
    (:data:`~conversations.store.records.OutboxListener`: the deliverer queues them).
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.alone: Mapping[str, str] = NO_BEGIN
        """Execution options of a statement that is its own transaction: no ``BEGIN`` on
        SQLite (:data:`NO_BEGIN`); on PostgreSQL, autocommit (asyncpg then sends the
        statement alone, without ``BEGIN`` and ``COMMIT``:
        https://docs.sqlalchemy.org/en/20/core/connections.html#setting-transaction-isolation-levels-including-dbapi-autocommit)."""
        if engine.dialect.name != "sqlite":
            self.alone = MappingProxyType({**NO_BEGIN, "isolation_level": "AUTOCOMMIT"})
        self._sessions = async_sessionmaker(
            engine.execution_options(**self.alone), expire_on_commit=False
        )
        self._writer = Runner(
            engine,
            setup_sqlite,
            BEGIN_IMMEDIATE,
            name="store-writer",
            session_class=WriteSession,
            whole=True,
        )
        self._reader = Runner(engine, setup_sqlite, {}, name="store-reader")
        self._upserts: dict[tuple[Table, tuple[str, ...]], Any] = {}
        self.on_outbox: OutboxListener = lambda _rows: None

    def upsert(self, table: Table, keys: tuple[str, ...]) -> Any:
        """``INSERT`` into ``table`` that updates every other column of a row whose ``keys``
        exist (``ON CONFLICT (keys) DO UPDATE``; SQLite and PostgreSQL spell it alike:
        https://docs.sqlalchemy.org/en/20/dialects/sqlite.html#insert-on-conflict-upsert).
        Execute it with a list of rows. Raises ``ValueError`` on another database."""
        cached = self._upserts.get((table, keys))
        if cached is not None:
            return cached
        stmt = conflict_insert(self.engine.dialect.name, table)
        columns = [c.name for c in table.columns if c.name not in keys]
        upsert = stmt.on_conflict_do_update(
            index_elements=list(keys), set_={c: stmt.excluded[c] for c in columns}
        )
        self._upserts[(table, keys)] = upsert
        return upsert

    def read(self) -> AsyncSession:
        """A session for reads, each statement on its own (:data:`NO_BEGIN`):
        ``async with db.read() as session``."""
        return self._sessions()

    async def read_in_thread(self, read: Transaction[T], *, snapshot: bool = False) -> T:
        """Run ``read(session)`` in the reader thread (:mod:`~conversations.store.sql.writer`);
        its result. ``snapshot``: its statements in one read transaction (deferred
        ``BEGIN``), else each on its own (:data:`NO_BEGIN`). For the reads on a run's
        and the deliverer's path; never waits for the writer."""
        return await self._reader.run(read, {} if snapshot else self.alone)

    async def write(
        self, transaction: Transaction[T], *, then: Callable[[T], None] | None = None
    ) -> T:
        """Run ``transaction(session)`` as one write transaction; its result.

        Committed when it returns, rolled back when it raises (the exception is
        raised here). ``then`` is called with the result once it committed, even
        when the caller was cancelled meanwhile (the outbox rows a commit wrote are
        handed on from there). Raises ``sqlalchemy.exc.OperationalError`` ("database
        is locked") when the lock is not had within ``busy_timeout``.
        """
        return await self._writer.run(transaction, then=then)

    async def write_beside(self, transaction: Transaction[T]) -> T:
        """Run ``transaction(session)`` as one write transaction not queued behind this
        process's other writes: on a server database (PostgreSQL orders concurrent
        transactions itself) on a pooled connection of its own; on SQLite, where one
        connection writes a file, through the writer like :meth:`write`. For writes
        that must not wait for a busy run's commits: a lease's renewal, which lapses
        if it comes late. Raises what :meth:`write` raises."""
        if self.engine.dialect.name == "sqlite":
            return await self.write(transaction)
        async with AsyncSession(self.engine, expire_on_commit=False) as session:
            async with session.begin():
                return await session.run_sync(transaction)

    async def write_alone(
        self,
        statement: Executable,
        result: Callable[[Result[Any]], T],
        *,
        params: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        then: Callable[[T], None] | None = None,
    ) -> T:
        """Run ``statement``, one write statement, in the writer without ``BEGIN``: on
        SQLite it is its own transaction (autocommit), one statement instead of three
        (``BEGIN IMMEDIATE``, it, ``COMMIT``). ``result`` reads what it returned, in
        the writer thread (:func:`changed` for the rows it changed).

        Safe where ``BEGIN IMMEDIATE`` is needed for a whole transaction: a statement
        that writes, run in autocommit, opens a write transaction as it starts
        (https://www.sqlite.org/lang_transaction.html, "Implicit versus explicit
        transactions"), so it asks for the write lock before it reads anything and
        waits ``busy_timeout`` for it like ``BEGIN IMMEDIATE``; the read-then-upgrade
        ``SQLITE_BUSY`` of a deferred transaction cannot happen within one statement.
        It is atomic by itself, and the writer runs one thing at a time, so no other
        write of this process comes in between. Elsewhere (PostgreSQL, SQLite
        ``:memory:``) it is an ordinary transaction. ``params``: its parameters, or rows to
        execute it with (an ``INSERT`` of several rows: still one statement, SQLAlchemy's
        "insertmanyvalues"). ``then`` as for :meth:`write`.
        Raises what :meth:`write` raises.
        """
        return await self._writer.run(
            lambda session: result(session.execute(statement, params)), self.alone, then=then
        )

    async def close(self) -> None:
        """Close the writer's and the reader's connections and every pooled one."""
        await self._writer.close()
        await self._reader.close()
        await self.engine.dispose()


def conversation_row_sync(session: Session, conversation_id: str) -> ConversationRow:
    """The conversation's row, in a synchronous session (a write, or a read in the reader
    thread); raises :class:`core.vocabulary.errors.ConversationNotFound`."""
    row = session.get(ConversationRow, conversation_id)
    if row is None:
        raise ConversationNotFound(conversation_id)
    return row


async def conversation_row(session: AsyncSession, conversation_id: str) -> ConversationRow:
    """The conversation's row; raises :class:`core.vocabulary.errors.ConversationNotFound`."""
    row = await session.get(ConversationRow, conversation_id)
    if row is None:
        raise ConversationNotFound(conversation_id)
    return row


ROWS_PER_STATEMENT = 200
"""Rows one multi-row ``INSERT`` carries at most: 200 rows of the widest table (14
columns) stay far below SQLite's 32,766 bound parameters
(https://www.sqlite.org/limits.html, "Maximum Number Of Host Parameters")."""


def insert_rows(conn: Connection, statement: Any, rows: Sequence[Mapping[str, Any]]) -> None:
    """Execute the ``INSERT`` ``statement`` for ``rows`` as one statement with a ``VALUES``
    list (one per :data:`ROWS_PER_STATEMENT` rows), not once per row.

    A list of parameters is an ``executemany``, which the driver runs once per row
    (https://docs.sqlalchemy.org/en/20/tutorial/dbapi_transactions.html#sending-multiple-parameters);
    a ``VALUES`` list is one statement that SQLite (since 3.7.11) and PostgreSQL run
    whole. ``statement`` may carry an ``ON CONFLICT`` clause. Raises what the driver
    raises (``IntegrityError`` on a taken key).
    """
    for start in range(0, len(rows), ROWS_PER_STATEMENT):
        chunk = rows[start : start + ROWS_PER_STATEMENT]
        if len(chunk) == 1:
            conn.execute(statement, chunk[0])
        else:
            conn.execute(statement.values(list(chunk)))
