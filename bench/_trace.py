"""Every statement SQLite runs, counted where the driver hands it over.

:class:`StatementTrace` wraps ``sqlite3.connect`` (and ``sqlite3.dbapi2.connect``,
which SQLAlchemy's pysqlite driver calls: the store's writer thread) while
installed, so each connection opened meanwhile, by aiosqlite's worker thread,
SQLAlchemy or ``sqlite3`` directly, gets a trace callback
(https://docs.python.org/3/library/sqlite3.html#sqlite3.Connection.set_trace_callback).
SQLite calls it as each statement starts running, with its text: ``BEGIN``,
``COMMIT`` and ``PRAGMA`` included. With each statement the trace keeps the
connection's ``total_changes`` at that moment, so the rows a transaction changed
are the difference between its ``COMMIT`` and its ``BEGIN``.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections import Counter
from collections.abc import Iterator
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
        """The first word, upper case (``SELECT``, ``BEGIN``, ``COMMIT``...)."""
        words = self.sql.split(None, 1)
        return words[0].upper() if words else ""


@dataclass
class Transactions:
    """The transactions of a list of statements (per connection, BEGIN to COMMIT/ROLLBACK)."""

    writes: int = 0
    reads: int = 0
    rows_changed: int = 0
    outside: int = 0
    """Statements outside any explicit transaction (pragmas, autocommit)."""


@dataclass
class StatementTrace:
    """Records statements while :attr:`recording` (see the module docstring)."""

    statements: list[Statement] = field(default_factory=list)
    recording: bool = False
    _connections: int = 0

    @contextlib.contextmanager
    def installed(self) -> Iterator[StatementTrace]:
        """Trace every ``sqlite3`` connection opened inside the block."""
        import sqlite3.dbapi2

        original = sqlite3.connect

        def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn = original(*args, **kwargs)
            self._connections += 1
            number = self._connections

            def seen(sql: str) -> None:
                if self.recording:
                    self.statements.append(Statement(number, sql.strip(), conn.total_changes))

            conn.set_trace_callback(seen)
            return conn

        sqlite3.connect = connect  # type: ignore[assignment]
        sqlite3.dbapi2.connect = connect  # type: ignore[assignment]
        try:
            yield self
        finally:
            sqlite3.connect = original
            sqlite3.dbapi2.connect = original

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


def verbs(statements: list[Statement]) -> Counter[str]:
    """How many statements of each verb."""
    return Counter(s.verb for s in statements)


def transactions(statements: list[Statement]) -> Transactions:
    """Split ``statements`` into transactions per connection; a write transaction is one
    begun ``IMMEDIATE`` or one that changed rows."""
    found = Transactions()
    open_: dict[int, tuple[Statement, bool]] = {}
    for s in statements:
        verb = s.verb
        if verb == "BEGIN":
            open_[s.conn] = (s, "IMMEDIATE" in s.sql.upper() or "EXCLUSIVE" in s.sql.upper())
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
