"""Wake-ups between instances: the store's ``wakeups`` contract on each backend.

A wake-up told is heard by every listener of the same database (PostgreSQL:
``NOTIFY``/``LISTEN``; memory: the listeners of one store); on SQLite nothing carries
it and it says so (``carried`` False: the polls alone find things). A PostgreSQL
listener whose connection is cut listens again and says so (the hub then looks at the
store). (docs/architecture.md, "Several instances".)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import asyncpg
import pytest

from conversations.store import Store
from conversations.store.wakeups import Topic, Wakeup
from tests.test_store_contract import BACKENDS, opened_store


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A new, empty store of each backend (as in the contract suite)."""
    async with opened_store(request.param, request, tmp_path) as new:
        yield new


class Heard:
    """A listener: the wake-ups heard, and an event set by each."""

    def __init__(self) -> None:
        self.wakeups: list[Wakeup] = []
        self.reconnects = 0
        self.changed = asyncio.Event()

    def __call__(self, wakeup: Wakeup) -> None:
        self.wakeups.append(wakeup)
        self.changed.set()

    def reconnected(self) -> None:
        self.reconnects += 1
        self.changed.set()

    async def until(self, done: Callable[[], bool], seconds: float = 60.0) -> None:
        async with asyncio.timeout(seconds):
            while not done():
                self.changed.clear()
                await self.changed.wait()


async def told_until_heard(store: Store, told: Wakeup, *listeners: Heard) -> None:
    """Tell ``told`` again until every listener heard it (a listener's ``LISTEN`` starts
    in its task, some time after the task was created: nothing says when)."""
    async with asyncio.timeout(60):
        while not all(told in heard.wakeups for heard in listeners):
            await store.wakeups.tell(told)
            waits = [asyncio.ensure_future(heard.changed.wait()) for heard in listeners]
            await asyncio.wait(waits, timeout=0.2)  # heard, or tell again
            for wait in waits:
                wait.cancel()
            for heard in listeners:
                heard.changed.clear()


async def test_a_wakeup_told_is_heard_by_every_listener_where_the_database_carries_it(
    store: Store,
) -> None:
    first, second = Heard(), Heard()
    listening = [
        asyncio.create_task(store.wakeups.listen(h, h.reconnected)) for h in (first, second)
    ]
    try:
        told = Wakeup(Topic.STOP, "c1", "host-a:1")
        if not store.wakeups.carried:  # SQLite: nothing carries it, nothing is heard
            await store.wakeups.tell(told)
            await asyncio.sleep(0)
            assert first.wakeups == second.wakeups == []
            return
        await told_until_heard(store, told, first, second)
        assert {*first.wakeups, *second.wakeups} == {told}
        other = Wakeup(Topic.INBOX, "c2", "host-b:2")
        await store.wakeups.tell(other)
        await first.until(lambda: other in first.wakeups)
        await second.until(lambda: other in second.wakeups)
    finally:
        for task in listening:
            task.cancel()
        await asyncio.gather(*listening, return_exceptions=True)


@pytest.mark.parametrize("backend", ["postgresql"])
async def test_a_listener_whose_connection_is_cut_listens_again_and_says_so(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with opened_store(backend, request, tmp_path) as store:
        heard = Heard()
        task = asyncio.create_task(store.wakeups.listen(heard, heard.reconnected))
        url = request.getfixturevalue("postgres_url").replace("postgresql+asyncpg", "postgresql")
        admin = await asyncpg.connect(url)
        try:
            await told_until_heard(store, Wakeup(Topic.OUTBOX, "c1", "host-a:1"), heard)
            cut = await admin.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE query LIKE 'LISTEN%' AND datname = current_database()"
            )
            assert cut == 1
            await heard.until(lambda: heard.reconnects == 1)
            await told_until_heard(store, Wakeup(Topic.STOP, "c2", "host-b:2"), heard)
        finally:
            await admin.close()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def test_a_payload_that_is_no_wakeup_is_ignored() -> None:
    told = Wakeup(Topic.INBOX, "c1", "host-a:1")
    assert Wakeup.parse(told.payload()) == told
    for junk in ("", "{}", "[1]", '{"t": "nope", "c": "x", "o": "y"}', "not json"):
        assert Wakeup.parse(junk) is None
