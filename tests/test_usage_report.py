"""Every model call priced and recorded, and ``threadbot usage`` over them (issue 15).

A scripted run with the real Anthropic model against the local Messages API fake,
whose answers report usage with cache reads and writes, on SQLite with a price
sheet. The answer's footer says the tokens, the share from the cache and the
cost; ``threadbot usage`` (the command, in its own process) prints totals equal
to the figures worked out by hand below from the fake's usage and the price
sheet; a price changed afterwards is a new dated entry, and the calls made before
keep their cost while a call made after is costed at the new price.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.settings import ModelPrice, Settings
from bot.usage_report import since_argument
from core.vocabulary.lifecycle import Lifecycle
from tests import forkserver
from tests.fakes.anthropic_server import FakeAnthropicServer, Reply, text, tool_use
from tests.harness import Chat
from tests.migration_crashes import upgrade
from tests.test_cache_prefix import running

ROOT = Path(__file__).resolve().parents[1]
ZERO = timedelta(0)

PRICE = ModelPrice(input=3, output=15, cache_read=0.3, cache_write=3.75)
"""Dollars per million tokens of the fake's model, ``claude-test``."""
DEARER = ModelPrice(input=6, output=30, cache_read=0.6, cache_write=7.5)

SCRIPT = [
    Reply(
        [text("A plan."), tool_use("toolu_01", "propose_plan", {"steps": ["Write it"]})],
        input_tokens=1_200,
        output_tokens=80,
        cache_creation_input_tokens=3_000,
    ),
    Reply(
        [tool_use("toolu_02", "write_file", {"path": "a.md", "content": "a\n"})],
        input_tokens=150,
        output_tokens=60,
        cache_read_input_tokens=3_333,
        cache_creation_input_tokens=1_400,
    ),
    Reply(
        [tool_use("toolu_03", "finish", {"answer": "Written."})],
        input_tokens=90,
        output_tokens=41,
        cache_read_input_tokens=4_401,
        cache_creation_input_tokens=301,
    ),
]
# The cost of each call in µ$ (tokens x $/MTok), rounded half-up per call:
#   1: 1,200 x 3 + 80 x 15 + 3,000 x 3.75                  = 16,050
#   2: 150 x 3 + 60 x 15 + 3,333 x 0.3 + 1,400 x 3.75      =  7,599.9  -> 7,600
#   3: 90 x 3 + 41 x 15 + 4,401 x 0.3 + 301 x 3.75         =  3,334.05 -> 3,334
FIRST_RUN = {
    "calls": 3,
    "input_tokens": 1_440,
    "output_tokens": 181,
    "cache_read_tokens": 7_734,
    "cache_write_tokens": 4_701,
    "tokens": 14_056,
    "cost_micro_usd": 26_984,
    "cost_usd": "0.026984",
    "unpriced_calls": 0,
}
AFTER_THE_CHANGE = Reply(
    [tool_use("toolu_04", "finish", {"answer": "Nothing to do."})],
    input_tokens=100,
    output_tokens=10,
)
"""At the dearer price: 100 x 6 + 10 x 30 = 900 µ$."""


def threadbot_usage(
    folder: Path, settings: Settings, *args: str, code: int = 0
) -> subprocess.CompletedProcess[str]:
    """``threadbot usage ARGS`` on ``settings``' database, run as a command in ``folder``;
    it must exit with ``code``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "THREADBOT_"))}
    env |= {"PYTHONPATH": str(ROOT), "THREADBOT_DATABASE_URL": settings.database_url}
    done = forkserver.run(
        [sys.executable, "-m", "bot", "usage", *args],
        capture_output=True,
        text=True,
        cwd=folder,
        env=env,
        timeout=60,
    )
    assert done.returncode == code, done.stderr
    return done


def usage(folder: Path, settings: Settings, *args: str) -> dict[str, Any]:
    """``threadbot usage --json ARGS``, parsed."""
    report: dict[str, Any] = json.loads(threadbot_usage(folder, settings, "--json", *args).stdout)
    return report


def footer_of(chat: Chat, answer: str) -> str:
    """The footer line (``— ...``) of the bot's answer starting with ``answer``."""
    lines = chat.out.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if f"threadbot: {answer}" in line)
    return next(line.strip() for line in lines[start:] if line.strip().startswith("— "))


