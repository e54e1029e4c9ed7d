"""Every statement SQLite or PostgreSQL runs, counted where the driver hands it over.

:class:`StatementTrace` wraps ``sqlite3.connect`` (and ``sqlite3.dbapi2.connect``,
which SQLAlchemy's pysqlite driver calls: the store's writer thread) while
installed, so each connection opened meanwhile, by aiosqlite's worker thread,
SQLAlchemy or ``sqlite3`` directly, gets a trace callback
(https://docs.python.org/3/library/sqlite3.html#sqlite3.Connection.set_trace_callback).
SQLite calls it as each statement starts running, with its text: ``BEGIN``,
``COMMIT`` and ``PRAGMA`` included. With each statement the trace keeps the
connection's ``total_changes`` at that moment, so the rows a transaction changed
are the difference between its ``COMMIT`` and its ``BEGIN``.

:class:`PostgresTrace` does the same for PostgreSQL, on the wire: a TCP proxy on
127.0.0.1 in front of the server, which the app is pointed at instead, reads the
messages of PostgreSQL's protocol as they pass
(https://www.postgresql.org/docs/current/protocol-message-formats.html). A statement
is a simple ``Query`` (how asyncpg sends ``BEGIN``, ``COMMIT``, ``ROLLBACK``) or an
``Execute`` of a portal bound to a prepared statement (its text from the ``Parse``
that named it): each execution counts, a statement prepared once and run twice is
two. The rows changed are summed from the server's ``CommandComplete`` tags
(``INSERT 0 3``, ``UPDATE 1``, ``DELETE 2``) on each connection, which count what
SQLite's ``total_changes`` counts. The proxy declines TLS (asyncpg's default,
``prefer``, then goes on in the clear), so a server that demands TLS cannot be
traced this way.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import struct
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Statement:
    """One statement as SQLite started it on connection number ``conn``."""

    conn: int
    sql: str
    changes: int
    """The connection's ``total_changes`` as the statement started."""

    @property
    def verb(self) -> str:
        """The first word, upper case, without a ``;`` (``SELECT``, ``BEGIN``, ``COMMIT``...)."""
        words = self.sql.split(None, 1)
        return words[0].upper().rstrip(";") if words else ""


@dataclass
class Transactions:
    """The transactions of a list of statements (per connection, BEGIN to COMMIT/ROLLBACK)."""

    writes: int = 0
    reads: int = 0
    rows_changed: int = 0
    outside: int = 0
    """Statements outside any explicit transaction (pragmas, autocommit)."""


@dataclass
class Recorder:
    """Keeps the statements seen while :attr:`recording`; :meth:`record` turns it on."""

    statements: list[Statement] = field(default_factory=list)
    recording: bool = False
    _connections: int = 0

    def seen(self, statement: Statement) -> None:
        """Keep ``statement`` when recording."""
        if self.recording:
            self.statements.append(statement)

    @contextlib.contextmanager
    def record(self) -> Iterator[list[Statement]]:
        """Record the statements run inside the block into the list it yields."""
        start = len(self.statements)
        found: list[Statement] = []
        self.recording = True
        try:
            yield found
        finally:
            self.recording = False
            found.extend(self.statements[start:])


@dataclass
class StatementTrace(Recorder):
    """Records the statements of every ``sqlite3`` connection while :attr:`recording`
    (see the module docstring)."""

    @contextlib.contextmanager
    def installed(self) -> Iterator[StatementTrace]:
        """Trace every ``sqlite3`` connection opened inside the block."""
        import sqlite3.dbapi2

        original = sqlite3.connect

        def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn = original(*args, **kwargs)
            self._connections += 1
            number = self._connections

            def traced(sql: str) -> None:
                if self.recording:
                    self.seen(Statement(number, sql.strip(), conn.total_changes))

            conn.set_trace_callback(traced)
            return conn

        sqlite3.connect = connect  # type: ignore[assignment]
        sqlite3.dbapi2.connect = connect  # type: ignore[assignment]
        try:
            yield self
        finally:
            sqlite3.connect = original
            sqlite3.dbapi2.connect = original


_SSL_REQUEST = 80877103
_GSSENC_REQUEST = 80877104
_CHANGING = frozenset({"INSERT", "UPDATE", "DELETE", "MERGE"})
"""Command tags whose last number is the rows a statement changed."""


def _cstring(body: bytes, start: int = 0) -> tuple[str, int]:
    """The NUL-terminated string at ``start`` of ``body``, and where the next field starts."""
    end = body.index(b"\0", start)
    return body[start:end].decode("utf-8", "replace"), end + 1


def _rows_changed(tag: str) -> int:
    """Rows a ``CommandComplete`` tag says were changed (``INSERT 0 3``: 3; ``SELECT 2``: 0)."""
    words = tag.split()
    if words and words[0] in _CHANGING and words[-1].isdigit():
        return int(words[-1])
    return 0


@dataclass
class _Wire:
    """What the proxy knows of one connection: its number, the rows changed so far, the
    text of its prepared statements and of the statement each portal is bound to."""

    number: int
    changes: int = 0
    prepared: dict[str, str] = field(default_factory=dict)
    portals: dict[str, str] = field(default_factory=dict)


