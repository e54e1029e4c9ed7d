"""What every benchmark returns and how it is printed: figures beside their floors.

A :class:`Figure` is one measured number, round by round, with its floor's
rounds (measured in the same run, alternating with the figure's:
:func:`bench._verdict.in_turn`) and the issue's target. Its verdict, the
median of the per-round ratios and their spread, comes from
:mod:`bench._verdict`, the one way every benchmark is judged. :func:`median`
and :func:`percentile` are the only other statistics used.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench._verdict import Better, Target, Verdict, judge, ratios


def median(values: Sequence[float]) -> float:
    """The median of ``values`` (NaN for none)."""
    return statistics.median(values) if values else math.nan


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (0-100) of ``values``, nearest rank (NaN for none)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass
class Figure:
    """One measured figure, round by round.

    ``rounds`` holds the figure of each round in ``unit``; ``floor_rounds`` its
    floor's, round for round (empty: no floor). ``value`` and ``floor`` are their
    medians, for reading; the verdict is :attr:`verdict`: the median of the
    per-round ratios (figure over the floor of the same round; for a cost,
    ``better="lower"``, how many times the floor's, for a rate,
    ``better="higher"``, the fraction of the floor's rate), or of the per-round
    values when ``target`` is a value (:attr:`bench._verdict.Target.of_floor`).
    ``unmet`` names a condition the figure failed besides its target (then it is
    not met whatever the ratio).
    """

    key: str
    label: str
    unit: str
    rounds: list[float]
    floor_rounds: list[float] = field(default_factory=list)
    floor_label: str = ""
    target: Target | None = None
    better: Better = "lower"
    unmet: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def value(self) -> float:
        """The median of the figure's rounds."""
        return median(self.rounds)

    @property
    def floor(self) -> float | None:
        """The median of the floor's rounds, or None without a floor."""
        return median(self.floor_rounds) if self.floor_rounds else None

    @property
    def ratios(self) -> list[float]:
        """Figure over floor, round by round (empty without a floor)."""
        return ratios(self.rounds, self.floor_rounds) if self.floor_rounds else []

    @property
    def ratio(self) -> float | None:
        """The median of :attr:`ratios`, or None without a floor."""
        found = self.ratios
        return median(found) if found else None

    @property
    def judged_by_floor(self) -> bool:
        """Whether the verdict is on ratios to the floor: the figure has a floor and its
        target, if any, is a ratio."""
        return bool(self.floor_rounds) and (self.target is None or self.target.of_floor)

    @property
    def verdict(self) -> Verdict:
        """The figure judged on its per-round ratios (per-round values when its target is a
        value, or when it has no floor)."""
        measures = self.ratios if self.judged_by_floor else self.rounds
        return judge(measures, self.target, self.better)

    @property
    def met(self) -> bool | None:
        """Whether the figure meets its target (None without one)."""
        met = self.verdict.met
        return False if met is not None and self.unmet else met

    def as_dict(self) -> dict[str, Any]:
        """The figure as JSON-ready data: its rounds, medians, per-round ratios, verdict."""
        verdict = self.verdict
        return {
            "key": self.key,
            "label": self.label,
            "unit": self.unit,
            "value": self.value,
            "floor": self.floor,
            "floor_label": self.floor_label,
            "ratio": self.ratio,
            "rounds": self.rounds,
            "floor_rounds": self.floor_rounds,
            "ratios": self.ratios,
            "judged_on": list(verdict.measures),
            "median": verdict.median,
            "spread": [verdict.low, verdict.high],
            "target": self.target.words(self.better, self.unit) if self.target else "",
            "target_bound": self.target.bound if self.target else None,
            "target_of_floor": self.target.of_floor if self.target else None,
            "better": self.better,
            "met": self.met,
            "unmet": self.unmet,
            "notes": self.notes,
        }


@dataclass
class Result:
    """What one benchmark measured: its figures, the sizes used and how long it took (s).

    ``skipped`` says why a benchmark could not run here (no PostgreSQL server, say);
    then it has no figures.
    """

    number: int
    title: str
    sizes: str
    figures: list[Figure]
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    skipped: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The result as JSON-ready data."""
        return {
            "number": self.number,
            "title": self.title,
            "sizes": self.sizes,
            "seconds": self.seconds,
            "notes": self.notes,
            "skipped": self.skipped,
            "figures": [f.as_dict() for f in self.figures],
        }


def fmt(value: float | None, unit: str = "") -> str:
    """A number with three significant digits (thousands separated) and its unit."""
    if value is None or math.isnan(value):
        return "n/a"
    size = abs(value)
    if size >= 100:
        text = f"{value:,.0f}"
    elif size >= 10:
        text = f"{value:.1f}"
    elif size >= 1:
        text = f"{value:.2f}"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}".strip()


def shown(figure: Figure, measure: float, *, unit: bool = True) -> str:
    """A measure the verdict is taken on, in words: a ratio to the floor as ``13.2x`` (a
    cost) or ``281.0%`` (a rate), a value with its unit (without, when ``unit`` is false)."""
    if not figure.judged_by_floor:
        return fmt(measure, figure.unit if unit else "")
    return f"{measure:.1%}" if figure.better == "higher" else f"{fmt(measure)}x"


def spread(figure: Figure) -> str:
    """The lowest and highest per-round measure, e.g. ``12.0x to 14.1x`` or ``143 to 150
    statements``."""
    verdict = figure.verdict
    return f"{shown(figure, verdict.low, unit=False)} to {shown(figure, verdict.high)}"


def render(result: Result, out: Callable[[str], None] = print) -> None:
    """Print ``result``: a title line; per figure its value and floor, a spread line (the
    per-round measures, lowest to highest) and a verdict line; then the notes. A skipped
    benchmark is its title and ``skipped: <why>``."""
    if result.skipped:
        out(f"{result.number}. {result.title}  [skipped: {result.skipped}]")
        return
    out(f"{result.number}. {result.title}  [{result.sizes}; {result.seconds:.0f} s]")
    for figure in result.figures:
        line = f"   {figure.label}: {fmt(figure.value, figure.unit)}"
        if figure.floor is not None:
            line += f"  | floor ({figure.floor_label}): {fmt(figure.floor, figure.unit)}"
        out(line)
        measures = figure.verdict.measures
        what = "each round's figure/floor" if figure.judged_by_floor else "by round"
        by_round = ", ".join(shown(figure, m, unit=False) for m in measures)
        rounds = f"{len(measures)} round{'s' if len(measures) != 1 else ''}"
        out(f"      spread: {spread(figure)} over {rounds} ({what}: {by_round})")
        out(f"      verdict: {_verdict_words(figure)}")
        for note in figure.notes:
            out(f"      {note}")
    for note in result.notes:
        out(f"   note: {note}")


def _verdict_words(figure: Figure) -> str:
    verdict = figure.verdict
    what = "median of the per-round ratios" if figure.judged_by_floor else "median of the rounds"
    measured = f"{what} {shown(figure, verdict.median)}"
    if figure.target is None:
        return f"no target; {measured}"
    met = {True: "met", False: "MISSED", None: "-"}[figure.met]
    unmet = f" ({figure.unmet})" if figure.unmet else ""
    return f"{measured}; target {figure.target.words(figure.better, figure.unit)}: {met}{unmet}"
