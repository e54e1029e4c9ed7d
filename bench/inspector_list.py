"""Benchmark 11: the run inspector's list page with 10,000 conversations in the store.

**Store.** ``conversations`` conversations (10,000) written straight into a store at the
newest schema (threadbot's migrations; a temporary SQLite file, and a database made
for the run on the PostgreSQL server :mod:`bench._postgres` finds, dropped after),
as the bot leaves them: each with its journal (the workflow chosen, with the shipped
``default`` workflow's whole definition as the bot journals it; the request; the
state entered; two model turns, a tool call and its result) and two model calls, one
in twenty unpriced; spread over 30 days, three platforms, 24 channels, 60 requesters,
every status (most ``done``). One request in 200 holds the word "zebra". PostgreSQL's
statistics are gathered after (``ANALYZE``, as its autovacuum would); SQLite's are
left as the bot leaves them (none).

**Figures.** ``GET /inspector/`` through the real aiohttp server on the operations
address (:class:`bot.ops.Operations`, the inspector mounted as ``threadbot run``
mounts it), from an aiohttp client signed in as an operator (the session cookie: the
guard reads the session from the store on every request), with a redactor that knows
three secrets; the response read whole and its rows counted. In ms, from sending the
request to the last byte. Two pages: the first page (50 rows, no filter) and a search
(``q=Zebra``), which finds 50 conversations and so reads the first request of every
one of the 10,000 (no page fills before the end: the most a search costs).

**Floors.** The same query in plain SQL: the statement the store sent for that page,
captured as it went to the driver, run on one plain connection with its parameters,
every row fetched (``sqlite3`` with threadbot's pragmas, :mod:`bench._floor`;
``asyncpg`` alone). So the figure over its floor is what the page adds to the
database's own work: HTTP, the session, SQLAlchemy, the template, the redactor.

**Rounds.** ``rounds`` rounds; in each, ``requests`` requests of the page and
``requests`` runs of its floor, alternating which goes first
(:func:`bench._verdict.in_turn`), after a warm-up of each; a round's value is the
median of its requests. Target (ours: the issue sets none): at most 3x the plain SQL
query, judged on the median of the per-round ratios, printed with their spread.
Without a PostgreSQL server its figures are left out and a note says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from sqlalchemy import Table, event, insert

from bench._floor import migrated, sqlite3_connection, sqlite_url
from bench._postgres import find_server, fresh_databases
from bench._report import Figure, Result
from bench._verdict import Target, in_turn
from bot.settings import Settings
from conversations.render import render_event
from conversations.store.backends import open_store
from conversations.store.inspection import PAGE_SIZE, ConversationFilter
from conversations.store.schema import ConversationRow, JournalRow, ModelCallRow
from conversations.store.sql import SqlStore
from core.secrets import Redactor
from core.workflows.loading import shipped_library
from tests.inspector_harness import inspector_served, with_operator

NUMBER = 11
TITLE = "The run inspector's list page (GET /inspector/) against the same query in plain SQL"
TARGET = Target(3.0)
"""Ours: the issue asks for the figure beside its floor and sets no bound."""
SEARCH = "Zebra"
RARE = 200
"""One request in this many holds the searched word."""
WARMUP = 3
BATCH = 2_000
SECRETS = {
    "SLACK_BOT_TOKEN": "xoxb-0000000000-0000000000000-benchmarkbenchmarkbench",
    "SLACK_SIGNING_SECRET": "0123456789abcdef0123456789abcdef",
    "ANTHROPIC_API_KEY": "sk-ant-api03-benchmark-benchmark-benchmark-benchmark",
}
"""What the page's redactor knows: a deployment's three secrets (test values)."""

Query = Callable[[], Awaitable[int]]


def rows_of(count: int, *, seed: int = 11) -> dict[str, list[dict[str, Any]]]:
    """The rows of ``count`` conversations as the bot leaves them (module docstring):
    ``{"conversations": [...], "journal": [...], "model_calls": [...]}``."""
    rng = random.Random(seed)
    definition = shipped_library()["default"].model_dump_json(by_alias=True)
    end = datetime.now(UTC)
    words = "fix the flaky login test update docs why is the build red refactor parser".split()
    statuses = [("done", None)] * 14 + [("failed", None), ("cancelled", None)]
    statuses += [("waiting", "plan_approval"), ("waiting", "question"), ("running", None)]
    rows: dict[str, list[dict[str, Any]]] = {"conversations": [], "journal": [], "model_calls": []}
    for n in range(count):
        cid = f"{rng.getrandbits(128):032x}"
        platform = rng.choice(("slack",) * 6 + ("discord",) * 3 + ("console",))
        channel = f"C{rng.randrange(24):03d}"
        created = end - timedelta(seconds=rng.uniform(0, 30 * 86_400))
        lifecycle, wait = rng.choice(statuses)
        text = " ".join(rng.choice(words) for _ in range(rng.randrange(6, 30)))
        if n % RARE == 0:
            text = f"{text} zebra crossing"
        rows["conversations"].append(
            {
                "id": cid,
                "platform": platform,
                "workspace": "" if platform == "console" else "T1",
                "channel": channel,
                "thread": f"{n}.000100",
                "parent": None,
                "requester_id": f"U{rng.randrange(60):08d}",
                "requester_name": f"person {n % 60}",
                "lifecycle": lifecycle,
                "wait_kind": wait,
                "position": "approval" if wait == "plan_approval" else "answered",
                "plan_version": 1,
                "workspace_dir": f"/var/lib/threadbot/workspaces/{cid}",
                "created_at": created,
                "updated_at": created + timedelta(seconds=rng.uniform(5, 7_200)),
            }
        )
        rows["journal"] += _journal(cid, created, text, definition)
        for seq in (4, 6):
            unpriced = rng.randrange(20) == 0
            rows["model_calls"].append(
                {
                    "conversation_id": cid,
                    "seq": seq,
                    "run_id": "r1",
                    "position": "planning",
                    "model": "claude-sonnet-4-5",
                    "input_tokens": rng.randrange(2_000, 20_000),
                    "output_tokens": rng.randrange(50, 2_000),
                    "cache_read_tokens": rng.randrange(0, 30_000),
                    "cache_write_tokens": rng.randrange(0, 3_000),
                    "latency_ms": rng.randrange(500, 9_000),
                    "price_id": None,
                    "cost_micro_usd": None if unpriced else rng.randrange(1_000, 90_000),
                    "created_at": created,
                    "role": "planner",
                }
            )
    return rows


def _journal(cid: str, at: datetime, text: str, definition: str) -> list[dict[str, Any]]:
    alice = {"id": "U00000001", "name": "alice"}
    usage = {"model": "claude-sonnet-4-5", "input_tokens": 9_000, "output_tokens": 300}
    call = {"id": "toolu_1", "name": "read_file", "input": {"path": "README.md"}}
    bodies: list[tuple[str, dict[str, Any]]] = [
        ("workflow_chosen", {"name": "default", "definition": definition}),
        ("user_text", {"author": alice, "text": text, "role": "request", "files": []}),
        ("step_entered", {"position": "planning", "instructions": "Plan first. " * 20}),
        ("assistant_turn", {"text": "", "tool_calls": [call], "usage": usage}),
        ("tool_result", {"tool_use_id": "toolu_1", "content": "# threadbot\n" * 60}),
        ("assistant_turn", {"text": "Done: " + text, "usage": usage}),
    ]
    return [
        {
            "conversation_id": cid,
            "seq": seq,
            "kind": kind,
            "body": {"kind": kind, **body},
            "created_at": at,
        }
        for seq, (kind, body) in enumerate(bodies, start=1)
    ]


async def seed(store: SqlStore, count: int) -> None:
    """Write ``count`` conversations (:func:`rows_of`) into ``store``'s database, in
    batches; on PostgreSQL, gather its statistics after."""
    made = rows_of(count)
    tables = {
        "conversations": cast(Table, ConversationRow.__table__),
        "journal": cast(Table, JournalRow.__table__),
        "model_calls": cast(Table, ModelCallRow.__table__),
    }
    async with store.engine.begin() as conn:
        for name, table in tables.items():
            rows = made[name]
            for start in range(0, len(rows), BATCH):
                await conn.execute(insert(table), rows[start : start + BATCH])
    if store.engine.dialect.name == "postgresql":
        async with store.engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.exec_driver_sql("ANALYZE")


async def sent(store: SqlStore, where: ConversationFilter) -> tuple[str, tuple[Any, ...]]:
    """The statement (and its parameters, as the driver got them) the store sends for the
    first page of ``where``."""
    seen: list[tuple[str, tuple[Any, ...]]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if "page" in statement and "model_calls" in statement:
            seen.append((statement, tuple(parameters)))

    event.listen(store.engine.sync_engine, "before_cursor_execute", capture)
    try:
        await store.inspection.conversations(where)
    finally:
        event.remove(store.engine.sync_engine, "before_cursor_execute", capture)
    [found] = seen
    return found


async def _median_ms(query: Query, times: int) -> tuple[float, int]:
    """The median of ``times`` runs of ``query`` in ms, and the rows the last one counted."""
    spent, rows = [], 0
    for _ in range(times):
        began = time.perf_counter()
        rows = await query()
        spent.append((time.perf_counter() - began) * 1000)
    return statistics.median(spent), rows


async def _measure(
    page: Query, floor: Query, *, requests: int, rounds: int
) -> tuple[list[float], list[float], tuple[int, int]]:
    """``rounds`` rounds of ``page`` and ``floor`` (alternating), after a warm-up; their
    per-round medians, and the rows each counted last."""
    for _ in range(WARMUP):
        await page()
        await floor()
    values: dict[str, list[float]] = {"page": [], "floor": []}
    counted = {"page": 0, "floor": 0}
    contenders = {"page": page, "floor": floor}
    for number in range(rounds):
        for name in in_turn(number, "floor", "page"):
            value, counted[name] = await _median_ms(contenders[name], requests)
            values[name].append(value)
    return values["page"], values["floor"], (counted["page"], counted["floor"])


@contextlib.asynccontextmanager
async def _client(store: SqlStore, root: Path) -> AsyncIterator[Any]:
    settings = with_operator(Settings(database_url="memory://", workspace_root=root / "ws"))
    async with inspector_served(store, settings, redactor=Redactor(SECRETS)) as served:
        yield await served.client()


async def _figures(
    store: SqlStore,
    floor_for: Callable[[str, tuple[Any, ...]], Query],
    root: Path,
    *,
    requests: int,
    rounds: int,
) -> list[Figure]:
    """The two pages' figures on ``store``, each beside its statement run by ``floor_for``."""
    on = "PostgreSQL" if store.engine.dialect.name == "postgresql" else "SQLite"
    pages = (
        ("first page", "/inspector/", ConversationFilter(), "list"),
        (
            f"a search, q={SEARCH},",
            f"/inspector/?q={SEARCH}",
            ConversationFilter(text=SEARCH),
            "search",
        ),
    )
    figures = []
    async with _client(store, root) as client:
        for label, path, where, key in pages:

            async def page(path: str = path) -> int:
                got = await client.get(path)
                if got.status != 200:
                    raise RuntimeError(f"GET {path}: {got.status}")
                return int(got.text.count("<tr data-conversation="))

            floor = floor_for(*await sent(store, where))
            values, floor_values, (shown, fetched) = await _measure(
                page, floor, requests=requests, rounds=rounds
            )
            figures.append(
                Figure(
                    key=f"inspector_{key}_{on.lower()}_ms",
                    label=f"{label} of the list on {on}, {shown} rows, median of the requests",
                    unit="ms",
                    rounds=values,
                    floor_rounds=floor_values,
                    floor_label=f"the same query in plain SQL, {fetched} rows",
                    target=TARGET,
                    unmet="" if shown == min(fetched, PAGE_SIZE) else "rows differ",
                )
            )
    return figures