@dataclass
class PostgresTrace(Recorder):
    """Records the statements of every connection made through its proxy to the server
    at ``host``:``port`` (or, when ``socket`` names a folder, its Unix socket there)
    while :attr:`recording` (see the module docstring)."""

    host: str = "127.0.0.1"
    port: int = 5432
    socket: str | None = None

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[tuple[str, int]]:
        """Run the proxy on a free port of 127.0.0.1 inside the block: yields its
        ``(host, port)``, for the app's database URL. Closes it, and every connection
        through it, on leaving."""
        tasks: set[asyncio.Task[None]] = set()

        def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.ensure_future(self._relay(reader, writer))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        proxy = await asyncio.start_server(accepted, "127.0.0.1", 0)
        try:
            yield "127.0.0.1", int(proxy.sockets[0].getsockname()[1])
        finally:
            proxy.close()
            for task in list(tasks):
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await proxy.wait_closed()

    async def _upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.socket:
            return await asyncio.open_unix_connection(f"{self.socket}/.s.PGSQL.{self.port}")
        return await asyncio.open_connection(self.host, self.port)

    async def _relay(self, client: asyncio.StreamReader, to_client: asyncio.StreamWriter) -> None:
        self._connections += 1
        wire = _Wire(self._connections)
        server, to_server = await self._upstream()
        try:
            startup = await self._startup(client, to_client)
            to_server.write(startup)
            await asyncio.gather(
                self._frontend(wire, client, to_server),
                self._backend(wire, server, to_client),
            )
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            for writer in (to_server, to_client):
                writer.close()

    @staticmethod
    async def _startup(client: asyncio.StreamReader, to_client: asyncio.StreamWriter) -> bytes:
        """The client's startup message, after declining its TLS or GSS request if any."""
        while True:
            head = await client.readexactly(8)
            length, code = struct.unpack("!ii", head)
            rest = await client.readexactly(length - 8)
            if code in (_SSL_REQUEST, _GSSENC_REQUEST):
                to_client.write(b"N")
                await to_client.drain()
                continue
            return head + rest

    async def _frontend(
        self, wire: _Wire, client: asyncio.StreamReader, to_server: asyncio.StreamWriter
    ) -> None:
        while True:
            kind, body, raw = await _message(client)
            if kind == b"Q":
                self.seen(Statement(wire.number, _cstring(body)[0].strip(), wire.changes))
            elif kind == b"P":
                name, at = _cstring(body)
                wire.prepared[name] = _cstring(body, at)[0].strip()
            elif kind == b"B":
                portal, at = _cstring(body)
                wire.portals[portal] = wire.prepared.get(_cstring(body, at)[0], "?")
            elif kind == b"E":
                sql = wire.portals.get(_cstring(body)[0], "?")
                self.seen(Statement(wire.number, sql, wire.changes))
            to_server.write(raw)
            await to_server.drain()
            if kind == b"X":
                return

    @staticmethod
    async def _backend(
        wire: _Wire, server: asyncio.StreamReader, to_client: asyncio.StreamWriter
    ) -> None:
        while True:
            kind, body, raw = await _message(server)
            if kind == b"C":
                wire.changes += _rows_changed(_cstring(body)[0])
            to_client.write(raw)
            await to_client.drain()


async def _message(reader: asyncio.StreamReader) -> tuple[bytes, bytes, bytes]:
    """One message of the protocol after startup: its type byte, its body and the whole."""
    head = await reader.readexactly(5)
    (length,) = struct.unpack("!i", head[1:])
    body = await reader.readexactly(length - 4)
    return head[:1], body, head + body


def verbs(statements: list[Statement]) -> Counter[str]:
    """How many statements of each verb."""
    return Counter(s.verb for s in statements)


WRITING = frozenset({"INSERT", "UPDATE", "DELETE", "MERGE"})
"""Verbs that make a transaction a write one, whether or not they changed a row."""


def transactions(statements: list[Statement]) -> Transactions:
    """Split ``statements`` into transactions per connection; a write transaction is one
    begun ``IMMEDIATE`` (SQLite), one that ran an ``INSERT``, ``UPDATE``, ``DELETE`` or
    ``MERGE``, or one that changed rows."""
    found = Transactions()
    open_: dict[int, tuple[Statement, bool]] = {}
    for s in statements:
        verb = s.verb
        if verb == "BEGIN":
            open_[s.conn] = (s, "IMMEDIATE" in s.sql.upper() or "EXCLUSIVE" in s.sql.upper())
        elif verb in WRITING and s.conn in open_:
            open_[s.conn] = (open_[s.conn][0], True)
        elif verb in ("COMMIT", "END", "ROLLBACK") and s.conn in open_:
            begin, immediate = open_.pop(s.conn)
            changed = s.changes - begin.changes if verb != "ROLLBACK" else 0
            if immediate or changed:
                found.writes += 1
                found.rows_changed += changed
            else:
                found.reads += 1
        elif s.conn not in open_:
            found.outside += 1
    return found


def conversation_loads(statements: list[Statement]) -> int:
    """SELECTs that read journal rows (a conversation loaded), aggregates left out."""
    count = 0
    for s in statements:
        sql = " ".join(s.sql.lower().split())
        if (
            s.verb == "SELECT"
            and "from journal" in sql
            and "max(" not in sql
            and "count(" not in sql
        ):
            count += 1
    return count
