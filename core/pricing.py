"""What a model call costs, and the budgets that pause a run when it has spent enough.

Money is counted in integer micro-dollars (µ$, millionths of a US dollar), never
in floats. A price is given in dollars per million tokens, as Anthropic publishes
them (https://platform.claude.com/docs/en/about-claude/pricing), for each of the
four kinds of token the Messages API reports in ``usage``: ``input_tokens``,
``output_tokens``, ``cache_read_input_tokens`` and ``cache_creation_input_tokens``
(https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching). One dollar
per million tokens is one micro-dollar per token, so a price is kept as µ$ per
million tokens and a call's cost is ``Σ tokens × price / 10⁶``, rounded half-up
once per call (:func:`call_cost`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

from core.vocabulary.entries import DecisionEntry, JournalRecord, PricedEntry
from core.vocabulary.requests import ContinueRequest
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.verdicts import Approved

MICRO = 1_000_000
"""Micro-dollars per dollar, and tokens per million."""


@dataclass(frozen=True)
class Rates:
    """What one model charges, in µ$ per million tokens of each kind (``$3/MTok`` is
    3,000,000)."""

    input: int
    output: int
    cache_read: int
    cache_write: int


@dataclass(frozen=True)
class Price:
    """A dated price entry of one model.

    ``id``: the entry's number in the store (a call names the entry it was costed
    with, so a later price leaves its cost as it was); ``since``: when the entry was
    recorded (UTC).
    """

    id: int
    model: str
    rates: Rates
    since: datetime


def price_for(prices: Mapping[str, Price], model: str) -> Price | None:
    """The price entry of ``model``: its own, else that of the model it is a dated
    snapshot of (``claude-sonnet-4-5-20250929`` of ``claude-sonnet-4-5``: the API names
    the snapshot that answered, a price sheet names the alias,
    https://docs.anthropic.com/en/docs/about-claude/models/overview). Nothing else is
    matched (``claude-opus-4-5`` is not ``claude-opus-4``). None when not priced.
    """
    if model in prices:
        return prices[model]
    alias, dash, date = model.rpartition("-")
    if dash and len(date) == 8 and date.isdigit():
        return prices.get(alias)
    return None


def call_cost(rates: Rates, *, input: int, output: int, cache_read: int, cache_write: int) -> int:
    """The cost of one call in µ$: every kind's tokens at its rate, rounded half-up once.

    >>> rates = Rates(input=3_000_000, output=15_000_000, cache_read=300_000, cache_write=0)
    >>> call_cost(rates, input=1, output=0, cache_read=0, cache_write=0)  # 3 µ$
    3
    >>> call_cost(rates, input=0, output=0, cache_read=5, cache_write=0)  # 1.5 µ$ -> 2
    2
    """
    exact = (
        input * rates.input
        + output * rates.output
        + cache_read * rates.cache_read
        + cache_write * rates.cache_write
    )
    return (exact + MICRO // 2) // MICRO


def dollars(micro: int) -> str:
    """``$0.07`` for 70,000 µ$; two decimals from a cent up, four below (``$0.0031``),
    ``<$0.0001`` for less but not nothing."""
    if 0 < micro < 50:
        return "<$0.0001"
    if micro >= 10_000 or micro == 0:
        return f"${(micro + 5_000) // 10_000 / 100:.2f}"
    return f"${(micro + 50) // 100 / 10_000:.4f}"


# --- budgets -----------------------------------------------------------------------

BudgetScope = Literal["conversation", "channel_day"]
"""What a budget counts: the whole conversation, or its channel's calls this UTC day."""


@dataclass(frozen=True)
class Limit:
    """One budget: at most ``tokens`` (every kind counted) or ``micro_usd``, or both."""

    tokens: int | None = None
    micro_usd: int | None = None

    def __bool__(self) -> bool:
        return self.tokens is not None or self.micro_usd is not None


@dataclass(frozen=True)
class Budgets:
    """A conversation's budgets (settings layers); an empty :class:`Limit` is no budget."""

    conversation: Limit = field(default_factory=Limit)
    channel_day: Limit = field(default_factory=Limit)


@dataclass(frozen=True)
class Spend:
    """Tokens (every kind) and µ$ spent; calls with no price count no money."""

    tokens: int = 0
    micro_usd: int = 0

    def __add__(self, other: Spend) -> Spend:
        return Spend(self.tokens + other.tokens, self.micro_usd + other.micro_usd)


NO_SPEND = Spend()


def turn_spend(turn: PricedEntry) -> Spend:
    """What one model call (a turn, a compaction's summary, an expert's consultation)
    spent (nothing when it has no usage)."""
    usage = turn.usage
    if usage is None:
        return NO_SPEND
    return Spend(usage.total_tokens, usage.cost_micro_usd or 0)


def journal_spend(journal: Sequence[JournalRecord], since: datetime | None = None) -> Spend:
    """What the model calls of ``journal`` spent (only those recorded at ``since`` or later)."""
    spent = NO_SPEND
    for record in journal:
        if isinstance(record.entry, PricedEntry) and (since is None or record.at >= since):
            spent += turn_spend(record.entry)
    return spent


@dataclass(frozen=True)
class Reached:
    """A budget that is used up: its scope, what was spent, and the limit now in force
    (the budget times one plus the raises granted)."""

    scope: BudgetScope
    spent: Spend
    limit: Limit
    budget: Limit


def raises(snap: ConversationSnapshot, scope: BudgetScope, since: datetime | None = None) -> int:
    """How many times a person raised ``scope``'s budget in this conversation (approved
    budget requests; for ``channel_day`` only those decided at ``since`` or later)."""
    budget_requests = {
        r.id for r in snap.requests if isinstance(r, ContinueRequest) and r.budget == scope
    }
    return sum(
        1
        for record in snap.journal
        if isinstance(record.entry, DecisionEntry)
        and record.entry.request_id in budget_requests
        and isinstance(record.entry.verdict, Approved)
        and (since is None or record.at >= since)
    )


def reached(scope: BudgetScope, budget: Limit, spent: Spend, granted: int) -> Reached | None:
    """``scope``'s budget, used up by ``spent`` after ``granted`` raises, or None."""
    if not budget:
        return None
    times = 1 + granted
    limit = Limit(
        tokens=None if budget.tokens is None else budget.tokens * times,
        micro_usd=None if budget.micro_usd is None else budget.micro_usd * times,
    )
    over_tokens = limit.tokens is not None and spent.tokens >= limit.tokens
    over_money = limit.micro_usd is not None and spent.micro_usd >= limit.micro_usd
    if over_tokens or over_money:
        return Reached(scope=scope, spent=spent, limit=limit, budget=budget)
    return None


class Tokens(Protocol):
    """The token counts of one call (a model's ``Usage``, a journaled ``ModelUsage``)."""

    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def cache_read_tokens(self) -> int: ...
    @property
    def cache_write_tokens(self) -> int: ...


def priced(prices: Mapping[str, Price], model: str, tokens: Tokens) -> tuple[Price, int] | None:
    """The price entry of ``model`` (:func:`price_for`) and the cost in µ$ of a call of it
    with ``tokens`` (:func:`call_cost`); None when the model has no price."""
    price = price_for(prices, model)
    if price is None:
        return None
    cost = call_cost(
        price.rates,
        input=tokens.input_tokens,
        output=tokens.output_tokens,
        cache_read=tokens.cache_read_tokens,
        cache_write=tokens.cache_write_tokens,
    )
    return price, cost
