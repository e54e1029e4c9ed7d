"""The store's ``health`` contract, on each backend: the levels an operator's
``/metrics`` shows and the database check of ``/readyz`` (:mod:`conversations.store.health`).

The other interfaces' contract is in ``test_store_contract.py`` (its last test checks
that every method of every interface is called in one of the modules it names).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from conversations.render import render_event
from conversations.store import Store
from conversations.store.health import Levels
from conversations.store.migrate import newest_revision
from conversations.store.sql import SqlStore, create_engine
from core.vocabulary import lifecycle
from core.vocabulary.journal import Change
from tests.test_store_contract import BACKENDS, enqueued, new_conversation, opened_store, posted

NO_LEVELS = Levels(inbox=0, outbox=0, oldest_outbox=0.0, waiting=0, running=0)


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A new, empty store of each backend (as in the contract suite)."""
    async with opened_store(request.param, request, tmp_path) as new:
        yield new


async def test_levels_count_what_waits_in_the_whole_store(store: Store) -> None:
    now = datetime.now(UTC)
    assert await store.health.problem() is None
    assert await store.health.levels(now) == NO_LEVELS

    running = await new_conversation(store, "Ev1", thread="1.0")
    await store.journal.commit(running, Change(status=lifecycle.RUNNING))
    waiting = await new_conversation(store, "Ev2", thread="2.0")
    await store.journal.commit(
        waiting, Change(status=lifecycle.waiting(lifecycle.WaitKind.PLAN_APPROVAL))
    )
    await new_conversation(store, "Ev3", thread="3.0")  # idle: neither
    await store.inbox.record_delivery("Ev-reply", waiting, {"kind": "message_posted"})
    await store.inbox.record_delivery("Ev-dropped", None, None)  # kept no event: not waiting
    ids = await enqueued(store, running, posted("one"), posted("two"))

    later = datetime.now(UTC) + timedelta(seconds=30)
    levels = await store.health.levels(later)
    assert (levels.inbox, levels.outbox, levels.waiting, levels.running) == (1, 2, 1, 1)
    assert 30 <= levels.oldest_outbox < 30 + 600  # written moments ago

    await store.outbox.mark_sent(ids, "m1")
    await store.journal.commit(waiting, Change(handled=("Ev-reply",)))
    levels = await store.health.levels(later)
    assert (levels.inbox, levels.outbox, levels.oldest_outbox) == (0, 0, 0.0)


async def test_a_database_that_does_not_answer_is_a_problem_not_an_error(tmp_path: Path) -> None:
    refused = SqlStore(
        engine=create_engine("postgresql+asyncpg://threadbot@127.0.0.1:1/threadbot"),
        render=render_event,
    )
    try:
        problem = await refused.health.problem()
        assert problem is not None and "127.0.0.1" in problem, problem
        with pytest.raises(OSError):
            await refused.health.levels(datetime.now(UTC))
    finally:
        await refused.close()


async def test_a_schema_behind_this_code_is_a_problem(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with opened_store("sqlite", request, tmp_path) as store:
        assert isinstance(store, SqlStore)
        async with store.engine.begin() as connection:
            await connection.execute(text("UPDATE alembic_version SET version_num = '0010'"))
        problem = await store.health.problem()
    assert problem == (f"the schema is at 0010, not {newest_revision()}: run threadbot db upgrade")