def without_key(line: dict[str, Any]) -> dict[str, Any]:
    """The line's figures: without its key, and without the feedback a line by
    conversation carries (``tests/test_feedback.py`` reads it)."""
    return {k: v for k, v in line.items() if k not in ("key", "feedback")}


async def test_usage_adds_up_the_calls_at_the_price_they_were_made_at(
    sqlite_settings: Settings, tmp_path: Path
) -> None:
    sqlite_settings.prices = {"claude-test": PRICE}
    async with FakeAnthropicServer(SCRIPT) as server:
        async with running(sqlite_settings, server) as app:
            chat = Chat(app)
            await chat.mention("write a.md")
            await chat.react(chat.bot_message("📋 Plan (v1)"))
            await app.hub.settled()
            assert (await chat.snapshot()).status.lifecycle is Lifecycle.DONE
            footer = footer_of(chat, "✅ Written.")

    # 13,875 input tokens (7,734 from the cache: 55%) and 181 output; $0.026984.
    assert footer.startswith("— 1 tool call · ")
    assert footer.endswith(" · 14.1k tokens (55% from cache) · $0.03 · workflow default")

    by_model = usage(tmp_path, sqlite_settings, "--by", "model")
    assert by_model["by"] == "model"
    assert [line["key"] for line in by_model["lines"]] == ["claude-test"]
    assert without_key(by_model["total"]) == FIRST_RUN
    (conversation,) = usage(tmp_path, sqlite_settings)["lines"]
    assert without_key(conversation) == FIRST_RUN
    assert conversation["feedback"] == {"positive": 0, "negative": 0}  # nobody pressed
    assert "feedback" not in by_model["total"]
    (channel,) = usage(tmp_path, sqlite_settings, "--by", "channel")["lines"]
    assert channel["key"] == "console::console"  # platform:workspace:channel
    today = datetime.now(UTC).date()
    (day,) = usage(tmp_path, sqlite_settings, "--by", "day")["lines"]
    assert (day["key"], day["cost_micro_usd"]) == (today.isoformat(), 26_984)
    tomorrow = (today + timedelta(days=1)).isoformat()
    assert usage(tmp_path, sqlite_settings, "--since", tomorrow)["total"]["calls"] == 0

    sqlite_settings.prices = {"claude-test": DEARER}  # a new price, then a restart
    async with FakeAnthropicServer([AFTER_THE_CHANGE]) as server:
        async with running(sqlite_settings, server) as app:
            chat = Chat(app)
            await chat.mention("anything to do?")
            await app.hub.settled()
            assert footer_of(chat, "✅ Nothing to do.").endswith(" · $0.0009 · workflow default")

    lines = {line["key"]: line for line in usage(tmp_path, sqlite_settings)["lines"]}
    assert without_key(lines.pop(conversation["key"])) == FIRST_RUN  # kept its cost
    (later,) = lines.values()
    assert (later["calls"], later["cost_micro_usd"], later["cost_usd"]) == (1, 900, "0.000900")
    assert usage(tmp_path, sqlite_settings, "--by", "model")["total"]["cost_micro_usd"] == 27_884
    database = sqlite_settings.database_url.removeprefix("sqlite+aiosqlite:///")
    with sqlite3.connect(database) as db:
        entries = db.execute(
            "select model, input, output, cache_read, cache_write from prices order by id"
        ).fetchall()
        priced = db.execute("select price_id from model_calls order by id").fetchall()
        calls = db.execute(
            "select m.run_id, m.position, m.latency_ms, m.model, j.kind from model_calls m "
            "join journal j on j.conversation_id = m.conversation_id and j.seq = m.seq "
            "order by m.id"
        ).fetchall()
    assert entries == [
        ("claude-test", 3_000_000, 15_000_000, 300_000, 3_750_000),
        ("claude-test", 6_000_000, 30_000_000, 600_000, 7_500_000),
    ]
    assert priced == [(1,), (1,), (1,), (2,)]
    # Each call names its run (the plan's, the approval's, the second mention's), the
    # position it was made in, its latency, and the assistant turn it answered with.
    assert [(position, model, kind) for _, position, _, model, kind in calls] == [
        ("planning", "claude-test", "assistant_turn"),
        ("executing", "claude-test", "assistant_turn"),
        ("executing", "claude-test", "assistant_turn"),
        ("planning", "claude-test", "assistant_turn"),
    ]
    runs = [run for run, *_ in calls]
    assert runs[1] == runs[2] and len({runs[0], runs[1], runs[3]}) == 3
    assert all(isinstance(latency, int) and latency >= 0 for _, _, latency, _, _ in calls)


