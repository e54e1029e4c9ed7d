"""Totals of the current request for the answer's footer and the status line.

A request runs from the person's latest ``request`` message to now, across every
wait for a person in between: "— 9 tool calls · 2m 40s · 31.5k tokens", and each
model role's calls and cost when more than one role was asked
(docs/architecture.md, "What a person sees").
:class:`RequestTotals` keeps them as the journal grows, so a note after each tool
call reads only what was added since the one before, not the whole journal.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from core.tools import control
from core.vocabulary.entries import (
    AssistantTurn,
    Compacted,
    ExpertConsulted,
    JournalRecord,
    ModelUsage,
    UserText,
)
from core.vocabulary.run_events import RoleStats, RunStats


@dataclass
class RequestTotals:
    """The totals of a conversation's current request, folded entry by entry.

    :meth:`of` reads the entries of ``journal`` it has not seen (a shorter journal
    than last time is another one: it starts over). Kept per conversation for the
    length of a run, like the message history.
    """

    seen: int = 0
    began: datetime | None = None
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cost_micro_usd: int | None = None
    roles: dict[str, RoleStats] = field(default_factory=dict)
    """Each role's calls and cost so far, by role, in the order first asked."""

    def of(
        self,
        journal: Sequence[JournalRecord],
        now: datetime,
        pending: AssistantTurn | None = None,
    ) -> RunStats:
        """Tool calls (control tools not counted), seconds, tokens (every kind) and cost
        (the priced calls') since the last request, with ``pending`` (a turn not yet
        committed) counted too.

        ``now``: the time the totals are taken at (timezone-aware UTC, from the run
        context); the seconds run from the request's journal time to it.
        """
        if len(journal) < self.seen:  # another journal: start over
            self.seen = 0
            self._restart(None)
        for record in journal[self.seen :]:
            self._add(record)
        self.seen = len(journal)
        totals = self
        if pending is not None:
            totals = copy.copy(self)
            totals.roles = dict(self.roles)
            totals._add_turn(pending)
        seconds = (now - totals.began).total_seconds() if totals.began else 0.0
        return RunStats(
            tool_calls=totals.tool_calls,
            seconds=round(max(seconds, 0.0), 1),
            input_tokens=totals.input_tokens,
            output_tokens=totals.output_tokens,
            cache_read_tokens=totals.cache_read_tokens,
            cost_micro_usd=totals.cost_micro_usd,
            roles=tuple(totals.roles.values()),
        )

    def _add(self, record: JournalRecord) -> None:
        entry = record.entry
        if isinstance(entry, UserText) and entry.role == "request":
            self._restart(record.at)
        elif self.began is None:
            self.began = record.at  # no request yet: from the first entry
        if isinstance(entry, AssistantTurn):
            self._add_turn(entry)
        elif isinstance(entry, Compacted | ExpertConsulted) and entry.usage is not None:
            self._add_usage(entry.usage)  # a summary's or the expert's call: no tool calls

    def _restart(self, began: datetime | None) -> None:
        self.began = began
        self.tool_calls = self.input_tokens = self.output_tokens = self.cache_read_tokens = 0
        self.cost_micro_usd = None
        self.roles = {}

    def _add_turn(self, turn: AssistantTurn) -> None:
        self.tool_calls += sum(1 for c in turn.tool_calls if not control.is_control(c.name))
        if turn.usage is not None:
            self._add_usage(turn.usage)

    def _add_usage(self, usage: ModelUsage) -> None:
        self.input_tokens += usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        self.output_tokens += usage.output_tokens
        self.cache_read_tokens += usage.cache_read_tokens
        if usage.cost_micro_usd is not None:
            self.cost_micro_usd = (self.cost_micro_usd or 0) + usage.cost_micro_usd
        if usage.role is not None:
            had = self.roles.get(usage.role) or RoleStats(role=usage.role)
            cost = had.cost_micro_usd
            if usage.cost_micro_usd is not None:
                cost = (cost or 0) + usage.cost_micro_usd
            models = had.models if usage.model in had.models else (*had.models, usage.model)
            self.roles[usage.role] = RoleStats(
                role=usage.role, models=models, calls=had.calls + 1, cost_micro_usd=cost
            )


def request_stats(journal: Sequence[JournalRecord], now: datetime) -> RunStats:
    """The totals of the current request of ``journal``, read whole (see :class:`RequestTotals`)."""
    return RequestTotals().of(journal, now)


def duration_said(seconds: float) -> str:
    """``45s``, ``2m 40s``: a duration as the footer and the notes show it (whole seconds)."""
    whole = round(seconds)
    return f"{whole // 60}m {whole % 60}s" if whole >= 60 else f"{whole}s"
