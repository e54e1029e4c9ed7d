"""What every benchmark returns and how it is printed: figures beside their floors.

A :class:`Figure` is one measured number with its floor (measured in the same run,
rounds alternating with the figure's), the ratio between them, and the issue's
target. :func:`median` and :func:`percentile` are the only statistics used.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Better = Literal["lower", "higher"]


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
    """One measured figure.

    ``value`` and ``floor`` are in ``unit``; ``ratio`` is ``value / floor``: for a
    cost (``better="lower"``) how many times the floor's, for a rate
    (``better="higher"``) the fraction of the floor's rate. ``target`` says what
    the issue asks, in words; ``met`` whether this run meets it (None when it is
    judged against the baseline: ``baseline_tolerance`` is then the fraction the
    value may be above the baseline's, see :func:`against_baseline`). ``rounds``
    keeps the per-round values the medians come from.
    """

    key: str
    label: str
    unit: str
    value: float
    floor: float | None = None
    floor_label: str = ""
    target: str = ""
    met: bool | None = None
    better: Better = "lower"
    baseline_tolerance: float | None = None
    baseline: float | None = None
    rounds: list[float] = field(default_factory=list)
    floor_rounds: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        """``value / floor``, or None without a floor."""
        if self.floor is None or self.floor == 0 or math.isnan(self.floor):
            return None
        return self.value / self.floor

    def as_dict(self) -> dict[str, Any]:
        """The figure as JSON-ready data (``ratio`` included)."""
        data = asdict(self)
        data["ratio"] = self.ratio
        return data


@dataclass
class Result:
    """What one benchmark measured: its figures, the sizes used and how long it took (s)."""

    number: int
    title: str
    sizes: str
    figures: list[Figure]
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The result as JSON-ready data."""
        return {
            "number": self.number,
            "title": self.title,
            "sizes": self.sizes,
            "seconds": self.seconds,
            "notes": self.notes,
            "figures": [f.as_dict() for f in self.figures],
        }


def judge(value: float, target: float, better: Better) -> bool:
    """Whether ``value`` meets ``target`` (at most it when lower is better, else at least)."""
    return value <= target if better == "lower" else value >= target


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


def render(result: Result, out: Callable[[str], None] = print) -> None:
    """Print ``result``: a title line, then one line per figure, then its notes."""
    out(f"{result.number}. {result.title}  [{result.sizes}; {result.seconds:.0f} s]")
    for figure in result.figures:
        line = f"   {figure.label}: {fmt(figure.value, figure.unit)}"
        if figure.floor is not None:
            line += f"  | floor ({figure.floor_label}): {fmt(figure.floor, figure.unit)}"
        ratio = figure.ratio
        if ratio is not None:
            shown = f"{ratio:.1%} of floor" if figure.better == "higher" else f"{ratio:.2f}x"
            line += f"  | ratio {shown}"
        if figure.baseline is not None:
            line += f"  | baseline {fmt(figure.baseline, figure.unit)}"
        if figure.target:
            verdict = {True: "met", False: "MISSED", None: "vs baseline"}[figure.met]
            line += f"  | target {figure.target}: {verdict}"
        out(line)
        for note in figure.notes:
            out(f"      {note}")
    for note in result.notes:
        out(f"   note: {note}")


def against_baseline(figures: Sequence[Figure], baseline: dict[str, float]) -> None:
    """Put each figure beside a baseline run's value (same ``key``), and judge those whose
    target is relative to it: met when at most ``1 + baseline_tolerance`` times the
    baseline's."""
    for figure in figures:
        if figure.key not in baseline:
            continue
        figure.baseline = baseline[figure.key]
        if figure.baseline_tolerance is not None:
            figure.met = figure.value <= figure.baseline * (1 + figure.baseline_tolerance)
