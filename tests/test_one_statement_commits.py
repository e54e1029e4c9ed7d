"""A run's commits on PostgreSQL go as one statement, and write what the general way writes.

Under a held lease, after a first commit that learned the conversation's thread, a
commit of a turn or a tool call (entries numbered after a known ``seq``, tool call
records, model calls, run events) is one statement in autocommit
(``conversations/store/sql/one_statement.py``). These tests run the same run's commits
on SQLite (the general way) and on PostgreSQL and compare what the store holds and what
the deliverer was handed; count the statements on PostgreSQL; and show that each case
the one statement cannot write (a lease taken over, a thread bound meanwhile, a taken
``seq``) ends as the general way ends it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text

from conversations.render import render_event
from conversations.store import OutboxRecord, migrate
from conversations.store.leases import Leases
from conversations.store.records import Lease
from conversations.store.sql import SqlStore, create_engine
from core.vocabulary import lifecycle
from core.vocabulary.entries import AssistantTurn, ModelUsage, ToolCall, ToolResultEntry, UserText
from core.vocabulary.errors import LeaseLost, StaleSnapshot
from core.vocabulary.journal import Change
from core.vocabulary.run_events import ProgressNote, RunAnswered, RunStats
from core.vocabulary.tool_records import ToolCallRecord, ToolState
from tests.test_store_contract import ALICE, new_conversation


class Opened:
    """A store on one backend, with what its engine ran and what it handed on."""

    def __init__(self, url: str) -> None:
        self.handed: list[OutboxRecord] = []
        self.store = SqlStore(
            engine=create_engine(url), render=render_event, on_outbox=self.handed.extend
        )
        self.statements: list[tuple[str, bool]] = []
        """Each statement the store's engine sent: its SQL, whether in autocommit."""

        def executed(conn: Any, _cursor: Any, sql: str, _params: Any, *_rest: Any) -> None:
            autocommit = conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT"
            self.statements.append((sql, autocommit))

        event.listen(self.store.engine.sync_engine, "before_cursor_execute", executed)


@contextlib.asynccontextmanager
async def opened(url: str) -> AsyncIterator[Opened]:
    await migrate.upgrade(create_engine(url))
    store = Opened(url)
    try:
        yield store
    finally:
        await store.store.close()


@pytest.fixture
async def postgres(postgres_url: str) -> AsyncIterator[Opened]:
    async with opened(postgres_url) as store:
        yield store


def call(n: int, state: ToolState) -> ToolCallRecord:
    return ToolCallRecord(
        tool_use_id=f"toolu_{n}",
        name="append_line",
        input={"line": f"line {n}", "note": None},
        read_only=False,
        state=state,
        turn_seq=2,
        index=n,
    )


def run_commits() -> list[tuple[Change, int | None]]:
    """A run's commits as :func:`core.run.live.commit` makes them (``after_seq`` known):
    its request, a turn asking for two calls, each call's running marker and result with
    its note, and the answer that ends the run."""
    asked = tuple(
        ToolCall(id=f"toolu_{n}", name="append_line", input={"line": f"line {n}"}) for n in range(2)
    )
    usage = ModelUsage(model="fake", input_tokens=120, output_tokens=30)
    turn = AssistantTurn(tool_calls=asked, stop_reason="tool_use", model="fake", usage=usage)
    commits: list[tuple[Change, int | None]] = [
        (Change(entries=(UserText(author=ALICE, text="go", role="request"),)), 0),
        (
            Change(
                entries=(turn,),
                tool_calls=(call(0, ToolState.APPROVED), call(1, ToolState.APPROVED)),
            ),
            1,
        ),
    ]
    seq = 2
    for n in range(2):
        commits.append((Change(tool_calls=(call(n, ToolState.RUNNING),)), None))
        result = ToolResultEntry(tool_use_id=f"toolu_{n}", content=f"appended {n}")
        done = call(n, ToolState.DONE)
        commits.append(
            (
                Change(
                    entries=(result,),
                    tool_calls=(done,),
                    events=(ProgressNote(text=f"appended line {n}"),),
                ),
                seq,
            )
        )
        seq += 1
    answer = AssistantTurn(text="Both lines are in.", model="fake", usage=usage)
    said = RunAnswered(text=answer.text, stats=RunStats(), mention=ALICE)
    commits.append((Change(entries=(answer,), status=lifecycle.DONE, events=(said,)), seq))
    return commits


