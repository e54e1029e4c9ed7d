"""Wake-ups on PostgreSQL: ``NOTIFY`` to tell, ``LISTEN`` on a connection of its own to hear.

(:mod:`conversations.store.wakeups` says what they are for.) A wake-up is sent with
``SELECT pg_notify(channel, payload)`` in a transaction of its own, after the commit
that wrote what it points at, so whoever hears it finds that in the store. PostgreSQL
delivers a notification to every session listening on the channel when the sending
transaction commits (https://www.postgresql.org/docs/15/sql-notify.html). The listening
connection is taken from the engine's pool and kept (asyncpg's
``Connection.add_listener``, https://magicstack.github.io/asyncpg/current/api/index.html);
a lost connection (a server restart, a network cut) is noticed by asyncpg's
termination callback or by a ``SELECT 1`` every :data:`PING` seconds, and made again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import func, select

from conversations.store.sql.database import Database
from conversations.store.wakeups import CHANNEL, Listener, Wakeup

log = logging.getLogger(__name__)

PING = 15.0
"""Seconds between two checks that the listening connection still answers."""
LONGEST_WAIT = 30.0
"""Seconds at most between two tries to listen again after the connection was lost."""


class PgWakeups:
    """:class:`conversations.store.wakeups.Wakeups` over ``NOTIFY``/``LISTEN``."""

    carried = True

    def __init__(self, db: Database) -> None:
        self._db = db

    async def tell(self, wakeup: Wakeup) -> None:
        """``NOTIFY`` the channel with ``wakeup``, in a transaction of its own."""
        notify = select(func.pg_notify(CHANNEL, wakeup.payload()))
        await self._db.write_alone(notify, lambda _result: None)

    async def listen(self, listener: Listener, reconnected: Callable[[], None]) -> None:
        """Hear wake-ups until cancelled (see the interface); errors are logged, never
        raised: the polls go on meanwhile."""
        failures, first = 0, True
        while True:
            heard_on: list[bool] = []
            try:
                await self._listen_once(listener, None if first else reconnected, heard_on)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                first = False
                if heard_on:  # it listened a while: start the waits over
                    failures = 0
                wait = min(2.0**failures, LONGEST_WAIT)
                failures += 1
                log.warning("lost the wake-up connection (%s); listening again in %g s", exc, wait)
                await asyncio.sleep(wait)

    async def _listen_once(
        self,
        listener: Listener,
        reconnected: Callable[[], None] | None,
        heard_on: list[bool],
    ) -> None:
        """Listen on one connection until it is lost (raises) or the task is cancelled;
        ``heard_on`` gets an item once it listens."""
        lost = asyncio.Event()

        def heard(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
            wakeup = Wakeup.parse(payload)
            if wakeup is not None:
                listener(wakeup)

        async with self._db.engine.connect() as conn:
            raw = (await conn.get_raw_connection()).driver_connection
            assert raw is not None
            raw.add_termination_listener(lambda _conn: lost.set())
            await raw.add_listener(CHANNEL, heard)
            heard_on.append(True)
            if reconnected is not None:
                reconnected()  # what was told while nobody listened: look at the store
            try:
                while not lost.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(lost.wait(), PING)
                    if not lost.is_set():
                        await raw.fetchval("SELECT 1")
            except BaseException:
                if not raw.is_closed():
                    with contextlib.suppress(Exception):
                        await raw.remove_listener(CHANNEL, heard)
                raise
            await conn.invalidate()  # never back to the pool: it is closed
            raise ConnectionError("the connection was closed")
