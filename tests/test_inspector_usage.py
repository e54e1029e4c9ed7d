"""The run inspector's usage page (issue 34): ``usage.json`` and the page's tables hold,
figure for figure, what ``threadbot usage --json`` prints, and uPlot is vendored once.

The store holds model calls on two days, in two channels, of two models, one of them
without a price, written as the journal writes them (a ``model_calls`` row per call,
costed at call time; the rows' times are set so the calls fall on two days). The
command runs in its own process (``tests/test_usage_report.py``); the inspector is
served in-process (``tests/inspector_harness.py``) and read as a signed-in operator.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import sqlite3
from collections.abc import AsyncIterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from bot.inspector.web import STATIC
from bot.settings import Settings
from conversations.render import render_event
from conversations.store.sql import SqlStore, create_engine
from tests.inspector_harness import Client, inspector_served, with_operator
from tests.migration_crashes import upgrade
from tests.test_usage_report import usage

VENDOR = STATIC / "vendor" / "uplot"

CALLS = [
    # conversation, model, day, input, output, cache read, cache write, cost in µ$
    ("c1", "claude-test", "2026-12-01", 1_200, 80, 0, 3_000, 16_050),
    ("c1", "claude-test", "2026-12-02", 150, 60, 3_333, 1_400, 7_600),
    ("c2", "claude-test", "2026-12-02", 90, 41, 4_401, 301, 3_334),
    ("c2", "claude-free", "2026-12-02", 100, 10, 0, 0, None),  # no price: no cost
]
"""The model calls in the store; the costs are ``tests/test_usage_report.py``'s, worked
out from the price of ``claude-test`` ($3, $15, $0.30, $3.75 per million tokens)."""
CHANNELS = {"c1": ("slack", "T1", "C1"), "c2": ("discord", "G1", "D1")}


def fill(db: Path) -> None:
    """Upgrade ``db`` to the newest schema and write :data:`CALLS` into it."""
    upgrade(db)
    at = "{} 10:00:00.000000"
    with sqlite3.connect(db) as conn:
        for conversation, (platform, workspace, channel) in CHANNELS.items():
            conn.execute(
                "insert into conversations (id, platform, workspace, channel, thread, "
                "requester_id, requester_name, lifecycle, position, plan_version, "
                "workspace_dir, created_at, updated_at) "
                "values (?, ?, ?, ?, '1.0', 'U1', 'U1', 'done', 'answered', 1, 'w', ?, ?)",
                (conversation, platform, workspace, channel, at.format("2026-12-01"), at),
            )
        conn.execute(
            "insert into prices (model, input, output, cache_read, cache_write, since) "
            "values ('claude-test', 3000000, 15000000, 300000, 3750000, ?)",
            (at.format("2026-11-30"),),
        )
        for conversation, model, day, inp, out, read, write, cost in CALLS:
            conn.execute(
                "insert into model_calls (conversation_id, model, input_tokens, "
                "output_tokens, cache_read_tokens, cache_write_tokens, price_id, "
                "cost_micro_usd, created_at, role) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    conversation,
                    model,
                    inp,
                    out,
                    read,
                    write,
                    None if cost is None else 1,
                    cost,
                    at.format(day),
                    "executor",
                ),
            )


@pytest.fixture
async def served(sqlite_settings: Settings) -> AsyncIterator[Client]:
    """A signed-in client of the inspector over the store of :data:`CALLS`."""
    database = Path(sqlite_settings.database_url.removeprefix("sqlite+aiosqlite:///"))
    await asyncio.to_thread(fill, database)
    store = SqlStore(engine=create_engine(sqlite_settings.database_url), render=render_event)
    try:
        async with inspector_served(store, with_operator(sqlite_settings)) as inspector:
            yield await inspector.client()
    finally:
        await store.close()


async def usage_json(client: Client, query: str) -> dict[str, Any]:
    """``GET /inspector/usage.json?QUERY``, parsed."""
    page = await client.get(f"/inspector/usage.json?{query}")
    assert page.status == 200, page.text
    assert page.headers["Content-Type"].startswith("application/json")
    report: dict[str, Any] = json.loads(page.text)
    return report


class UsageTables(HTMLParser):
    """The usage tables of a page, as the JSON's lines: ``{by: {"lines": [...],
    "total": {...}}}``, each line its ``key`` and the figures its cells carry."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, dict[str, Any]] = {}
        self._by: str | None = None
        self._row: dict[str, Any] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "table" and "data-usage" in found:
            self._by = found["data-usage"] or ""
            self.tables[self._by] = {"lines": [], "total": None}
        elif tag == "tr" and self._by is not None:
            if "data-key" in found:
                self._row = {"key": found["data-key"]}
                self.tables[self._by]["lines"].append(self._row)
            elif "data-total" in found:
                self._row = {"key": "total"}
                self.tables[self._by]["total"] = self._row
        elif tag in ("td", "th") and self._row is not None:
            for name, value in found.items():
                if name.startswith("data-"):
                    figure = name.removeprefix("data-").replace("-", "_")
                    self._row[figure] = figure_of(figure, value or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr":
            self._row = None
        elif tag == "table":
            self._by = None


def figure_of(name: str, value: str) -> Any:
    """A cell's ``data-`` value as the JSON has it: null when empty, the exact dollars as
    text, the rest integers."""
    if value == "":
        return None
    return value if name == "cost_usd" else int(value)


@pytest.mark.parametrize("by", ["day", "channel", "model"])
async def test_usage_json_is_what_threadbot_usage_json_prints(
    served: Client, sqlite_settings: Settings, tmp_path: Path, by: str
) -> None:
    printed = usage(tmp_path, sqlite_settings, "--by", by)
    assert await usage_json(served, f"by={by}") == printed
    since = usage(tmp_path, sqlite_settings, "--by", by, "--since", "2026-12-02")
    assert await usage_json(served, f"by={by}&since=2026-12-02") == since
    assert since["total"]["calls"] == 3 and since != printed


async def test_the_figures_are_the_calls_added_up(served: Client) -> None:
    by_day = await usage_json(served, "by=day")
    assert [(line["key"], line["calls"], line["cost_micro_usd"]) for line in by_day["lines"]] == [
        ("2026-12-01", 1, 16_050),
        ("2026-12-02", 3, 10_934),
    ]
    by_model = {line["key"]: line for line in (await usage_json(served, "by=model"))["lines"]}
    free = by_model["claude-free"]
    assert (free["tokens"], free["cost_micro_usd"], free["cost_usd"]) == (110, None, None)
    assert free["unpriced_calls"] == 1
    by_channel = await usage_json(served, "by=channel")
    assert [line["key"] for line in by_channel["lines"]] == ["discord:G1:D1", "slack:T1:C1"]
    total = by_channel["total"]
    assert (total["calls"], total["cost_micro_usd"], total["cost_usd"]) == (4, 26_984, "0.026984")
    assert total["unpriced_calls"] == 1


async def test_the_page_s_tables_hold_the_same_figures(
    served: Client, sqlite_settings: Settings, tmp_path: Path
) -> None:
    page = await served.get("/inspector/usage")
    assert page.status == 200, page.text
    tables = UsageTables()
    tables.feed(page.text)
    assert list(tables.tables) == ["day", "channel", "model"]
    for by, shown in tables.tables.items():
        printed = usage(tmp_path, sqlite_settings, "--by", by)
        assert shown["lines"] == printed["lines"]
        assert shown["total"] == {**printed["total"], "key": "total"}
        assert f'id="chart-{by}"' in page.text
    assert "no price" in page.text  # claude-free's cost, never $0
    assert "$0.026984" in page.text

    narrowed = UsageTables()
    narrowed.feed((await served.get("/inspector/usage?since=2026-12-02")).text)
    printed = usage(tmp_path, sqlite_settings, "--by", "model", "--since", "2026-12-02")
    assert narrowed.tables["model"]["lines"] == printed["lines"]


async def test_a_grouping_or_time_it_cannot_read_is_a_bad_request(served: Client) -> None:
    for query in ("", "by=week", "by=day&since=yesterday"):
        page = await served.get(f"/inspector/usage.json?{query}")
        assert page.status == 400, (query, page.text)
    assert (
        "by: one of conversation, channel, day, model, role"
        in (await served.get("/inspector/usage.json?by=week")).text
    )
    page = await served.get("/inspector/usage?since=yesterday")
    assert (page.status, "is not a date" in page.text) == (400, True)
    # the page itself says so above its form, as the list does, the value kept to mend
    assert '<p class="refused" id="problem">since: &#39;yesterday&#39; is not a date' in page.text
    assert 'name="since" value="yesterday"' in page.text


async def test_the_page_loads_the_vendored_chart_library_from_the_bot(served: Client) -> None:
    page = await served.get("/inspector/usage")
    scripts = re.findall(r'<(?:script src|link rel="stylesheet" href)="([^"]+)"', page.text)
    assert "/inspector/static/vendor/uplot/uPlot.iife.min.js" in scripts
    assert "/inspector/static/vendor/uplot/uPlot.min.css" in scripts
    assert "/inspector/static/usage.js" in scripts
    assert all(src.startswith("/inspector/static/") for src in scripts)  # no CDN
    for name in ("uPlot.iife.min.js", "uPlot.min.css"):
        served_file = await served.get(f"/inspector/static/vendor/uplot/{name}")
        assert served_file.status == 200
        assert served_file.text == (VENDOR / name).read_text(encoding="utf-8")


def test_uplot_is_vendored_with_its_licence_and_the_sums_its_readme_gives() -> None:
    readme = (VENDOR / "README.md").read_text(encoding="utf-8")
    sums = dict(re.findall(r"\| `([^`]+)` \| `[^`]+` \| `([0-9a-f]{64})` \|", readme))
    assert set(sums) == {"uPlot.iife.min.js", "uPlot.min.css", "LICENSE"}
    for name, expected in sums.items():
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == expected, name
    assert sorted(p.name for p in VENDOR.iterdir()) == sorted([*sums, "README.md"])
    licence = (VENDOR / "LICENSE").read_text(encoding="utf-8")
    assert "The MIT License (MIT)" in licence and "Leon Sorokin" in licence
    version = "1.6.32"
    assert (
        (VENDOR / "uPlot.iife.min.js")
        .read_text(encoding="utf-8")
        .startswith(f"/*! https://github.com/leeoniya/uPlot (v{version}) */")
    )
    assert f"# uPlot {version}" in readme and f"uplot@{version}" in readme