async def test_calls_of_a_model_with_no_price_are_counted_and_said_unpriced(
    sqlite_settings: Settings, tmp_path: Path
) -> None:
    async with FakeAnthropicServer([AFTER_THE_CHANGE]) as server:
        async with running(sqlite_settings, server) as app:
            chat = Chat(app)
            await chat.mention("anything to do?")
            await app.hub.settled()
            footer = footer_of(chat, "✅ Nothing to do.")
    assert footer.endswith(" · 110 tokens · workflow default")  # no cost without a price

    table = threadbot_usage(tmp_path, sqlite_settings, "--by", "model")
    assert table.stdout.splitlines() == [
        "model        calls  input  output  cache read  cache write  tokens    cost $",
        "claude-test      1    100      10           0            0     110  no price",
        "total            1    100      10           0            0     110  no price",
        "(1 calls of models with no price: their cost is not counted)",
    ]


async def test_the_status_line_shows_the_running_tokens_and_cost(
    sqlite_settings: Settings,
) -> None:
    sqlite_settings.prices = {"claude-test": PRICE}
    sqlite_settings.progress_mode = "status"
    async with FakeAnthropicServer(SCRIPT) as server:
        async with running(sqlite_settings, server) as app:
            chat = Chat(app)
            await chat.mention("write a.md")
            await chat.react(chat.bot_message("📋 Plan (v1)"))
            await app.hub.settled()
            shown = chat.out.getvalue()

    # The status reply after write_file: the first two calls, 9,223 tokens, 23,650 µ$.
    status = shown[shown.index("threadbot: ⏳ wrote a.md") :].splitlines()[1].strip()
    assert status.startswith("— 1 tool call · ")
    assert status.endswith(" · 9.2k tokens (36% from cache) · $0.02")


def test_since_takes_a_day_or_a_time_in_utc() -> None:
    assert since_argument("2026-12-01") == datetime(2026, 12, 1, tzinfo=UTC)
    assert since_argument("2026-12-01T18:44") == datetime(2026, 12, 1, 18, 44, tzinfo=UTC)
    moment = since_argument("2026-12-01T18:44:00+05:00")
    assert (moment, moment.utcoffset()) == (datetime(2026, 12, 1, 13, 44, tzinfo=UTC), ZERO)


@pytest.mark.parametrize("text", ["0001-01-01T00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_since_past_the_range_of_dates_is_a_usage_error(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="out of the range of dates"):
        since_argument(text)


def test_usage_only_reads_a_database_at_the_newest_schema(tmp_path: Path) -> None:
    missing = Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'typo' / 'x.db'}")
    said = threadbot_usage(tmp_path, missing, code=2).stderr
    assert "x.db: no database there yet; `threadbot db upgrade`" in said
    assert not (tmp_path / "typo").exists()  # nothing made

    old = tmp_path / "old.db"
    upgrade(old, "0007")
    outdated = Settings(database_url=f"sqlite+aiosqlite:///{old}")
    said = threadbot_usage(tmp_path, outdated, code=2).stderr
    assert "is at revision 0007" in said and "threadbot db upgrade" in said
    with sqlite3.connect(old) as db:
        assert db.execute("select version_num from alembic_version").fetchall() == [("0007",)]
