"""``threadbot usage``: tokens and cost of the model calls in the store, grouped.

Reads the ``model_calls`` rows (one per model call, costed when it was made with
the price entry then in force, so a later price change leaves them as they were)
through :class:`conversations.store.usage.Usage`. Prints a table, or with
``--json`` one object: ``{"by": ..., "since": ISO time or null, "lines": [...],
"total": {...}}``, each line with ``key``, ``calls``, the four token counts as
the API reported them (``input_tokens``, ``output_tokens``, ``cache_read_tokens``,
``cache_write_tokens``), ``tokens``, ``cost_micro_usd`` (an integer), ``cost_usd``
(its exact decimal text; both null when no call of the line had a price) and
``unpriced_calls`` (calls of a model with no price: no cost counted). By
conversation, each line and the total also carry ``feedback``: ``{"positive": N,
"negative": N}``, the people whose latest feedback on its answers is 👍 or 👎 (each
person's latest, whatever ``--since``; a conversation with feedback and no model
call in the report gets a line of zero calls), and the table a ``👍/👎`` column
(docs/architecture.md, "What a person sees"). The inspector's usage page serves
the same object (:func:`read_report`, :func:`as_object`). It reads
only: a database that is missing or not at the newest schema is an error (exit 2)
that says what to do, as ``threadbot doctor`` does.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Any

from bot.doctor import database_checks
from bot.settings import Settings
from conversations.render import render_event
from conversations.store.backends import is_memory
from conversations.store.feedback import FeedbackCounts
from conversations.store.interfaces import Store
from conversations.store.sql import SqlStore, create_engine
from conversations.store.usage import Grouping, UsageLine


def since_argument(text: str) -> datetime:
    """``--since``: a day (``2026-12-01``: from 00:00 UTC) or an ISO time (UTC if no
    zone is given; one with an offset is turned into UTC).

    Raises ``argparse.ArgumentTypeError`` for anything else.
    """
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return datetime(day.year, day.month, day.day, tzinfo=UTC)
        moment = datetime.fromisoformat(text)
        return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a date (2026-12-01) or an ISO time (2026-12-01T09:30)"
        ) from None
    except OverflowError:  # 0001-01-01T00:00+01:00 is before the first day in UTC
        raise argparse.ArgumentTypeError(f"{text!r} is out of the range of dates") from None


def exact_dollars(micro: int) -> str:
    """Micro-dollars as exact dollars: 2_599 -> ``0.002599``."""
    return f"{micro // 1_000_000}.{micro % 1_000_000:06d}"


def total(lines: list[UsageLine]) -> UsageLine:
    """The sum of ``lines``, keyed ``total``."""
    sums = [sum(getattr(line, f.name) for line in lines) for f in dataclasses.fields(UsageLine)[1:]]
    return UsageLine("total", *sums)


def with_feedback(
    lines: list[UsageLine], feedback: Mapping[str, FeedbackCounts]
) -> list[UsageLine]:
    """``lines`` (by conversation) and a line of zero calls for each conversation with
    feedback and none, sorted by key as the report's lines are."""
    keys = {line.key for line in lines}
    added = [UsageLine(key, 0, 0, 0, 0, 0, 0, 0) for key in feedback if key not in keys]
    return sorted([*lines, *added], key=lambda line: line.key)


def feedback_total(feedback: Mapping[str, FeedbackCounts]) -> FeedbackCounts:
    """The counts of every conversation added up."""
    return FeedbackCounts(
        sum(c.positive for c in feedback.values()), sum(c.negative for c in feedback.values())
    )


@dataclasses.dataclass(frozen=True)
class UsageReport:
    """A usage report as read from the store: what its lines are per, the earliest
    call time it counts (``None``: all), its lines sorted by key, and by conversation
    each conversation's feedback (``None`` for the other groupings)."""

    by: Grouping
    since: datetime | None
    lines: list[UsageLine]
    feedback: Mapping[str, FeedbackCounts] | None = None


async def read_report(store: Store, by: Grouping, since: datetime | None) -> UsageReport:
    """The report of ``store``'s model calls at ``since`` or later, per ``by``: the one
    reading of the figures that ``threadbot usage`` and the inspector's usage page
    show (docs/architecture.md, "Usage charts")."""
    lines = await store.usage.report(by, since)
    if by != "conversation":
        return UsageReport(by, since, lines)
    feedback = await store.feedback.counts()
    return UsageReport(by, since, with_feedback(lines, feedback), feedback)


