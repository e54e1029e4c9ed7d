"""Costs in integer micro-dollars, the price a call is costed with, and budget arithmetic."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from bot.settings import ModelPrice
from conversations.totals import format_stats
from core.pricing import Limit, Price, Rates, Spend, call_cost, dollars, price_for, reached
from core.vocabulary.run_events import RunStats

SONNET = Rates(input=3_000_000, output=15_000_000, cache_read=300_000, cache_write=3_750_000)
AT = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("tokens", "micro"),
    [
        ((1, 0, 0, 0), 3),
        ((0, 0, 5, 0), 2),  # 1.5 µ$: half rounds up
        ((0, 0, 4, 0), 1),  # 1.2 µ$
        ((0, 0, 1, 0), 0),  # 0.3 µ$
        ((0, 0, 0, 2), 8),  # 7.5 µ$
        ((1_000_000, 1_000_000, 1_000_000, 1_000_000), 22_050_000),
        ((0, 0, 3, 1), 5),  # 0.9 + 3.75 = 4.65 -> 5: rounded once per call, not per kind
    ],
)
def test_a_call_costs_its_tokens_at_their_rates_rounded_half_up_once(
    tokens: tuple[int, int, int, int], micro: int
) -> None:
    inp, out, read, write = tokens
    assert call_cost(SONNET, input=inp, output=out, cache_read=read, cache_write=write) == micro


def test_a_price_sheet_entry_is_kept_exact_in_micro_dollars_per_million() -> None:
    price = ModelPrice(input=3, output=15, cache_read=0.3, cache_write=3.75)
    assert price.rates() == SONNET
    assert ModelPrice(input=0.1, output=0.000001, cache_read=0, cache_write=1e-7).rates() == Rates(
        input=100_000, output=1, cache_read=0, cache_write=0
    )


def test_a_dated_snapshot_is_costed_with_the_price_of_its_alias_and_nothing_else() -> None:
    alias = Price(1, "claude-sonnet-4-5", SONNET, AT)
    older = Price(2, "claude-opus-4", Rates(15, 75, 1, 18), AT)
    prices = {p.model: p for p in (alias, older)}
    assert price_for(prices, "claude-sonnet-4-5") is alias
    assert price_for(prices, "claude-sonnet-4-5-20250929") is alias
    assert price_for(prices, "claude-opus-4-5") is None  # another model, not a snapshot
    assert price_for(prices, "claude-opus-4-5-20251101") is None
    assert price_for(prices, "claude-sonnet-4-5-latest") is None
    assert price_for(prices, "claude-sonnet-4-5-2025092") is None


def test_a_price_is_a_number_not_a_word_or_a_truth_value() -> None:
    for bad in (True, "5"):
        with pytest.raises(ValidationError, match="input"):
            ModelPrice.model_validate(
                {"input": bad, "output": 1, "cache_read": 1, "cache_write": 1}
            )
    assert ModelPrice.model_validate_json(
        '{"input": 5, "output": 25, "cache_read": 0.5, "cache_write": 6.25}'
    ).rates() == Rates(5_000_000, 25_000_000, 500_000, 6_250_000)


@pytest.mark.parametrize(
    ("micro", "shown"),
    [
        (0, "$0.00"),
        (70_000, "$0.07"),
        (74_999, "$0.07"),
        (75_000, "$0.08"),
        (3_100, "$0.0031"),
        (50, "$0.0001"),
        (2, "<$0.0001"),
    ],
)
def test_dollars_are_shown_to_the_cent_or_to_four_places_below_a_cent(
    micro: int, shown: str
) -> None:
    assert dollars(micro) == shown


def test_a_budget_is_reached_at_its_size_times_one_plus_the_raises() -> None:
    budget = Limit(tokens=1_000)
    assert reached("conversation", budget, Spend(999, 0), 0) is None
    first = reached("conversation", budget, Spend(1_000, 0), 0)
    assert first is not None and first.limit == Limit(tokens=1_000)
    assert reached("conversation", budget, Spend(1_999, 0), 1) is None
    second = reached("conversation", budget, Spend(2_000, 0), 1)
    assert second is not None and (second.limit, second.budget) == (Limit(tokens=2_000), budget)
    money = Limit(tokens=10**9, micro_usd=500_000)  # whichever comes first
    assert reached("channel_day", money, Spend(5, 500_000), 0) is not None
    assert reached("conversation", Limit(), Spend(10**12, 10**12), 0) is None  # no budget


def test_the_footer_says_the_cache_share_and_the_cost_only_when_priced() -> None:
    stats = RunStats(
        tool_calls=9,
        seconds=160,
        input_tokens=30_000,
        output_tokens=1_500,
        cache_read_tokens=26_700,
    )
    assert format_stats(stats) == "9 tool calls · 2m 40s · 31.5k tokens (89% from cache)"
    priced = stats.model_copy(update={"cost_micro_usd": 71_234})
    assert format_stats(priced) == "9 tool calls · 2m 40s · 31.5k tokens (89% from cache) · $0.07"


def test_large_counts_are_shown_in_millions_and_billions() -> None:
    many = RunStats(input_tokens=3_600_000_000, output_tokens=2_400_000)
    assert format_stats(many) == "0 tool calls · 0s · 3.6B tokens"
    assert format_stats(RunStats(output_tokens=2_400_000)) == "0 tool calls · 0s · 2.4M tokens"
