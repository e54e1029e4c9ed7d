"""PostgreSQL for the benchmarks: a server to reach, and fresh databases dropped after.

Where the server comes from, first found first (as the tests find theirs,
``tests/postgres.py``, without the throwaway cluster):

1. ``THREADBOT_TEST_DATABASE_URL``, when set: any database on the server, reached as a
   role that may create databases (``postgresql+asyncpg://user:password@host:port/db``);
2. 127.0.0.1:5432, when a server answers there as the current user or ``postgres``;
3. else none: :func:`find_server` says why, and a benchmark on PostgreSQL reports
   itself skipped with that reason (:func:`skipped`) instead of failing the run.

Each benchmark run creates the databases it needs (:func:`fresh_databases`, named
``threadbot_bench_<pid>_<random>_<what>``, the server's defaults: commits wait for
their WAL to reach the disk, as a deployment's do) and drops them when it ends,
whatever happened.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass

from sqlalchemy.engine import URL, make_url

from bench._report import Result

ENVIRONMENT = "THREADBOT_TEST_DATABASE_URL"
"""The variable naming the server, shared with the tests (``tests/postgres.py``)."""

DEFAULT = "127.0.0.1:5432"


@dataclass(frozen=True)
class Server:
    """A PostgreSQL server the benchmarks may create databases on.

    ``url``: an asyncpg SQLAlchemy URL of a database there to connect to for
    ``CREATE DATABASE``; ``how``: where it came from, for the report.
    """

    url: URL
    how: str

    def database_url(self, name: str, *, driver: str = "asyncpg") -> str:
        """The SQLAlchemy URL of database ``name`` on this server with ``driver``
        (``asyncpg``, ``psycopg``), password included."""
        url = self.url.set(drivername=f"postgresql+{driver}", database=name)
        return url.render_as_string(hide_password=False)

    def dsn(self, name: str) -> str:
        """The libpq-style URL of database ``name`` (``postgresql://...``), for asyncpg and
        DBOS."""
        url = self.url.set(drivername="postgresql", database=name)
        return url.render_as_string(hide_password=False)


def _dsn(url: URL) -> str:
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


async def _answers(url: URL) -> str | None:
    """None when a server answers at ``url`` and lets its role in; else why not."""
    import asyncpg

    try:
        connection = await asyncpg.connect(_dsn(url), timeout=5)
    except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
        return f"{url.render_as_string(hide_password=True)} ({exc or type(exc).__name__})"
    await connection.close()
    return None


async def find_server() -> Server | str:
    """A server for the benchmarks (see the module docstring), or why there is none,
    as the words after ``skipped:``."""
    try:
        import asyncpg  # noqa: F401
    except ImportError:
        return "asyncpg is not installed (pip install -e '.[postgres]')"
    given = os.environ.get(ENVIRONMENT)
    if given:
        url = make_url(given).set(drivername="postgresql+asyncpg")
        problem = await _answers(url)
        if problem is None:
            return Server(url=url, how=ENVIRONMENT)
        return f"no PostgreSQL server at {ENVIRONMENT}: {problem}"
    problems = []
    for user in dict.fromkeys((getpass.getuser(), "postgres")):
        url = make_url(f"postgresql+asyncpg://{user}@{DEFAULT}/postgres")
        problem = await _answers(url)
        if problem is None:
            return Server(url=url, how=DEFAULT)
        problems.append(problem)
    return (
        f"no PostgreSQL server at {DEFAULT} ({'; '.join(problems)}); set {ENVIRONMENT} to name one"
    )


@contextlib.asynccontextmanager
async def fresh_databases(server: Server, *names: str) -> AsyncIterator[dict[str, str]]:
    """New empty databases on ``server``, one per name in ``names``: ``{name: database}``
    (the database's own name; :meth:`Server.database_url` makes its URL). Dropped on
    leaving the block, connections and all (``DROP DATABASE ... WITH (FORCE)``), whether
    or not the block raised."""
    import asyncpg

    run = f"threadbot_bench_{os.getpid()}_{secrets.token_hex(4)}"
    made: dict[str, str] = {}
    admin = await asyncpg.connect(_dsn(server.url))
    try:
        try:
            for name in names:
                database = f"{run}_{name}"
                await admin.execute(f'CREATE DATABASE "{database}" TEMPLATE template0')
                made[name] = database
            yield dict(made)
        finally:
            for database in made.values():
                await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    finally:
        await admin.close()


def skipped(number: int, title: str, why: str) -> Result:
    """The result of benchmark ``number`` that could not run: no figure, ``why`` said."""
    return Result(number=number, title=title, sizes="-", figures=[], skipped=why)