def as_object(report: UsageReport) -> dict[str, Any]:
    """The report as the JSON object of ``threadbot usage --json`` and the inspector's
    ``usage.json`` (see the module docstring); by conversation, each line and the total
    carry their ``feedback``."""
    feedback = report.feedback

    def shown(line: UsageLine, counts: FeedbackCounts | None = None) -> dict[str, Any]:
        priced = line.calls - line.unpriced
        said = {} if feedback is None else {"feedback": _counts(counts or feedback.get(line.key))}
        return {
            "key": line.key,
            "calls": line.calls,
            "input_tokens": line.input_tokens,
            "output_tokens": line.output_tokens,
            "cache_read_tokens": line.cache_read_tokens,
            "cache_write_tokens": line.cache_write_tokens,
            "tokens": line.tokens,
            "cost_micro_usd": None if priced == 0 else line.cost_micro_usd,
            "cost_usd": None if priced == 0 else exact_dollars(line.cost_micro_usd),
            "unpriced_calls": line.unpriced,
        } | said

    return {
        "by": report.by,
        "since": report.since.isoformat() if report.since else None,
        "lines": [shown(line) for line in report.lines],
        "total": shown(total(report.lines), feedback_total(feedback or {})),
    }


def _counts(counts: FeedbackCounts | None) -> dict[str, int]:
    counts = counts or FeedbackCounts()
    return {"positive": counts.positive, "negative": counts.negative}


def as_table(
    by: Grouping, lines: list[UsageLine], feedback: Mapping[str, FeedbackCounts] | None = None
) -> str:
    """The report as an aligned table with a total line; a note for unpriced calls;
    with ``feedback``, a last column ``👍/👎`` (``2/1``)."""
    head: tuple[str, ...] = (
        by,
        "calls",
        "input",
        "output",
        "cache read",
        "cache write",
        "tokens",
        "cost $",
    )
    rows: list[tuple[str, ...]] = [
        (
            line.key,
            *(
                f"{n:,}"
                for n in (
                    line.calls,
                    line.input_tokens,
                    line.output_tokens,
                    line.cache_read_tokens,
                    line.cache_write_tokens,
                    line.tokens,
                )
            ),
            _cost_shown(line),
        )
        for line in [*lines, total(lines)]
    ]
    if feedback is not None:
        counts = [*(feedback.get(line.key, FeedbackCounts()) for line in lines)]
        counts.append(feedback_total(feedback))
        head += ("👍/👎",)
        rows = [(*row, f"{c.positive}/{c.negative}") for row, c in zip(rows, counts, strict=True)]
    widths = [max(len(row[i]) for row in (head, *rows)) for i in range(len(head))]
    text = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in (head, *rows)
    ]
    unpriced = total(lines).unpriced
    if unpriced:
        text.append(f"({unpriced} calls of models with no price: their cost is not counted)")
    return "\n".join(text)


def _cost_shown(line: UsageLine) -> str:
    """The line's cost in dollars, or ``no price`` when none of its calls had one (as
    ``--json``'s null), never a cost of $0 that was not counted."""
    if line.calls and line.unpriced == line.calls:
        return "no price"
    return exact_dollars(line.cost_micro_usd)


async def usage(settings: Settings, by: Grouping, since: datetime | None, json_out: bool) -> int:
    """Print the usage report of the store at ``settings.database_url``; the exit code
    (2 for ``memory://``, which keeps nothing)."""
    if is_memory(settings.database_url):
        print("threadbot: memory:// keeps no usage (it keeps nothing)", file=sys.stderr)
        return 2
    (check,) = await database_checks(settings.database_url)  # read only, as the doctor's
    if check.mark != "ok":
        print(f"threadbot: {check.said}", file=sys.stderr)
        return 2
    store = SqlStore(engine=create_engine(settings.database_url), render=render_event)
    try:
        report = await read_report(store, by, since)
    finally:
        await store.close()
    if json_out:
        print(json.dumps(as_object(report), indent=2))
    else:
        print(as_table(by, report.lines, report.feedback))
    return 0