@contextlib.asynccontextmanager
async def held_run(store: SqlStore, made: int) -> AsyncIterator[tuple[str, Lease]]:
    """A new conversation whose lease this process holds for the block, with the first
    ``made`` of :func:`run_commits` committed: its id and the lease."""
    cid = await new_conversation(store)
    leases = Leases(store=store.leases, owner="host-a:1", ttl=60)
    async with leases.held(cid) as lease:
        for change, after in run_commits()[:made]:
            await store.journal.commit(cid, change, after_seq=after)
        yield cid, lease


async def run_and_read(opened: Opened) -> dict[str, Any]:
    """Make :func:`run_commits` under a held lease; what the store then holds."""
    store = opened.store
    cid = await new_conversation(store)
    leases = Leases(store=store.leases, owner="host-a:1", ttl=60)
    async with leases.held(cid, may_release=lambda: True):
        for change, after in run_commits():
            await store.journal.commit(cid, change, after_seq=after)
    snap = await store.journal.load(cid)
    return {
        "journal": [(r.seq, r.entry.kind) for r in snap.journal],
        "calls": {k: (v.state, v.input) for k, v in snap.tool_calls.items()},
        "status": snap.status,
        "outbox": [
            (r.purpose, r.state, r.action.model_dump()) for r in await store.outbox.rows(cid)
        ],
        "handed": [(r.purpose, r.action.model_dump()) for r in opened.handed],
        "lease": await store.leases.lease_owner(cid),
        "usage": await model_calls(store, cid),
    }


async def model_calls(store: SqlStore, cid: str) -> list[tuple[int, int, int]]:
    """``(seq, input tokens, output tokens)`` of each model call stored."""
    query = "SELECT seq, input_tokens, output_tokens FROM model_calls WHERE conversation_id = :c"
    async with store.engine.connect() as conn:
        rows = await conn.execute(text(query + " ORDER BY seq"), {"c": cid})
        return [tuple(row) for row in rows]


async def test_a_run_s_commits_leave_the_same_rows_on_sqlite_and_postgresql(
    tmp_path: Path, postgres_url: str
) -> None:
    async with opened(f"sqlite+aiosqlite:///{tmp_path / 'one.db'}") as sqlite:
        general = await run_and_read(sqlite)
    async with opened(postgres_url) as postgresql:
        one = await run_and_read(postgresql)

    assert one == general
    assert general["journal"] == [
        (1, "user_text"),
        (2, "assistant_turn"),
        (3, "tool_result"),
        (4, "tool_result"),
        (5, "assistant_turn"),
    ]
    assert general["calls"]["toolu_1"] == (ToolState.DONE, {"line": "line 1", "note": None})
    assert general["status"] == lifecycle.DONE
    notes = [action["text"] for purpose, action in general["handed"] if purpose == "note"]
    assert len(notes) == 2 and all("appended line" in n for n in notes)
    assert "Both lines are in." in general["outbox"][-1][2]["text"]
    assert general["usage"] == [(2, 120, 30), (5, 120, 30)]
    assert general["lease"] is None  # the answer's commit gave the lease up


async def test_after_the_first_each_run_commit_is_one_statement_in_autocommit(
    postgres: Opened,
) -> None:
    commits = run_commits()
    cid = await new_conversation(postgres.store)
    leases = Leases(store=postgres.store.leases, owner="host-a:1", ttl=60)
    async with leases.held(cid, may_release=lambda: True):
        counts = []
        for change, after in commits:
            before = len(postgres.statements)
            await postgres.store.journal.commit(cid, change, after_seq=after)
            counts.append(postgres.statements[before:])

    assert len(counts[0]) > 1  # the first learns the thread, the general way
    for sent in counts[1:]:
        assert len(sent) == 1, sent
        sql, autocommit = sent[0]
        assert autocommit and sql.lstrip().startswith("WITH fence AS")
    assert await postgres.store.leases.lease_owner(cid) is None  # given up by the last


