"""Benchmark 2: tool calls made durable per second, through threadbot's store and its floors.

**Figure.** What the engine writes for one tool call (``core/run/tool_calls.py``),
through the store the app builds (``conversations.store.backends.open_store`` on a
SQLite file), holding the conversation's lease as a run does (so every commit is
fenced): the running marker, ``Change(tool_calls=(running,))``, then the result,
``Change(entries=(tool_result,), tool_calls=(done,), events=(ProgressNote,))``
(the note becomes an outbox row). Calls one after another, each one committed
before the next; tool calls per second = calls / seconds of the round.

**Floor.** The same two transactions per call, with the same rows, through
SQLAlchemy Core on aiosqlite (``bench._floor.core_engine``, threadbot's SQLite
settings) on a database migrated by threadbot's migrations and holding the same
rows (set up through the store, untimed), one pooled connection per transaction,
no reads:

1. ``BEGIN IMMEDIATE``; ``UPDATE tool_calls SET state='running', updated_at``
   (by conversation and ``tool_use_id``); ``COMMIT``;
2. ``BEGIN IMMEDIATE``; ``INSERT INTO journal`` (the ``tool_result`` entry, its
   ``seq`` known); ``UPDATE tool_calls SET state='done', updated_at``;
   ``INSERT INTO outbox`` (the progress note's row, as the store renders it);
   ``COMMIT``.

The lease check of the store's fenced commits has no counterpart in the floor.
**Reference.** The same SQL through the ``sqlite3`` module alone (synchronous,
blocking the loop), and DBOS (:mod:`bench._dbos`): one workflow of one async
step per tool call, checkpointed in its SQLite system database with the same
pragmas; one tool call counts as one DBOS step.

**Rounds.** ``rounds`` rounds of ``calls`` tool calls each, a fresh conversation
per round; in each round every contender runs once, in the order Core floor,
store, DBOS, ``sqlite3``, reversed every other round
(:func:`bench._verdict.in_turn`), so the store runs beside each of its floors
and on the other side of it the next round. A round's ratio is the store's rate
over its floor's of the same round (Core, or DBOS); each verdict is on the
median of those ratios, printed with their spread. Targets: the store at least
50% of the Core floor's rate, and at least DBOS's steps per second.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Table, insert, update
from sqlalchemy.ext.asyncio import AsyncEngine

from bench._floor import (
    IMMEDIATE,
    core_engine,
    migrated,
    reflect,
    row_counts,
    sqlite3_connection,
    sqlite_url,
)
from bench._report import Figure, Result
from bench._verdict import Target, in_turn
from conversations.events import PlatformRef
from core.run import live
from core.run.state import Run
from core.tool_state import admit, move
from core.vocabulary import lifecycle
from core.vocabulary.entries import AssistantTurn, ToolCall, UserText
from core.vocabulary.journal import Change
from core.vocabulary.people import Person
from core.vocabulary.run_events import ProgressNote
from core.vocabulary.tool_records import ToolCallRecord, ToolState

TARGET_FLOOR = 0.5
CONTENT = "tick: nothing to do"
NOTE = "bench_tick"
REQUESTER = Person(id="U0ALICE001", name="alice")


@dataclass
class Conversation:
    """One conversation set up with ``calls`` tool calls admitted ``approved``."""

    id: str
    records: list[ToolCallRecord]
    next_seq: int


async def set_up_conversation(store: Any, root: Path, number: int, calls: int) -> Conversation:
    """A running conversation whose last assistant turn asked for ``calls`` tool calls."""
    thread = f"1717000000.{number:06d}"
    ref = PlatformRef(platform="slack", workspace="T0AGT00001", channel="C0PROJ0001", thread=thread)
    cid = await store.threads.open_conversation(
        delivery_key=f"bench-{number}",
        binding=ref,
        requester=REQUESTER,
        workspace_root=root / "workspaces",
        position="executing",
    )
    assert cid is not None
    request = UserText(author=REQUESTER, text="please look into it", role="request")
    committed = await store.journal.commit(
        cid, Change(entries=(request,), status=lifecycle.RUNNING)
    )
    turn_seq = committed.seqs[-1] + 1
    asked = tuple(
        ToolCall(id=f"toolu_bench_1_{n}", name=NOTE, input={"n": n}) for n in range(calls)
    )
    records = []
    for index, call in enumerate(asked):
        moved = admit(
            call, read_only=True, state=ToolState.APPROVED, turn_seq=turn_seq, index=index
        )
        assert moved.record is not None
        records.append(moved.record)
    turn = AssistantTurn(tool_calls=asked, stop_reason="tool_use", model="bench")
    await store.journal.commit(cid, Change(entries=(turn,), tool_calls=tuple(records)))
    return Conversation(id=cid, records=records, next_seq=turn_seq + 1)


class StoreCalls:
    """The figure: each call's two commits through threadbot's store, under the lease, as
    a run makes them (:func:`core.run.live.commit`: the conversation loaded once
    before the clock starts, each commit numbered after the run's newest entry)."""

    def __init__(self, store: Any) -> None:
        from conversations.store.leases import Leases

        self.store = store
        self.leases = Leases(store=store.leases, owner="bench:tool-calls", ttl=600.0)

    async def run(self, conversation: Conversation) -> float:
        """Seconds for every call of ``conversation`` (lease taken before the clock starts)."""
        cid = conversation.id
        async with self.leases.held(cid):
            run = Run(conversation_id=cid, snapshot=await self.store.journal.load(cid))
            started = time.perf_counter()
            for record in conversation.records:
                await self._call(run, record)
            return time.perf_counter() - started

    async def _call(self, run: Run, record: ToolCallRecord) -> None:
        journal = self.store.journal
        running = move(record, ToolState.RUNNING).records
        await live.commit(run, journal, Change(tool_calls=running))
        done = move(running[0], ToolState.DONE, result=CONTENT)
        await live.commit(
            run,
            journal,
            Change(
                entries=done.results,
                tool_calls=done.records,
                events=(ProgressNote(text=NOTE),),
            ),
        )


@dataclass
class Rows:
    """What the floor writes per call, taken from the rows the store wrote (same shapes)."""

    body: dict[str, Any]
    outbox: dict[str, Any]

    @classmethod
    def read(cls, path: Path) -> Rows:
        """The last ``tool_result`` journal body and outbox row of the database at ``path``."""
        with sqlite3.connect(path) as db:
            (body,) = db.execute(
                "select body from journal where kind = 'tool_result' order by id desc limit 1"
            ).fetchone()
            purpose, platform, channel, action = db.execute(
                "select purpose, platform, channel, action from outbox order by id desc limit 1"
            ).fetchone()
        outbox = {"purpose": purpose, "platform": platform, "channel": channel}
        return cls(body=json.loads(body), outbox=outbox | {"action": json.loads(action)})

    def result(self, tool_use_id: str) -> dict[str, Any]:
        return self.body | {"tool_use_id": tool_use_id}


class CoreCalls:
    """The floor: the same two transactions per call through SQLAlchemy Core on aiosqlite."""

    def __init__(self, engine: AsyncEngine, tables: dict[str, Table], rows: Rows) -> None:
        self._engine = engine.execution_options(**IMMEDIATE)
        self._journal = tables["journal"]
        self._calls = tables["tool_calls"]
        self._outbox = tables["outbox"]
        self._rows = rows

    async def run(self, conversation: Conversation) -> float:
        """Seconds for every call of ``conversation``."""
        cid, calls = conversation.id, self._calls
        started = time.perf_counter()
        for n, record in enumerate(conversation.records):
            which = (calls.c.conversation_id == cid) & (calls.c.tool_use_id == record.tool_use_id)
            async with self._engine.begin() as conn:
                now = datetime.now(UTC)
                await conn.execute(
                    update(calls).where(which).values(state="running", updated_at=now)
                )
            async with self._engine.begin() as conn:
                now = datetime.now(UTC)
                await conn.execute(
                    insert(self._journal).values(
                        conversation_id=cid,
                        seq=conversation.next_seq + n,
                        kind="tool_result",
                        body=self._rows.result(record.tool_use_id),
                        created_at=now,
                    )
                )
                await conn.execute(update(calls).where(which).values(state="done", updated_at=now))
                await conn.execute(
                    insert(self._outbox).values(
                        conversation_id=cid,
                        state="pending",
                        attempts=0,
                        created_at=now,
                        **self._rows.outbox,
                    )
                )
        return time.perf_counter() - started


class Sqlite3Calls:
    """The reference: the same SQL through the ``sqlite3`` module, synchronously."""

    def __init__(self, path: Path, rows: Rows) -> None:
        self._db = sqlite3_connection(path)
        self._rows = rows

    def run(self, conversation: Conversation) -> float:
        """Seconds for every call of ``conversation``."""
        db, cid, out = self._db, conversation.id, self._rows.outbox
        action = out["action"]
        started = time.perf_counter()
        for n, record in enumerate(conversation.records):
            tid = record.tool_use_id
            db.execute("BEGIN IMMEDIATE")
            db.execute(
                "UPDATE tool_calls SET state = ?, updated_at = ? "
                "WHERE conversation_id = ? AND tool_use_id = ?",
                ("running", _now(), cid, tid),
            )
            db.execute("COMMIT")
            db.execute("BEGIN IMMEDIATE")
            now = _now()
            db.execute(
                "INSERT INTO journal (conversation_id, seq, kind, body, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (
                    cid,
                    conversation.next_seq + n,
                    "tool_result",
                    json.dumps(self._rows.result(tid)),
                    now,
                ),
            )
            db.execute(
                "UPDATE tool_calls SET state = ?, updated_at = ? "
                "WHERE conversation_id = ? AND tool_use_id = ?",
                ("done", now, cid, tid),
            )
            db.execute(
                "INSERT INTO outbox (conversation_id, purpose, platform, channel, action, state, "
                "attempts, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    cid,
                    out["purpose"],
                    out["platform"],
                    out["channel"],
                    json.dumps(action),
                    "pending",
                    0,
                    now,
                ),
            )
            db.execute("COMMIT")
        return time.perf_counter() - started

    def close(self) -> None:
        self._db.close()


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def dbos_missing() -> str | None:
    """Why DBOS cannot run here, or None when it can."""
    try:
        import dbos  # noqa: F401
    except ImportError as exc:
        return f"dbos is not installed ({exc}); install the bench extra: pip install -e '.[bench]'"
    return None


