"""A database that cannot be opened or used, said in words.

SQLAlchemy's errors print the driver's message, the statement and a link
(``(sqlite3.DatabaseError) file is not a database (Background on this error at:
https://sqlalche.me/...)``); the folder a SQLite file lives in fails with a bare
``OSError``. :func:`database_said` turns either into one line that names the file or
folder and what is wrong with it, for the ``threadbot`` commands and ``doctor``.
SQLite's messages are its result codes' (https://www.sqlite.org/rescode.html).
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite ``url``; None for another database or an in-memory one."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def database_said(url: str, error: BaseException) -> str:
    """``error``, raised while opening or using the database at ``url``, in one line.

    For SQLite: ``the database folder .threadbot is on a read-only file system``,
    ``.threadbot/threadbot.db is not a SQLite database``, ``the database
    .threadbot/threadbot.db is locked by another process`` ...; for any database, the
    driver's own message without SQLAlchemy's statement and link. Never raises.
    """
    file = sqlite_file(url)
    if isinstance(error, OSError):
        return _os_said(error, file)
    if isinstance(error, DBAPIError):
        message = str(error.orig).strip()
        if file is not None:
            return _sqlite_said(message, file)
        return f"the database failed: {message}"
    if isinstance(error, SQLAlchemyError):
        return f"the database failed: {_without_link(str(error))}"
    return str(error) or type(error).__name__


def _os_said(error: OSError, file: Path | None) -> str:
    """An OSError of the database's folder or file (making the folder, opening the file)."""
    where = Path(error.filename) if error.filename else file
    if where is None:
        return f"cannot reach the database: {error.strerror or error}"
    if error.errno == errno.EROFS:
        return f"the database folder {where} is on a read-only file system"
    if error.errno in (errno.EACCES, errno.EPERM):
        return f"the database folder {where} cannot be written (permission denied)"
    if error.errno in (errno.EEXIST, errno.ENOTDIR):
        return f"{where} is a file, not a folder: the database cannot be made in it"
    if error.errno == errno.ENOSPC:
        return f"the disk holding {where} is full"
    return f"cannot make or open {where}: {error.strerror or error}"


def _sqlite_said(message: str, file: Path) -> str:
    """A SQLite driver message about ``file`` in words."""
    text = message.lower()
    if "not a database" in text:
        return f"{file} is not a SQLite database (another kind of file has its name)"
    if "readonly database" in text or "read-only" in text:
        return f"the database {file} is read-only"
    if "unable to open database file" in text:
        folder = file.parent
        if not os.access(folder, os.W_OK) or _read_only_mount(folder):
            return f"the database folder {folder} is read-only"
        return f"the database file {file} cannot be opened"
    if "locked" in text:
        return f"the database {file} is locked by another process"
    if "disk is full" in text or "database or disk is full" in text:
        return f"the disk holding {file} is full"
    if "malformed" in text or "corrupt" in text:
        return f"the database {file} is damaged ({message})"
    return f"the database {file} failed: {message}"


def _read_only_mount(folder: Path) -> bool:
    """Whether ``folder`` is on a file system mounted read-only (statvfs(3), ST_RDONLY)."""
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _without_link(message: str) -> str:
    """SQLAlchemy's message without its "(Background on this error at: ...)" line."""
    return message.split("\n(Background on this error at:", 1)[0].strip()


_NETWORK_ERRNOS = frozenset(
    {errno.ECONNREFUSED, errno.ECONNRESET, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ETIMEDOUT}
)
"""An ``OSError`` of these is the network's, not the disk's (asyncio may raise a bare
``OSError`` for a refused connection to several addresses)."""

_DRIVER_DISCONNECTS = frozenset(
    {"ConnectionDoesNotExistError", "InterfaceError", "InternalClientError"}
)
"""asyncpg's errors of a connection that was lost or never made (named, not imported:
asyncpg is an optional extra)."""


def unreachable(error: BaseException) -> bool:
    """Whether ``error`` says the database could not be reached or the connection to it
    was lost (a server restarting, a failover, a network cut): a refused or reset
    connection, a name that does not resolve, a timeout, a connection SQLAlchemy
    invalidated, or asyncpg's own disconnect errors, anywhere in its chain of causes.
    Errors of the data or the schema (``no such table``, ``disk I/O error``) are not:
    asking again cannot mend them."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [error]
    while stack:
        found = stack.pop()
        if found is None or id(found) in seen:
            continue
        seen.add(id(found))
        if isinstance(found, ConnectionError | TimeoutError | socket.gaierror):
            return True
        if isinstance(found, OSError) and found.errno in _NETWORK_ERRNOS:
            return True
        if isinstance(found, DBAPIError) and found.connection_invalidated:
            return True
        kind = type(found)
        if kind.__module__.startswith("asyncpg") and kind.__name__ in _DRIVER_DISCONNECTS:
            return True
        orig = found.orig if isinstance(found, DBAPIError) else None
        stack += [
            found.__cause__,
            found.__context__,
            orig if isinstance(orig, BaseException) else None,
        ]
    return False
