"""DBOS (dbos-transact-py) running the tool calls' shape as durable steps, on SQLite or
PostgreSQL.

One workflow per round; each tool call is one ``@DBOS.step()`` that returns the
tool's result text, so DBOS checkpoints it (one write transaction per step, in
its system database) before the workflow goes on. Async, like threadbot: the
workflow and its steps are coroutines run in the benchmark's event loop.

The system database is a SQLite file with threadbot's settings: the engine
given to DBOS runs :data:`bench._floor.PRAGMAS` on each new connection (WAL,
``synchronous=NORMAL``, the 10 s busy timeout, foreign keys) and keeps DBOS's
own choice of ``BEGIN IMMEDIATE`` for writes (the ``sqlite3`` module's
``isolation_level="IMMEDIATE"``). On PostgreSQL (benchmark 8) the system database
is a database of the benchmark's server given by its URL, and DBOS makes its own
engine there (psycopg 3, its default pool), as a deployment of DBOS would. Needs the
``bench`` extra (``dbos``); no network beyond that server.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from dbos import DBOS, DBOSConfig

from bench._floor import PRAGMAS


@DBOS.step()
async def tool_call(content: str) -> str:
    """One tool call: its result, checkpointed by DBOS."""
    return content


@DBOS.workflow()
async def tool_calls(contents: list[str]) -> int:
    """A run of tool calls one after another, one step each; returns how many."""
    for content in contents:
        await tool_call(content)
    return len(contents)


def _engine(url: str) -> sa.Engine:
    engine = sa.create_engine(url)

    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = "IMMEDIATE"  # DBOS's own SQLite setting
        for pragma in PRAGMAS:
            dbapi_connection.execute(pragma)

    sa.event.listen(engine, "connect", on_connect)
    return engine


class DbosSteps:
    """DBOS launched on its system database ``system``: a SQLite file's path, or a
    PostgreSQL database's URL (``postgresql://user@host:port/name``); :meth:`run` times
    one workflow; :meth:`close` destroys it."""

    def __init__(self, system: Path | str) -> None:
        config: DBOSConfig = {"name": "threadbot-bench", "log_level": "WARNING"}
        if isinstance(system, Path):
            url = f"sqlite:///{system}"
            config["system_database_url"] = url
            config["system_database_engine"] = _engine(url)
        else:
            config["system_database_url"] = system
        DBOS(config=config)
        DBOS.launch()

    async def run(self, contents: list[str]) -> float:
        """Seconds for one workflow of ``len(contents)`` steps, from its call to its result."""
        started = time.perf_counter()
        done = await tool_calls(contents)
        elapsed = time.perf_counter() - started
        assert done == len(contents)
        return elapsed

    def close(self) -> None:
        """Shut DBOS down (its threads and engine); the registered functions stay."""
        DBOS.destroy()