async def run(root: Path, *, calls: int = 250, rounds: int = 5) -> Result:
    """Measure ``rounds`` rounds of ``calls`` tool calls on each contender."""
    from conversations.render import render_event
    from conversations.store.backends import open_store

    started = time.perf_counter()
    paths = {name: root / f"{name}.db" for name in ("store", "core", "sqlite3")}
    conversations: dict[str, list[Conversation]] = {}
    stores = {}
    for name, path in paths.items():
        await migrated(path)
        stores[name] = await open_store(sqlite_url(path), render=render_event)
        conversations[name] = [
            await set_up_conversation(stores[name], root, n, calls) for n in range(rounds + 1)
        ]
    for name in ("core", "sqlite3"):
        await stores.pop(name).close()
    subject = StoreCalls(stores["store"])
    await subject.run(conversations["store"][0])  # warm-up; its rows are the floors' templates
    rows = Rows.read(paths["store"])
    engine = core_engine(paths["core"])
    floor = CoreCalls(engine, dict((await reflect(engine)).tables), rows)
    await floor.run(conversations["core"][0])
    reference = Sqlite3Calls(paths["sqlite3"], rows)
    reference.run(conversations["sqlite3"][0])
    missing = dbos_missing()
    dbos = None
    if missing is None:
        from bench._dbos import DbosSteps

        dbos = DbosSteps(root / "dbos.db")
        await dbos.run([CONTENT] * calls)
    rates: dict[str, list[float]] = {"store": [], "core": [], "sqlite3": [], "dbos": []}
    try:
        for number in range(1, rounds + 1):
            for name in in_turn(number - 1, "core", "store", "dbos", "sqlite3"):
                if name == "store":
                    seconds = await subject.run(conversations["store"][number])
                elif name == "core":
                    seconds = await floor.run(conversations["core"][number])
                elif name == "sqlite3":
                    seconds = reference.run(conversations["sqlite3"][number])
                elif dbos is not None:
                    seconds = await dbos.run([CONTENT] * calls)
                else:
                    continue
                rates[name].append(calls / seconds)
    finally:
        reference.close()
        await engine.dispose()
        await stores["store"].close()
        if dbos is not None:
            dbos.close()
    result = _result(rates, calls, rounds, missing, time.perf_counter() - started)
    counts = {
        name: row_counts(path, ("journal", "tool_calls", "outbox")) for name, path in paths.items()
    }
    if len({tuple(c.items()) for c in counts.values()}) != 1:
        result.notes.append(f"the floors wrote other rows than the store: {counts}")
    return result


