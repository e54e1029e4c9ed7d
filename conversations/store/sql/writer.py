"""The writer: every write transaction of the process, one at a time, in one thread.

Measured on the development machine (``make bench``, benchmark 2): the same
tool-call transactions ran at about 260 per second through SQLAlchemy Core on
aiosqlite and at about 8,800 per second through the ``sqlite3`` module alone. The
difference is the async layer: aiosqlite hands every cursor operation to its
thread and back (about thirty hand-offs for a transaction of five statements).
So on a SQLite file the store writes the way the issue that asked for it allows
("a dedicated writer thread on the ``sqlite3`` module"): a write transaction is
a plain function of a synchronous SQLAlchemy :class:`~sqlalchemy.orm.Session`,
run whole in one thread that owns the process's one writer connection (pysqlite,
SQLite's own driver under SQLAlchemy), so it costs one hand-off. Reads stay on
the async engine's pool and, in WAL mode, never wait for the writer.

Elsewhere (a server database, or SQLite ``:memory:``, which a second connection
cannot open) the same function runs through SQLAlchemy's
:meth:`~sqlalchemy.ext.asyncio.AsyncSession.run_sync` on the async engine.

A write is not cut in half by a cancellation: the task that asked for it waits
until the transaction has committed or rolled back, and only then sees its
:class:`asyncio.CancelledError`. So whoever cancels a run and then reads the
store finds every write the run made, whole, or none of it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from sqlalchemy import Engine, event
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.orm import ORMExecuteState, Session

T = TypeVar("T")


class WriteSession(Session):
    """The session of a write transaction: its ORM ``UPDATE`` and ``DELETE`` statements
    do not look for objects to bring up to date (a write transaction keeps none it
    would change), which saves evaluating each statement's criteria in Python
    (https://docs.sqlalchemy.org/en/20/orm/queryguide/dml.html#selecting-a-synchronization-strategy)."""


@event.listens_for(WriteSession, "do_orm_execute")
def _no_synchronization(state: ORMExecuteState) -> None:
    if state.is_update or state.is_delete:
        state.update_execution_options(synchronize_session=False)


Transaction = Callable[[Session], T]
"""A write transaction: called with a session whose transaction has begun; it is
committed when the function returns and rolled back when it raises."""


class Writer:
    """Runs write transactions one at a time (see the module docstring).

    ``engine``: the store's async engine (its URL names the database; its pragma
    and ``BEGIN`` listeners are set again on the writer's own engine by
    ``setup``, a function of a synchronous engine); ``options``: execution options
    of every write transaction's connection.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        setup: Callable[[Engine], None],
        options: Mapping[str, Any],
    ) -> None:
        self._async_engine = engine
        self._options = dict(options)
        url = engine.url
        self._threaded = url.get_backend_name() == "sqlite" and url.database not in (
            None,
            "",
            ":memory:",
        )
        self._engine: Engine | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._lock = asyncio.Lock()
        if self._threaded:
            self._engine = create_sync_engine(
                url.set(drivername="sqlite+pysqlite"), pool_size=1, max_overflow=0
            )
            setup(self._engine)
            self._engine = self._engine.execution_options(**self._options)
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store-writer")

    async def run(self, transaction: Transaction[T]) -> T:
        """Run ``transaction`` in one write transaction; its result, or what it raised.

        Raises ``sqlalchemy.exc.OperationalError`` ("database is locked") when
        another process holds SQLite's write lock for longer than ``busy_timeout``.
        """
        if self._executor is None:
            async with self._lock:
                return await _whole(asyncio.ensure_future(self._on_async_engine(transaction)))
        loop = asyncio.get_running_loop()
        return await _whole(loop.run_in_executor(self._executor, self._in_thread, transaction))

    def _in_thread(self, transaction: Transaction[T]) -> T:
        assert self._engine is not None
        with WriteSession(self._engine, expire_on_commit=False) as session, session.begin():
            return transaction(session)

    async def _on_async_engine(self, transaction: Transaction[T]) -> T:
        async with AsyncSession(
            self._async_engine, expire_on_commit=False, sync_session_class=WriteSession
        ) as session:
            async with session.begin():
                await session.connection(execution_options=self._options)
                return await session.run_sync(transaction)

    async def close(self) -> None:
        """Close the writer connection and end the thread (in it: SQLite connections
        belong to the thread that opened them)."""
        if self._executor is None or self._engine is None:
            return
        await asyncio.get_running_loop().run_in_executor(self._executor, self._engine.dispose)
        self._executor.shutdown(wait=True)


async def _whole(future: asyncio.Future[T]) -> T:
    """Await ``future``; when cancelled meanwhile, first let it finish, then raise."""
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        if not future.done():
            with contextlib.suppress(BaseException):
                await asyncio.wait({future})
        raise
