"""The inspector's usage page: cost and tokens per day, channel and model, as charts.

Two routes (docs/architecture.md, "Usage charts"):

- ``GET /inspector/usage.json?by=day|channel|model|conversation|role[&since=...]``: the
  object ``threadbot usage --json --by BY [--since ...]`` prints (``by`` required;
  ``since`` a day or an ISO time, as the command's ``--since``), built by the same
  functions (:func:`bot.usage_report.read_report`, :func:`bot.usage_report.as_object`);
  a ``by`` or ``since`` it cannot read is **400** with the reason in words.
- ``GET /inspector/usage[?since=...]``: the page. Three charts, drawn in the browser
  by ``static/usage.js`` with the vendored uPlot from ``usage.json``: cost and tokens
  as bars per UTC day, per channel and per model (``id="chart-day"``,
  ``id="chart-channel"``, ``id="chart-model"``); under each, a table of the same
  figures (``<table data-usage="day">``, one ``<tr data-key=...>`` per line and a
  ``<tr data-total>``, each figure's cell carrying it as ``data-calls``,
  ``data-input-tokens``, ``data-output-tokens``, ``data-cache-read-tokens``,
  ``data-cache-write-tokens``, ``data-tokens``, ``data-cost-micro-usd`` and
  ``data-cost-usd`` (the cost's cell; empty when no call had a price),
  ``data-unpriced-calls``), so the page reads without JavaScript and a test reads its
  numbers. ``?since=`` (a form on the page) narrows all three.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, get_args

from aiohttp import web

from bot.inspector.web import INSPECTOR, PREFIX, query
from bot.usage_report import as_object, read_report, since_argument
from conversations.store.usage import Grouping

routes = web.RouteTableDef()

CHARTS: tuple[Grouping, ...] = ("day", "channel", "model")
"""The groupings the page charts, in the order shown."""
GROUPINGS: tuple[Grouping, ...] = get_args(Grouping)
"""Every ``by`` ``usage.json`` takes (the command's ``--by`` choices)."""
COUNTS = (
    "calls",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "tokens",
)
"""A report line's counts, in the order of the table's first columns (the cost and the
unpriced calls follow)."""


@routes.get(f"{PREFIX}/usage.json")
async def usage_json(request: web.Request) -> web.Response:
    """The usage report per ``by`` (see the module docstring), as JSON."""
    inspector = request.app[INSPECTOR]
    asked = query(request)
    by = asked.get("by", "")
    if by not in GROUPINGS:
        raise web.HTTPBadRequest(text=f"by: one of {', '.join(GROUPINGS)}")
    report = await read_report(inspector.store, by, _since(asked))
    return inspector.json(as_object(report))


@routes.get(f"{PREFIX}/usage")
async def usage_page(request: web.Request) -> web.Response:
    """The page of the three charts and their tables (see the module docstring)."""
    inspector = request.app[INSPECTOR]
    asked = query(request)
    try:
        since = _since(asked)
    except web.HTTPBadRequest as refused:  # the form again, saying what it cannot read
        return inspector.render(
            request,
            "usage.html",
            status=400,
            reports=[],
            since=asked.get("since", ""),
            cells=cells,
            problem=refused.text or "",
        )
    reports = [as_object(await read_report(inspector.store, by, since)) for by in CHARTS]
    return inspector.render(
        request,
        "usage.html",
        reports=reports,
        since=asked.get("since", ""),
        cells=cells,
        problem="",
    )


def _since(asked: Mapping[str, str]) -> datetime | None:
    """The ``since`` parameter as the command reads ``--since``; **400** when it is not a
    day or an ISO time."""
    text = asked.get("since")
    if text is None:
        return None
    try:
        return since_argument(text)
    except argparse.ArgumentTypeError as error:
        raise web.HTTPBadRequest(text=f"since: {error}") from None


@dataclass(frozen=True)
class Cell:
    """One figure's cell of a usage table: its ``data-`` attributes (name, the figure as
    in the JSON, empty for null) and its text as a person reads it."""

    attributes: tuple[tuple[str, str], ...]
    text: str


def cells(line: Mapping[str, Any]) -> list[Cell]:
    """The cells of a report line (or its total), after its key: calls, the four token
    counts, tokens (``1,234``), the cost (``$0.002599``, or ``no price`` when no call had
    one; carrying ``data-cost-micro-usd`` and ``data-cost-usd``) and the unpriced calls."""

    def attribute(name: str) -> tuple[str, str]:
        value = line[name]
        return "data-" + name.replace("_", "-"), "" if value is None else str(value)

    counted = [Cell((attribute(name),), f"{line[name]:,}") for name in COUNTS]
    cost = line["cost_usd"]
    shown = "no price" if cost is None else f"${cost}"
    priced = Cell((attribute("cost_micro_usd"), attribute("cost_usd")), shown)
    unpriced = Cell((attribute("unpriced_calls"),), f"{line['unpriced_calls']:,}")
    return [*counted, priced, unpriced]
