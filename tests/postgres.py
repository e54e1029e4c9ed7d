"""PostgreSQL for the tests: a server to reach, a migrated template, a database per session.

Where the server comes from, first found first (docs/architecture.md, "Test seams"):

1. ``THREADBOT_TEST_DATABASE_URL``, when set: any database on the server, reached as a
   role that may create databases (``postgresql+asyncpg://user:password@host:port/db``);
2. 127.0.0.1:5432, when a server answers there as the current user or ``postgres``
   (these machines and CI's: PostgreSQL 15, trust auth);
3. a throwaway cluster from the machine's PostgreSQL binaries
   (``/usr/lib/postgresql/*/bin``, or ``initdb`` on ``PATH``): made by ``initdb`` in a
   temporary folder, as ``nobody`` when the tests run as root (``initdb`` refuses
   root), listening on 127.0.0.1 on a free port with its socket in that folder;
   stopped and removed at the end of the session;
4. else none: :func:`start` says why, and the tests that need it skip with that reason
   (fail under ``CI=true``, as every missing tool: ``tests/conftest.py``).

Each test session (each pytest-xdist worker) gets a database of its own, named
``threadbot_test_<worker>_<pid>_<random>``, created with ``CREATE DATABASE ...
TEMPLATE`` from a template database already at the newest migration (a copy: about
0.05 s, against 0.5 s for running the migrations), and dropped at the end. The
template is named after a hash of the migration scripts
(``threadbot_test_template_<hash>``), so a branch whose migrations differ gets its
own, and it is made and upgraded under an advisory lock, so sessions starting at
once (xdist workers, other checkouts on the same server) make it once. Templates
are kept between sessions, one per version of the migrations.
"""

from __future__ import annotations

import asyncio
import getpass
import glob
import hashlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy.engine import URL, make_url

ROOT = Path(__file__).resolve().parents[1]
MIGRATIONS = ROOT / "conversations" / "migrations" / "versions"
TEMPLATE_LOCK = 0x7468726561647431
"""The advisory lock held while the template is made or upgraded (``threadt1``)."""

T = TypeVar("T")


@dataclass
class Server:
    """A PostgreSQL server the tests may create databases on.

    ``url``: an asyncpg SQLAlchemy URL of a database there to connect to for
    ``CREATE DATABASE``; ``stop``: ends a cluster this session started (else
    nothing); ``how``: where it came from, for a report.
    """

    url: URL
    how: str
    stop: Callable[[], None] = field(default=lambda: None)

    def database_url(self, name: str) -> str:
        """The SQLAlchemy URL of database ``name`` on this server, password included."""
        return self.url.set(database=name).render_as_string(hide_password=False)


