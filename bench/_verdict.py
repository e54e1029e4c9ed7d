"""The one way a figure is judged: rounds paired with their floor's, the median of the ratios.

Every benchmark measures a figure and its floor in rounds that alternate
(:func:`in_turn`: round 0 runs the floor first, round 1 the figure first, and
so on), so whatever drifts on the machine (another process's load, a CPU's
clock, a cache warming) hits both. A round's ratio is the figure over the
floor *of the same round* (:func:`ratios`); the verdict is taken on the median
of those ratios (:func:`judge`), never on the ratio of two medians, which sets
a figure beside a floor measured in another round. The lowest and highest
ratio (the spread) are printed beside the verdict, so a reader sees how far
it can be trusted: a spread that straddles the target means another run may
well judge otherwise.

A figure whose target is a value rather than a ratio (statements per story, a
share of bytes, heap per conversation: :attr:`Target.of_floor` false) is judged
the same way on its per-round values.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

Better = Literal["lower", "higher"]
"""``lower`` for a cost (ms, s, statements, KiB), ``higher`` for a rate or a share."""

T = TypeVar("T")


def in_turn(number: int, *contenders: T) -> list[T]:
    """The order in which round ``number`` (0, 1, 2...) runs ``contenders``.

    As given in even rounds, reversed in odd ones: with ``in_turn(n, floor,
    figure)`` round 0 runs the floor then the figure, round 1 the figure then
    the floor, so drift hits both. With more contenders, each one's neighbours
    swap sides every round as well.
    """
    return list(contenders) if number % 2 == 0 else list(reversed(contenders))


def ratios(rounds: Sequence[float], floor_rounds: Sequence[float]) -> list[float]:
    """Figure over floor, round by round: ``rounds[i] / floor_rounds[i]``.

    Raises :class:`ValueError` when the two have different lengths (a round
    without its floor cannot be paired) or a floor round is not positive.
    """
    if len(rounds) != len(floor_rounds):
        raise ValueError(
            f"{len(rounds)} rounds of the figure against {len(floor_rounds)} of its floor: "
            "each round needs its own floor"
        )
    if any(floor <= 0 for floor in floor_rounds):
        raise ValueError(f"a floor round is not positive: {list(floor_rounds)}")
    return [value / floor for value, floor in zip(rounds, floor_rounds, strict=True)]


@dataclass(frozen=True)
class Target:
    """What the issue asks of a figure.

    ``bound`` is a ratio to the floor when ``of_floor`` (3.0: at most three
    times the floor's; 0.5 with ``better="higher"``: at least half the floor's
    rate), else a value in the figure's unit (40 statements, a share of 0.95).
    ``why`` says where a value bound comes from, when it is not the issue's
    own number.
    """

    bound: float
    of_floor: bool = True
    why: str = ""

    def met_by(self, measure: float, better: Better) -> bool:
        """Whether ``measure`` (a median ratio, or a value) meets the bound."""
        return measure <= self.bound if better == "lower" else measure >= self.bound

    def words(self, better: Better, unit: str = "") -> str:
        """The target in words, e.g. ``at most 3x the floor``, ``at least 50% of the floor``,
        ``at most 40 statements``."""
        side = "at most" if better == "lower" else "at least"
        if not self.of_floor:
            text = f"{side} {self.bound:g} {unit}".strip()
            return f"{text} ({self.why})" if self.why else text
        if better == "higher":
            return f"{side} {self.bound:.0%} of the floor"
        return f"{side} {self.bound:g}x the floor"


@dataclass(frozen=True)
class Verdict:
    """A figure judged on its rounds.

    ``measures`` are the per-round ratios to the floor (or the per-round values,
    for a target that is a value), in round order; ``median``, ``low`` and
    ``high`` are their median, lowest and highest (the spread); ``met`` is
    whether the median meets the target, None without one.
    """

    measures: tuple[float, ...]
    median: float
    low: float
    high: float
    met: bool | None


def judge(measures: Sequence[float], target: Target | None, better: Better) -> Verdict:
    """The verdict on ``measures`` (one per round): median, spread and whether the median
    meets ``target``. Raises :class:`ValueError` with no measures."""
    if not measures:
        raise ValueError("no rounds to judge")
    middle = statistics.median(measures)
    return Verdict(
        measures=tuple(measures),
        median=middle,
        low=min(measures),
        high=max(measures),
        met=None if target is None else target.met_by(middle, better),
    )