def _result(
    rates: dict[str, list[float]], calls: int, rounds: int, missing: str | None, seconds: float
) -> Result:
    figure = Figure(
        key="tool_calls_per_s",
        label="tool calls made durable through the store",
        unit="calls/s",
        rounds=rates["store"],
        floor_rounds=rates["core"],
        floor_label="same transactions, SQLAlchemy Core on aiosqlite",
        target=Target(TARGET_FLOOR),
        better="higher",
    )
    reference = Figure(
        key="tool_calls_sqlite3",
        label="reference: the same SQL through sqlite3 alone",
        unit="calls/s",
        rounds=rates["sqlite3"],
        better="higher",
    )
    figures = [figure, reference]
    notes = []
    if missing is None:
        dbos = Figure(
            key="tool_calls_vs_dbos",
            label="tool calls through the store, against DBOS steps",
            unit="calls/s",
            rounds=rates["store"],
            floor_rounds=rates["dbos"],
            floor_label="DBOS async steps on SQLite, one per tool call",
            target=Target(1.0),
            better="higher",
        )
        figures.append(dbos)
    else:
        notes.append(f"DBOS not measured: {missing}")
    return Result(
        number=2,
        title="Tool calls made durable per second (running marker + result)",
        sizes=f"{calls} calls x {rounds} rounds per contender",
        figures=figures,
        seconds=seconds,
        notes=notes,
    )