def _sqlite_floor(path: Path) -> Callable[[str, tuple[Any, ...]], Query]:
    connection = sqlite3_connection(path)

    def floor_for(sql: str, parameters: tuple[Any, ...]) -> Query:
        async def query() -> int:
            return len(connection.execute(sql, parameters).fetchall())

        return query

    return floor_for


async def run(
    root: Path, *, conversations: int = 10_000, requests: int = 20, rounds: int = 5
) -> Result:
    """Measure the list page against its plain SQL with ``conversations`` stored, on SQLite
    and (when a server answers) on PostgreSQL."""
    started = time.perf_counter()
    await asyncio.to_thread(root.mkdir, parents=True, exist_ok=True)
    sizes = {"requests": requests, "rounds": rounds}
    path = await migrated(root / "inspector.db")
    store = cast(SqlStore, await open_store(sqlite_url(path), render=render_event))
    try:
        await seed(store, conversations)
        figures = await _figures(store, _sqlite_floor(path), root, **sizes)
    finally:
        await store.close()
    notes = []
    server = await find_server()
    if isinstance(server, str):
        notes.append(f"PostgreSQL: skipped: {server}")
    else:
        import asyncpg

        async with fresh_databases(server, "inspector") as names:
            name = names["inspector"]
            pg = cast(SqlStore, await open_store(server.database_url(name), render=render_event))
            plain = await asyncpg.connect(server.dsn(name))
            try:
                await seed(pg, conversations)

                def floor_for(sql: str, parameters: tuple[Any, ...]) -> Query:
                    async def query() -> int:
                        return len(await plain.fetch(sql, *parameters))

                    return query

                figures += await _figures(pg, floor_for, root, **sizes)
            finally:
                await plain.close()
                await pg.close()
        notes.append(f"PostgreSQL server: {server.how}")
    return Result(
        number=NUMBER,
        title=TITLE,
        sizes=f"{conversations:,} conversations; {rounds} rounds of {requests} requests",
        figures=figures,
        seconds=time.perf_counter() - started,
        notes=notes,
    )
