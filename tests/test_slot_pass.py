"""The SQL pass stops reading early and grants exactly what the rule grants, on any rows.

(docs/architecture.md, "Limits and priorities".) The rule is
:func:`conversations.store.slot_pass.decide`, over every row at once; the SQL store's
pass (:mod:`conversations.store.sql.slot_pass`) reads the held rows' counts and the
waiting rows in rank order only until no row left could be granted. On random rows
(held and waiting, several holders, one of them a gone process of this host,
workspaces and people, every limit set or not, priorities, ages, agings, rows past
their expiry), on SQLite and PostgreSQL, with batches of every size: the pass grants
the same rows in the same order, drops only rows the rule drops (all of them when it
sweeps), and leaves nothing a pass would still grant; a look then counts the runs ahead
of each waiting row as :func:`conversations.store.slot_pass.ahead_of` does, and finds
a pass would change something exactly when the rule says so.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.orm import Session

from conversations.store import migrate
from conversations.store.owners import holder_gone
from conversations.store.schema import SlotRow
from conversations.store.slot_pass import ahead_of, decide
from conversations.store.slots import Category, SlotState, rank_of
from conversations.store.sql import create_engine
from conversations.store.sql import slot_pass as sql_pass
from tests.pids import gone_holder

NOW = datetime(2026, 12, 6, 9, 10, tzinfo=UTC)


DEAD = gone_holder()
"""A holder of this host with no process, for the whole session (:func:`gone_holder`)."""


@dataclass(frozen=True)
class Row:
    """A row to insert: what the strategy draws."""

    state: SlotState
    holder: str
    workspace: str
    user: str
    priority: int
    waited: int
    aging: float | None
    expired: bool
    limits: tuple[int | None, int | None, int | None, int | None]


LIMIT = st.one_of(st.none(), st.integers(1, 4))
ROWS = st.lists(
    st.builds(
        Row,
        state=st.sampled_from([SlotState.WAITING, SlotState.WAITING, SlotState.HELD]),
        holder=st.sampled_from(["a:1", "b:2", DEAD]),
        workspace=st.sampled_from(["slack:T1", "slack:T2"]),
        user=st.sampled_from(["slack:U1", "slack:U2", "slack:U3"]),
        priority=st.integers(-2, 2),
        waited=st.integers(0, 600),
        aging=st.sampled_from([None, 30.0, 60.0]),
        expired=st.sampled_from([False, False, False, True]),
        limits=st.tuples(LIMIT, LIMIT, LIMIT, LIMIT),
    ),
    max_size=40,
)


@pytest.fixture(params=["sqlite", "postgresql"])
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    """An engine on a new, migrated database of each SQL backend."""
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'pass.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    new = create_engine(url)
    await migrate.upgrade(new)
    try:
        yield new
    finally:
        await new.dispose()


@pytest.fixture(params=[(1, 2), (8, 512)], ids=["batches-of-1-then-2", "batches-as-shipped"])
def batches(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    first, most = request.param
    monkeypatch.setattr(sql_pass, "FIRST_BATCH", first)
    monkeypatch.setattr(sql_pass, "MOST_BATCH", most)


def _inserted(connection: Connection, rows: list[Row]) -> None:
    for n, row in enumerate(rows):
        enqueued = NOW - timedelta(seconds=row.waited)
        cluster, process, workspace, user = row.limits
        values = {
            "conversation_id": f"c{n}",
            "category": Category.RUN.value,
            "state": row.state.value,
            "holder": row.holder,
            "workspace": row.workspace,
            "user_key": row.user,
            "priority": row.priority,
            "rank": rank_of(row.priority, enqueued, row.aging),
            "enqueued_at": enqueued,
            "until": NOW + timedelta(seconds=-1 if row.expired else 60),
            "cluster_limit": cluster,
            "process_limit": process,
            "workspace_limit": workspace,
            "user_limit": user,
        }
        connection.execute(insert(SlotRow).values(values))


def _checked(connection: Connection, rows: list[Row], sweep: bool) -> None:
    """Insert ``rows``, run the SQL pass, and hold it against the rule (rolled back by the
    caller)."""
    _inserted(connection, rows)
    session = Session(bind=connection)
    before = [sql_pass.slot_of(r) for r in connection.execute(select(SlotRow.__table__))]
    rule = decide(before, now=NOW, gone=holder_gone)

    outcome = sql_pass.run_pass(session, Category.RUN, NOW, sweep=sweep)

    assert [row.id for row in outcome.granted] == list(rule.granted)
    assert set(outcome.dropped) <= set(rule.dropped)
    if sweep:
        assert set(outcome.dropped) == set(rule.dropped)
    after = [sql_pass.slot_of(r) for r in connection.execute(select(SlotRow.__table__))]
    again = decide(after, now=NOW, gone=holder_gone)
    assert again.granted == ()  # the pass left nothing it would still grant
    stale = sql_pass.stale(session, Category.RUN, NOW, sql_pass.Gone())
    assert stale == bool(again.dropped)

    waiting = [row.id for row in after if row.state is SlotState.WAITING]
    dead = [DEAD] if any(row.holder == DEAD for row in after) else []
    counted = sql_pass.aheads(session, [Category.RUN.value], waiting, NOW, dead)
    assert counted == ahead_of(after, waiting, now=NOW, gone=holder_gone)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rows=ROWS, sweep=st.booleans())
async def test_the_sql_pass_grants_what_the_rule_grants(
    engine: AsyncEngine, batches: None, rows: list[Row], sweep: bool
) -> None:
    async with engine.connect() as connection:  # rolled back when it closes
        await connection.run_sync(_checked, rows, sweep)
