"""The benchmarks stay runnable: each one at a tiny size, printing its figures and floors.

Not a timed test: the numbers mean nothing at these sizes (``make bench`` runs the
real ones). It only keeps ``bench/`` from rotting as the code it drives changes.
"""

from __future__ import annotations

import math

import pytest

from bench.__main__ import QUICK, run_all


@pytest.mark.parametrize("number", sorted(QUICK))
def test_each_benchmark_runs_at_a_tiny_size(number: int) -> None:
    printed: list[str] = []
    [result] = run_all([number], quick=True, out=printed.append)
    assert result.number == number
    assert result.figures
    for figure in result.figures:
        assert math.isfinite(figure.value) and figure.value > 0, figure
        if figure.floor is not None:
            assert math.isfinite(figure.floor) and figure.floor > 0, figure
    assert printed[0].startswith(f"{number}. ")
    if any(figure.floor is not None for figure in result.figures):  # 7 has none: a share
        assert any("| floor (" in line for line in printed)
    assert not any("other rows than the store" in note for note in result.notes)
    if number == 4:  # every answer arrived
        n = QUICK[4]["conversations"]
        assert f"threadbot {n}/{n}" in result.figures[0].notes[0]
