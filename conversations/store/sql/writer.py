"""The writer and the reader: the store's transactions as plain functions, run in threads.

Measured on the development machine (``make bench``, benchmark 2): the same
tool-call transactions ran at about 260 per second through SQLAlchemy Core on
aiosqlite and at about 8,800 per second through the ``sqlite3`` module alone. The
difference is the async layer: aiosqlite hands every cursor operation to its
thread and back (about thirty hand-offs for a transaction of five statements).
So on a SQLite file the store writes through a dedicated writer thread on the
``sqlite3`` module: a write transaction is a plain function of a synchronous
SQLAlchemy :class:`~sqlalchemy.orm.Session`,
run whole in one thread that owns the process's one writer connection (pysqlite,
SQLite's own driver under SQLAlchemy), so it costs one hand-off. The reads on a
run's and the deliverer's path (a conversation's load, the pending outbox rows)
run the same way in a reader thread with a connection of its own; in WAL mode
they never wait for the writer. Other reads stay on the async engine's pool.

Elsewhere (a server database, or SQLite ``:memory:``, which a second connection
cannot open) the same function runs through SQLAlchemy's
:meth:`~sqlalchemy.ext.asyncio.AsyncSession.run_sync` on the async engine.

A write (``whole``) is not cut in half by a cancellation: the task that asked for
it waits until the transaction has committed or rolled back, and only then sees its
:class:`asyncio.CancelledError`. So whoever cancels a run and then reads the
store finds every write the run made, whole, or none of it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from types import MappingProxyType
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


_NONE: Mapping[str, Any] = MappingProxyType({})

Transaction = Callable[[Session], T]
"""A write transaction: called with a session whose transaction has begun; it is
committed when the function returns and rolled back when it raises."""


class Runner:
    """Runs plain functions of a synchronous session, each in one transaction, in threads
    of its own (see the module docstring).

    ``engine``: the store's async engine (its URL names the database; its pragma
    and ``BEGIN`` listeners are set again on the runner's own engine by ``setup``,
    a function of a synchronous engine); ``options``: execution options of every
    transaction's connection (a call may add its own); ``threads``: how many
    threads, each with a connection of its own; ``whole``: a cancelled caller
    waits for its transaction to end before it sees the cancellation (writes).
    """

    def __init__(
        self,
        engine: AsyncEngine,
        setup: Callable[[Engine], None],
        options: Mapping[str, Any],
        *,
        name: str,
        threads: int = 1,
        session_class: type[Session] = Session,
        whole: bool = False,
    ) -> None:
        self._async_engine = engine
        self._options = dict(options)
        self._session_class = session_class
        self._whole = whole
        url = engine.url
        self._engine: Engine | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._lock = asyncio.Lock()
        self._binds: dict[tuple[tuple[str, Any], ...], Engine] = {}
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            self._engine = create_sync_engine(
                url.set(drivername="sqlite+pysqlite"), pool_size=threads, max_overflow=0
            )
            setup(self._engine)
            self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)

    async def run(
        self,
        transaction: Transaction[T],
        options: Mapping[str, Any] = _NONE,
        *,
        then: Callable[[T], None] | None = None,
    ) -> T:
        """Run ``transaction`` in one transaction; its result, or what it raised.

        ``then`` is called with the result in the event loop as soon as the
        transaction has committed, whether or not the caller is still waiting (a
        cancelled caller of a ``whole`` write still learns nothing, but what must
        follow a commit, such as handing its outbox rows on, still happens).
        Raises ``sqlalchemy.exc.OperationalError`` ("database is locked") when a
        write waits for another process's write lock longer than ``busy_timeout``.
        """
        merged = {**self._options, **options}
        if self._executor is None:
            async with self._lock:
                work = asyncio.ensure_future(self._on_async_engine(transaction, merged))
                _after(work, then)
                return await (_whole(work) if self._whole else work)
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, self._in_thread, transaction, merged)
        _after(future, then)
        return await (_whole(future) if self._whole else future)

    def _in_thread(self, transaction: Transaction[T], options: dict[str, Any]) -> T:
        assert self._engine is not None
        key = tuple(sorted(options.items()))
        bind = self._binds.get(key)
        if bind is None:
            bind = self._binds[key] = self._engine.execution_options(**options)
        with self._session_class(bind, expire_on_commit=False) as session, session.begin():
            return transaction(session)

    async def _on_async_engine(self, transaction: Transaction[T], options: dict[str, Any]) -> T:
        async with AsyncSession(
            self._async_engine, expire_on_commit=False, sync_session_class=self._session_class
        ) as session:
            async with session.begin():
                await session.connection(execution_options=options)
                return await session.run_sync(transaction)

    async def close(self) -> None:
        """Close the runner's connections and end its threads."""
        if self._executor is None or self._engine is None:
            return
        await asyncio.get_running_loop().run_in_executor(self._executor, self._engine.dispose)
        self._executor.shutdown(wait=True)


def _after(future: asyncio.Future[T], then: Callable[[T], None] | None) -> None:
    """Call ``then`` with ``future``'s result once it has one (not when it failed)."""
    if then is None:
        return

    def done(ended: asyncio.Future[T]) -> None:
        if not ended.cancelled() and ended.exception() is None:
            then(ended.result())

    future.add_done_callback(done)


async def _whole(future: asyncio.Future[T]) -> T:
    """Await ``future``; when cancelled meanwhile, first let it finish, then raise."""
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        if not future.done():
            with contextlib.suppress(BaseException):
                await asyncio.wait({future})
        raise
