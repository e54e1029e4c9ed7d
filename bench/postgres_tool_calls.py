"""Benchmark 8: tool calls made durable per second on PostgreSQL, beside DBOS on the same server.

**Figure.** Benchmark 2's work (:mod:`bench.tool_calls`) on PostgreSQL: what the
engine writes for one tool call, the running marker then the result (with its
progress note's outbox row), through the store the app builds
(``conversations.store.backends.open_store`` on ``postgresql+asyncpg``), holding
the conversation's lease as a run does (every commit fenced); calls one after
another, each committed before the next; tool calls per second = calls / seconds
of the round.

**Floors.** On the same server, each contender in a database of its own made for
this run (:mod:`bench._postgres`; the server's settings, so each commit waits for
its WAL to reach the disk):

- DBOS (:mod:`bench._dbos`) with its system database on PostgreSQL: one workflow of
  one async step per tool call, each step checkpointed; one tool call counts as
  one DBOS step. Target: the store at least DBOS's steps per second (issue 26);
- SQLAlchemy Core on asyncpg (:class:`bench.tool_calls.CoreCalls`), as benchmark 2's
  Core floor: the same two transactions per call with the same rows (``BEGIN``;
  ``UPDATE tool_calls`` to running; ``COMMIT``, then ``BEGIN``; ``INSERT INTO
  journal``; ``UPDATE tool_calls`` to done; ``INSERT INTO outbox``; ``COMMIT``), on a
  database migrated by threadbot's migrations, one pooled connection per
  transaction, no reads. Target: the store at least 50% of its rate, as on SQLite.

**Reference.** The same SQL through asyncpg alone, on one connection (no target).

**Rounds.** ``rounds`` rounds of ``calls`` tool calls each, a fresh conversation per
round; in each round every contender runs once, in the order Core floor, store,
DBOS, asyncpg, reversed every other round (:func:`bench._verdict.in_turn`), after
one warm-up round each. A round's ratio is the store's rate over its floor's of the
same round; each verdict is on the median of those ratios, printed with their
spread. Without a server (:func:`bench._postgres.find_server`) the benchmark is
reported skipped, with the reason.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import create_async_engine

from bench._floor import reflect
from bench._postgres import Server, find_server, fresh_databases, skipped
from bench._report import Figure, Result
from bench._verdict import Target, in_turn
from bench.tool_calls import (
    CONTENT,
    TARGET_FLOOR,
    Conversation,
    CoreCalls,
    Rows,
    StoreCalls,
    dbos_missing,
    set_up_conversation,
)

NUMBER = 8
TITLE = "Tool calls made durable per second on PostgreSQL (running marker + result)"
TABLES = ("journal", "tool_calls", "outbox")


async def read_rows(dsn: str) -> Rows:
    """The last ``tool_result`` journal body and outbox row of the database at ``dsn``."""
    import asyncpg

    db = await asyncpg.connect(dsn)
    try:
        body = await db.fetchval(
            "select body from journal where kind = 'tool_result' order by id desc limit 1"
        )
        row = await db.fetchrow(
            "select purpose, platform, channel, action from outbox order by id desc limit 1"
        )
    finally:
        await db.close()
    outbox = {"purpose": row["purpose"], "platform": row["platform"], "channel": row["channel"]}
    return Rows(body=json.loads(body), outbox=outbox | {"action": json.loads(row["action"])})


async def row_counts(dsn: str) -> dict[str, int]:
    """``{table: rows}`` of the tables the contenders write, in the database at ``dsn``."""
    import asyncpg

    db = await asyncpg.connect(dsn)
    try:
        return {t: int(await db.fetchval(f"select count(*) from {t}")) for t in TABLES}
    finally:
        await db.close()


class AsyncpgCalls:
    """The reference: the same SQL through asyncpg alone, on one connection."""

    def __init__(self, connection: Any, rows: Rows) -> None:
        self._db = connection
        self._rows = rows

    @classmethod
    async def open(cls, dsn: str, rows: Rows) -> AsyncpgCalls:
        """One asyncpg connection to ``dsn`` (closed by :meth:`close`)."""
        import asyncpg

        return cls(await asyncpg.connect(dsn), rows)

    async def run(self, conversation: Conversation) -> float:
        """Seconds for every call of ``conversation``."""
        db, cid, out = self._db, conversation.id, self._rows.outbox
        action = json.dumps(out["action"])
        which = "WHERE conversation_id = $3 AND tool_use_id = $4"
        started = time.perf_counter()
        for n, record in enumerate(conversation.records):
            tid = record.tool_use_id
            async with db.transaction():
                await db.execute(
                    f"UPDATE tool_calls SET state = $1, updated_at = $2 {which}",
                    "running",
                    datetime.now(UTC),
                    cid,
                    tid,
                )
            async with db.transaction():
                now = datetime.now(UTC)
                await db.execute(
                    "INSERT INTO journal (conversation_id, seq, kind, body, created_at) "
                    "VALUES ($1, $2, $3, $4, $5)",
                    cid,
                    conversation.next_seq + n,
                    "tool_result",
                    json.dumps(self._rows.result(tid)),
                    now,
                )
                await db.execute(
                    f"UPDATE tool_calls SET state = $1, updated_at = $2 {which}",
                    "done",
                    now,
                    cid,
                    tid,
                )
                await db.execute(
                    "INSERT INTO outbox (conversation_id, purpose, platform, channel, action, "
                    "state, attempts, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                    cid,
                    out["purpose"],
                    out["platform"],
                    out["channel"],
                    action,
                    "pending",
                    0,
                    now,
                )
        return time.perf_counter() - started

    async def close(self) -> None:
        await self._db.close()


async def run(root: Path, *, calls: int = 250, rounds: int = 5) -> Result:
    """Measure ``rounds`` rounds of ``calls`` tool calls on each contender; skipped (with
    the reason) when no PostgreSQL server answers."""
    server = await find_server()
    if isinstance(server, str):
        return skipped(NUMBER, TITLE, server)
    started = time.perf_counter()
    async with fresh_databases(server, "store", "core", "asyncpg", "dbos") as names:
        result = await _measure(server, names, root, calls, rounds)
    result.seconds = time.perf_counter() - started
    return result


async def _measure(
    server: Server, names: dict[str, str], root: Path, calls: int, rounds: int
) -> Result:
    from conversations.render import render_event
    from conversations.store.backends import open_store

    contenders = ("store", "core", "asyncpg")
    conversations: dict[str, list[Conversation]] = {}
    stores = {}
    for name in contenders:
        stores[name] = await open_store(server.database_url(names[name]), render=render_event)
        conversations[name] = [
            await set_up_conversation(stores[name], root, n, calls) for n in range(rounds + 1)
        ]
    for name in ("core", "asyncpg"):
        await stores.pop(name).close()
    subject = StoreCalls(stores["store"])
    await subject.run(conversations["store"][0])  # warm-up; its rows are the floors' templates
    rows = await read_rows(server.dsn(names["store"]))
    engine = create_async_engine(server.database_url(names["core"]))
    floor = CoreCalls(engine, dict((await reflect(engine)).tables), rows)
    await floor.run(conversations["core"][0])
    reference = await AsyncpgCalls.open(server.dsn(names["asyncpg"]), rows)
    await reference.run(conversations["asyncpg"][0])
    missing = dbos_missing()
    dbos = None
    rates: dict[str, list[float]] = {"store": [], "core": [], "asyncpg": [], "dbos": []}
    try:
        if missing is None:
            from bench._dbos import DbosSteps

            dbos = DbosSteps(server.dsn(names["dbos"]))
            await dbos.run([CONTENT] * calls)
        for number in range(1, rounds + 1):
            for name in in_turn(number - 1, "core", "store", "dbos", "asyncpg"):
                if name == "store":
                    seconds = await subject.run(conversations["store"][number])
                elif name == "core":
                    seconds = await floor.run(conversations["core"][number])
                elif name == "asyncpg":
                    seconds = await reference.run(conversations["asyncpg"][number])
                elif dbos is not None:
                    seconds = await dbos.run([CONTENT] * calls)
                else:
                    continue
                rates[name].append(calls / seconds)
    finally:
        await reference.close()
        await engine.dispose()
        await stores["store"].close()
        if dbos is not None:
            dbos.close()
    result = _result(server, rates, calls, rounds, missing)
    counts = {name: await row_counts(server.dsn(names[name])) for name in contenders}
    if len({tuple(c.items()) for c in counts.values()}) != 1:
        result.notes.append(f"the floors wrote other rows than the store: {counts}")
    return result


def _result(
    server: Server, rates: dict[str, list[float]], calls: int, rounds: int, missing: str | None
) -> Result:
    figures = []
    notes = [f"PostgreSQL server: {server.how}"]
    if missing is None:
        figures.append(
            Figure(
                key="pg_tool_calls_vs_dbos",
                label="tool calls through the store on PostgreSQL, against DBOS steps",
                unit="calls/s",
                rounds=rates["store"],
                floor_rounds=rates["dbos"],
                floor_label="DBOS async steps on PostgreSQL, one per tool call",
                target=Target(1.0),
                better="higher",
            )
        )
    else:
        notes.append(f"DBOS not measured: {missing}")
    figures.append(
        Figure(
            key="pg_tool_calls_per_s",
            label="the same, against SQLAlchemy Core",
            unit="calls/s",
            rounds=rates["store"],
            floor_rounds=rates["core"],
            floor_label="same transactions, SQLAlchemy Core on asyncpg",
            target=Target(TARGET_FLOOR),
            better="higher",
        )
    )
    figures.append(
        Figure(
            key="pg_tool_calls_asyncpg",
            label="reference: the same SQL through asyncpg alone",
            unit="calls/s",
            rounds=rates["asyncpg"],
            better="higher",
        )
    )
    return Result(
        number=NUMBER,
        title=TITLE,
        sizes=f"{calls} calls x {rounds} rounds per contender",
        figures=figures,
        notes=notes,
    )