@pytest.mark.parametrize("owner", ["host-b:2", "host-a:1"])  # another process, or ours restarted
async def test_a_lease_taken_over_refuses_the_one_statement_and_writes_nothing(
    postgres: Opened, owner: str
) -> None:
    store = postgres.store
    commits = run_commits()
    async with held_run(store, 2) as (cid, lease):
        async with store.engine.begin() as conn:  # another process takes it over
            await conn.execute(
                text(
                    "UPDATE conversations SET lease_owner = :owner,"
                    " lease_epoch = lease_epoch + 1 WHERE id = :id"
                ),
                {"id": cid, "owner": owner},
            )
        before = await store.journal.load(cid)
        handed = len(postgres.handed)

        with pytest.raises(LeaseLost):
            await store.journal.commit(cid, commits[3][0], after_seq=commits[3][1])

        now = await store.journal.load(cid)
        assert now.journal == before.journal and now.tool_calls == before.tool_calls
        assert len(postgres.handed) == handed
        assert [r.purpose for r in await store.outbox.rows(cid)] == []
        assert lease.epoch == 1


async def test_a_thread_bound_meanwhile_gets_the_run_s_notes(postgres: Opened) -> None:
    store = postgres.store
    commits = run_commits()
    async with held_run(store, 3) as (cid, _lease):
        async with store.engine.begin() as conn:  # the deliverer binds another thread
            await conn.execute(
                text("UPDATE conversations SET thread = '2.0' WHERE id = :id"), {"id": cid}
            )
        postgres.statements.clear()

        await store.journal.commit(cid, commits[3][0], after_seq=commits[3][1])
        await store.journal.commit(cid, commits[4][0], after_seq=commits[4][1])
        sent = [sql.lstrip() for sql, _autocommit in postgres.statements]

    one = [sql.startswith("WITH fence AS") for sql in sent]
    # tried in one statement (which wrote nothing), made the general way, then the next
    # in one statement again, for the thread the general way found
    assert one[0] and not any(one[1:-1]) and one[-1] and len(one) > 3
    notes = [r.action for r in await store.outbox.rows(cid) if r.purpose == "note"]
    assert [n.ref.thread for n in notes] == ["2.0"]
    assert len((await store.journal.load(cid)).journal) == 3


async def test_a_taken_seq_is_stale_the_one_statement_way_too(postgres: Opened) -> None:
    store = postgres.store
    commits = run_commits()
    async with held_run(store, 2) as (cid, _lease):
        before = await store.journal.load(cid)

        with pytest.raises(StaleSnapshot):
            await store.journal.commit(cid, commits[3][0], after_seq=1)  # seq 2 is taken

        now = await store.journal.load(cid)
        assert now.journal == before.journal and now.tool_calls == before.tool_calls
        assert await store.outbox.rows(cid) == []


async def test_a_change_of_many_rows_goes_the_general_way(postgres: Opened) -> None:
    """Past ``MOST_ROWS`` rows a change is the general transaction (a statement of its
    own per number of rows, and a parameter per value, would pile up)."""
    from conversations.store.sql.one_statement import MOST_ROWS

    store = postgres.store
    many = tuple(call(n, ToolState.APPROVED) for n in range(MOST_ROWS + 1))
    async with held_run(store, 2) as (cid, _lease):
        postgres.statements.clear()
        await store.journal.commit(cid, Change(tool_calls=many), after_seq=2)
        sent = [sql.lstrip() for sql, _autocommit in postgres.statements]

    assert len(sent) > 1 and not any(sql.startswith("WITH fence AS") for sql in sent)
    assert len((await store.journal.load(cid)).tool_calls) == MOST_ROWS + 1