def run(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` on an event loop of its own in a thread of its own (callable from
    sync fixtures, whether or not a loop runs in this thread); its result."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = asyncio.run(work)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name="postgres-setup")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["result"]  # type: ignore[no-any-return]


def _dsn(url: URL) -> str:
    """``url`` as asyncpg's DSN (no ``+asyncpg``); a socket folder stays its ``host``."""
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


async def _answers(url: URL) -> str | None:
    """None when a server answers at ``url`` and lets its role in; else why not."""
    import asyncpg

    try:
        connection = await asyncpg.connect(_dsn(url), timeout=5)
    except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
        return f"{url.render_as_string(hide_password=True)}: {exc or type(exc).__name__}"
    await connection.close()
    return None


def start() -> Server | str:
    """A server for this session (see the module docstring), or why there is none."""
    try:
        import asyncpg  # noqa: F401
    except ImportError:
        return "asyncpg is not installed (pip install -e '.[postgres]', or `make test`)"
    given = os.environ.get("THREADBOT_TEST_DATABASE_URL")
    if given:
        url = make_url(given).set(drivername="postgresql+asyncpg")
        problem = run(_answers(url))
        if problem is None:
            return Server(url=url, how="THREADBOT_TEST_DATABASE_URL")
        return f"THREADBOT_TEST_DATABASE_URL does not answer: {problem}"
    problems = []
    for user in dict.fromkeys((getpass.getuser(), "postgres")):
        url = make_url(f"postgresql+asyncpg://{user}@127.0.0.1:5432/postgres")
        problem = run(_answers(url))
        if problem is None:
            return Server(url=url, how="127.0.0.1:5432")
        problems.append(problem)
    cluster = throwaway_cluster()
    if isinstance(cluster, Server):
        return cluster
    return f"no PostgreSQL: {'; '.join(problems)}; and no throwaway cluster: {cluster}"


def _binaries() -> Path | None:
    """The folder of the newest PostgreSQL binaries on this machine (with ``initdb``)."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def throwaway_cluster(seconds: float = 60.0) -> Server | str:
    """Start a cluster of the machine's PostgreSQL in a new temporary folder (see the
    module docstring); the server, whose ``stop`` stops it and removes the folder,
    or why it could not start (within ``seconds``)."""
    binaries = _binaries()
    if binaries is None:
        return "no PostgreSQL binaries (apt install postgresql)"
    folder = Path(tempfile.mkdtemp(prefix="threadbot-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb and postgres refuse root
        nobody = pwd.getpwnam("nobody")
        os.chown(folder, nobody.pw_uid, nobody.pw_gid)
        as_user = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}"]
        as_user += ["--clear-groups", "--"]
    data = folder / "data"
    init_options = ["-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"]
    init = subprocess.run(
        [*as_user, str(binaries / "initdb"), "-D", str(data), *init_options],
        capture_output=True,
        text=True,
        cwd=folder,
        timeout=seconds,
        check=False,
    )
    if init.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        return f"initdb failed: {init.stderr.strip()[-500:]}"
    port = _free_port()
    options = ["-k", str(folder), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"]
    options += ["-c", "full_page_writes=off", "-c", "synchronous_commit=off"]
    with (folder / "postgres.log").open("w") as log:
        server = subprocess.Popen(
            [*as_user, str(binaries / "postgres"), "-D", str(data), "-p", str(port), *options],
            cwd=folder,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def stop() -> None:
        if server.poll() is None:
            server.send_signal(signal.SIGINT)  # a fast shutdown
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        shutil.rmtree(folder, ignore_errors=True)

    url = make_url(f"postgresql+asyncpg://postgres@127.0.0.1:{port}/postgres")
    deadline = time.monotonic() + seconds
    while (problem := run(_answers(url))) is not None:
        if server.poll() is not None or time.monotonic() > deadline:
            said = (folder / "postgres.log").read_text(errors="replace")[-500:]
            stop()
            return f"the throwaway cluster did not start ({problem}): {said}"
        time.sleep(0.1)
    return Server(url=url, how=f"a throwaway cluster in {folder}", stop=stop)


def migrations_hash() -> str:
    """A short hash of every migration script's name and content."""
    digest = hashlib.sha256()
    for script in sorted(MIGRATIONS.glob("*.py")):
        digest.update(script.name.encode() + b"\0" + script.read_bytes())
    return digest.hexdigest()[:12]


async def _session_database(server: Server, name: str) -> None:
    """Create database ``name`` from the template, making and upgrading the template
    first (under :data:`TEMPLATE_LOCK`)."""
    import asyncpg

    from conversations.store import migrate
    from conversations.store.sql import create_engine

    template = f"threadbot_test_template_{migrations_hash()}"
    admin = await asyncpg.connect(_dsn(server.url))
    try:
        await admin.execute("SELECT pg_advisory_lock($1)", TEMPLATE_LOCK)
        try:
            exists = await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", template)
            if not exists:
                await admin.execute(f'CREATE DATABASE "{template}"')
            engine = create_engine(server.database_url(template))
            try:
                await migrate.upgrade(engine)
            finally:
                await engine.dispose()
            await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
            # A commit does not wait for its WAL to reach the disk (a test database
            # need not survive the server's crash): 2,400 commits in 1 s, not 10 s.
            await admin.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
        finally:
            await admin.execute("SELECT pg_advisory_unlock($1)", TEMPLATE_LOCK)
    finally:
        await admin.close()


async def _drop(server: Server, name: str) -> None:
    import asyncpg

    admin = await asyncpg.connect(_dsn(server.url))
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


def session_database(server: Server) -> tuple[str, Callable[[], None]]:
    """A new database at the newest migration for this session: its SQLAlchemy URL, and a
    function that drops it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    name = f"threadbot_test_{worker}_{os.getpid()}_{secrets.token_hex(4)}"
    run(_session_database(server, name))
    return server.database_url(name), lambda: run(_drop(server, name))


def empty_database(server: Server) -> tuple[str, Callable[[], None]]:
    """A new database without any schema (not even Alembic's table): its SQLAlchemy URL,
    and a function that drops it."""
    name = f"threadbot_test_empty_{os.getpid()}_{secrets.token_hex(4)}"

    async def create() -> None:
        import asyncpg

        admin = await asyncpg.connect(_dsn(server.url))
        try:
            await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        finally:
            await admin.close()

    run(create())
    return server.database_url(name), lambda: run(_drop(server, name))


async def emptied(url: str) -> None:
    """Empty every table of the store's database at ``url`` (``alembic_version`` aside)
    and restart its id sequences: a fresh store for the next test, in about 0.04 s."""
    import asyncpg

    from conversations.store.schema import Base

    tables = ", ".join(f'"{table.name}"' for table in Base.metadata.sorted_tables)
    connection = await asyncpg.connect(_dsn(make_url(url)))
    try:
        await connection.execute(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")
    finally:
        await connection.close()
