"""Totals of the current request for the answer's footer, derived from the journal.

A request runs from the person's latest ``request`` message to now, across every
wait for a person in between (UX.md: "— 9 tool calls · 2m 40s · 31.5k tokens").
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from core.journal import AssistantTurn, JournalRecord, UserText
from core.run_events import RunStats
from core.tools.control import CONTROL_TOOLS


def request_stats(journal: Sequence[JournalRecord], now: datetime) -> RunStats:
    """Tool calls (control tools not counted), seconds, tokens (every kind) and cost (the
    priced calls') since the last request.

    ``now``: the time the totals are taken at (timezone-aware UTC, from the run
    context); the seconds run from the request's journal time to it.
    """
    start = 0
    for index, record in enumerate(journal):
        if isinstance(record.entry, UserText) and record.entry.role == "request":
            start = index
    turns = [r.entry for r in journal[start:] if isinstance(r.entry, AssistantTurn)]
    usages = [t.usage for t in turns if t.usage is not None]
    costs = [u.cost_micro_usd for u in usages if u.cost_micro_usd is not None]
    began = journal[start].at if journal else None
    seconds = (now - began).total_seconds() if began else 0.0
    return RunStats(
        tool_calls=sum(1 for t in turns for c in t.tool_calls if c.name not in CONTROL_TOOLS),
        seconds=round(max(seconds, 0.0), 1),
        input_tokens=sum(
            u.input_tokens + u.cache_read_tokens + u.cache_write_tokens for u in usages
        ),
        output_tokens=sum(u.output_tokens for u in usages),
        cache_read_tokens=sum(u.cache_read_tokens for u in usages),
        cost_micro_usd=sum(costs) if costs else None,
    )
