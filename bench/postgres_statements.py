"""Benchmark 9: SQL statements per story on PostgreSQL, every statement the server receives.

**Figure.** Benchmark 5's story (:mod:`bench.statements`: Alice's signed mention,
the plan posted, her ✅ reaction, one model turn of two read-only tool calls, the
answer posted, through Slack HTTP mode) with the app's store on
``postgresql+asyncpg``, in a database made for this run on the server
:mod:`bench._postgres` finds (dropped after). Counted: every statement the app
sends the server on any connection (:class:`bench._trace.PostgresTrace`, a proxy
that reads the protocol: each simple query, ``BEGIN``, ``COMMIT`` and ``ROLLBACK``
included, and each execution of a prepared statement), from just before the
mention's POST until the answer has reached the Slack fake and the app has settled,
background work included, as on SQLite. Printed with it: transactions (write: ran
an ``INSERT``, ``UPDATE``, ``DELETE`` or changed rows; read: the rest), statements
by verb, conversation loads.

**Floor.** As benchmark 5's: the story's write transactions, each as ``BEGIN``, one
statement per row it changed (the server's ``CommandComplete`` counts) and
``COMMIT``; no reads.

**Rounds.** A warm-up story, then ``rounds`` stories in the same app, each its own
round. Target: benchmark 5's, at most 60 statements (the issue sets none of its own
for PostgreSQL), judged on the median of the stories' counts with their spread.
Without a server the benchmark is reported skipped, with the reason.
"""

from __future__ import annotations

import time
from pathlib import Path

from bench._postgres import find_server, fresh_databases, skipped
from bench._report import Result
from bench._trace import PostgresTrace
from bench.statements import figure, tell

NUMBER = 9
TITLE = "SQL statements per story on PostgreSQL (every statement the server receives)"


async def run(root: Path, *, rounds: int = 3) -> Result:
    """Count the statements of ``rounds`` stories on PostgreSQL (after a warm-up one);
    skipped (with the reason) when no PostgreSQL server answers."""
    server = await find_server()
    if isinstance(server, str):
        return skipped(NUMBER, TITLE, server)
    started = time.perf_counter()
    socket = server.url.query.get("host")
    trace = PostgresTrace(
        host=server.url.host or "127.0.0.1",
        port=server.url.port or 5432,
        socket=socket if isinstance(socket, str) and socket.startswith("/") else None,
    )
    async with fresh_databases(server, "story") as names, trace.serving() as (host, port):
        url = server.url.set(host=host, port=port, database=names["story"], query={})
        database_url = url.render_as_string(hide_password=False)
        stories = await tell(trace, root / "statements", rounds, database_url=database_url)
    return Result(
        number=NUMBER,
        title=TITLE,
        sizes=f"{rounds} stories after a warm-up",
        figures=[figure(stories, key="pg_statements_per_story", on="PostgreSQL")],
        seconds=time.perf_counter() - started,
        notes=[f"PostgreSQL server: {server.how}"],
    )
