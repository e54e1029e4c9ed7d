"""The SQL store's writer: one thread, one connection, whole transactions, reads beside it.

On a SQLite file every write transaction of the process runs in one thread on one
connection (``conversations.store.sql.writer``); reads go through the async
engine's pool and never wait for it (WAL); a write whose task is cancelled lands
whole before the cancellation is seen.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from conversations.render import render_event
from conversations.store import migrate
from conversations.store.schema import DeliveryRow
from conversations.store.sql import SqlStore, create_engine
from conversations.store.sql.database import Database


async def database(tmp_path: Path) -> Database:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'writer.db'}")
    await migrate.upgrade(engine)
    return Database(engine)


async def count_deliveries(db: Database) -> int:
    async with db.read() as session:
        return len(list((await session.execute(select(DeliveryRow.key))).scalars()))


async def test_every_write_runs_in_one_thread_on_one_connection(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'store.db'}")
    await migrate.upgrade(engine)
    store = SqlStore(engine=engine, render=render_event)
    seen: list[tuple[int, int]] = []

    def where(session: Session) -> None:
        raw = session.connection().connection.dbapi_connection
        seen.append((threading.get_ident(), id(raw)))

    try:
        await store.inbox.record_delivery("Ev1")
        for _ in range(3):
            await store._db.write(where)
        await asyncio.gather(*(store._db.write(where) for _ in range(5)))
    finally:
        await store.close()

    assert len(set(seen)) == 1  # one thread, one connection
    assert seen[0][0] != threading.get_ident()  # not the event loop's thread


async def test_a_cancelled_write_lands_whole_before_the_cancel_is_seen(tmp_path: Path) -> None:
    db = await database(tmp_path)

    def slow_write(session: Session) -> None:
        session.add(DeliveryRow(key="Ev-slow", conversation_id=None, event=None))
        session.flush()
        time.sleep(0.3)
        session.add(DeliveryRow(key="Ev-slow-2", conversation_id=None, event=None))

    try:
        task = asyncio.ensure_future(db.write(slow_write))
        await asyncio.sleep(0.05)
        started = time.monotonic()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        else:
            raise AssertionError("the cancellation was lost")
        assert time.monotonic() - started >= 0.2  # the write finished first
        assert await count_deliveries(db) == 2  # whole: both rows
    finally:
        await db.close()


async def test_a_failed_write_rolls_back_and_raises_its_error(tmp_path: Path) -> None:
    db = await database(tmp_path)

    def failing(session: Session) -> None:
        session.add(DeliveryRow(key="Ev-half", conversation_id=None, event=None))
        session.flush()
        raise ValueError("no")

    try:
        try:
            await db.write(failing)
        except ValueError as exc:
            assert str(exc) == "no"
        else:
            raise AssertionError("the error was swallowed")
        assert await count_deliveries(db) == 0
    finally:
        await db.close()


async def test_reads_go_on_while_a_write_holds_the_lock(tmp_path: Path) -> None:
    db = await database(tmp_path)
    holding = threading.Event()

    def long_write(session: Session) -> None:
        session.execute(text("INSERT INTO deliveries (key, received_at) VALUES ('Ev-w', '2026')"))
        holding.set()
        time.sleep(0.5)

    try:
        writing = asyncio.ensure_future(db.write(long_write))
        assert await asyncio.to_thread(holding.wait, 5)
        started = time.monotonic()
        assert await count_deliveries(db) == 0  # the write is not committed yet
        assert time.monotonic() - started < 0.3  # and the read did not wait for it
        await writing
        assert await count_deliveries(db) == 1
    finally:
        await db.close()
