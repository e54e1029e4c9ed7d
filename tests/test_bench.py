"""The benchmarks stay runnable, and every figure is judged one way.

The runs are not timed: the numbers mean nothing at ``--quick`` sizes (``make
bench`` runs the real ones); they keep ``bench/`` from rotting as the code it
drives changes, and show what a run prints (each figure's spread and verdict,
the total time). The benchmarks on PostgreSQL run on the tests' server
(``tests/postgres.py``: skipped without one, failed under CI), and are reported
skipped, with why, when the server named does not answer. The verdict itself
(:mod:`bench._verdict`) is checked on hand-worked rounds.
"""

from __future__ import annotations

import json
import math
import re
import socket
from pathlib import Path

import pytest

from bench.__main__ import ALSO_POSTGRES, ON_POSTGRES, QUICK, main, run_all, summary
from bench._report import Figure, Result, render
from bench._verdict import Target, in_turn, judge, ratios


@pytest.mark.parametrize("number", sorted(QUICK))
def test_each_benchmark_runs_at_a_tiny_size(
    number: int, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    if number in ON_POSTGRES | ALSO_POSTGRES:
        server = request.getfixturevalue("postgres_server")
        url = server.url.render_as_string(hide_password=False)
        monkeypatch.setenv("THREADBOT_TEST_DATABASE_URL", url)
    printed: list[str] = []
    [result] = run_all([number], quick=True, out=printed.append)
    assert result.number == number
    assert result.figures
    for figure in result.figures:
        assert math.isfinite(figure.value) and figure.value > 0, figure
        if figure.floor is not None:
            assert math.isfinite(figure.floor) and figure.floor > 0, figure
    assert printed[0].startswith(f"{number}. ")
    if any(figure.floor is not None for figure in result.figures):
        assert any("| floor (" in line for line in printed)
    spreads = [line for line in printed if line.strip().startswith("spread: ")]
    verdicts = [line for line in printed if line.strip().startswith("verdict: ")]
    assert len(spreads) == len(verdicts) == len(result.figures), printed
    assert not any("other rows than the store" in note for note in result.notes)
    assert not result.skipped
    if number == 4:  # every answer arrived
        n = QUICK[4]["conversations"]
        assert f"threadbot {n}/{n}" in result.figures[0].notes[0]
    if number == 10:  # each setup's time against the ideal, every answer arrived
        n = QUICK[10]["conversations"]
        for figure in result.figures:
            assert figure.floor is not None and not figure.unmet, figure
            assert figure.notes == [f"answers arrived by round: {n}"], figure
    if number in (5, 9):  # the story's statements were seen, its transactions split
        assert re.match(r"\d+ statements in \d+ write \+ \d+ read", result.figures[0].notes[0])
    if number in ALSO_POSTGRES:  # measured on both, the page's rows those of its query
        ons = [figure.key.rsplit("_", 2)[1] for figure in result.figures]
        assert ons == ["sqlite", "sqlite", "postgresql", "postgresql"], ons
        assert not any(figure.unmet for figure in result.figures)


@pytest.mark.parametrize("number", sorted(ON_POSTGRES))
def test_a_benchmark_on_postgresql_without_a_server_is_reported_skipped_with_why(
    number: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as probe:  # a port of this machine nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("THREADBOT_TEST_DATABASE_URL", f"postgresql://bench@127.0.0.1:{port}/x")
    printed: list[str] = []
    [result] = run_all([number], quick=True, out=printed.append)
    assert result.figures == []
    assert result.skipped.startswith("no PostgreSQL server at THREADBOT_TEST_DATABASE_URL: ")
    assert f"127.0.0.1:{port}" in result.skipped
    assert printed == [f"{number}. {result.title}  [skipped: {result.skipped}]"]
    summarized: list[str] = []
    summary([result], summarized.append)
    assert summarized[-1] == f"{number}. {result.title} | skipped: {result.skipped}"
    assert result.as_dict()["skipped"] == result.skipped


def test_the_verdict_is_the_median_of_the_per_round_ratios_not_the_ratio_of_the_medians() -> None:
    # Round by round: 10/5 = 2, 30/10 = 3, 20/4 = 5. The median of those is 3: met
    # against 3.5x. The medians' ratio, 20/5 = 4, would have missed it.
    figure = Figure(
        key="k",
        label="one tool call late",
        unit="ms",
        rounds=[10.0, 30.0, 20.0],
        floor_rounds=[5.0, 10.0, 4.0],
        floor_label="early",
        target=Target(3.5),
    )
    assert (figure.value, figure.floor) == (20.0, 5.0)
    assert figure.ratios == [2.0, 3.0, 5.0]
    verdict = figure.verdict
    assert (verdict.median, verdict.low, verdict.high, verdict.met) == (3.0, 2.0, 5.0, True)
    assert figure.ratio == 3.0 and figure.met is True
    printed: list[str] = []
    render(Result(number=3, title="t", sizes="s", figures=[figure]), printed.append)
    assert printed[1:] == [
        "   one tool call late: 20.0 ms  | floor (early): 5.00 ms",
        "      spread: 2.00x to 5.00x over 3 rounds"
        " (each round's figure/floor: 2.00x, 3.00x, 5.00x)",
        "      verdict: median of the per-round ratios 3.00x; target at most 3.5x the floor: met",
    ]


def test_a_rate_is_judged_on_its_per_round_share_of_the_floor_rate() -> None:
    # The store against DBOS: 500/400 = 1.25, 100/50 = 2, 300/600 = 0.5; median 1.25, so
    # at least DBOS's rate; the medians (300 against 400) would say 75%.
    figure = Figure(
        key="k",
        label="tool calls",
        unit="calls/s",
        rounds=[500.0, 100.0, 300.0],
        floor_rounds=[400.0, 50.0, 600.0],
        target=Target(1.0),
        better="higher",
    )
    assert figure.verdict.median == 1.25 and figure.met is True
    assert (figure.verdict.low, figure.verdict.high) == (0.5, 2.0)
    assert figure.value / (figure.floor or 1) == 0.75


def test_an_even_number_of_rounds_takes_the_mean_of_the_middle_two_ratios() -> None:
    verdict = judge(ratios([1.0, 4.0, 9.0, 8.0], [1.0, 2.0, 3.0, 2.0]), Target(2.4), "lower")
    assert verdict.measures == (1.0, 2.0, 3.0, 4.0)
    assert (verdict.median, verdict.low, verdict.high, verdict.met) == (2.5, 1.0, 4.0, False)


def test_a_value_target_is_judged_on_the_rounds_values_and_a_failed_condition_misses() -> None:
    statements = Figure(
        key="k",
        label="statements",
        unit="statements",
        rounds=[150.0, 143.0, 145.0],
        floor_rounds=[99.0, 97.0, 99.0],
        target=Target(40, of_floor=False),
    )
    verdict = statements.verdict
    assert (verdict.median, verdict.low, verdict.high, verdict.met) == (145.0, 143.0, 150.0, False)
    # The ratio to the floor is still the median of the rounds' (150/99, 143/97, 145/99).
    assert statements.ratio == pytest.approx(143 / 97)
    arrived = Figure(
        key="k",
        label="conversations",
        unit="s",
        rounds=[20.0],
        floor_rounds=[4.0],
        target=Target(10.0),
        unmet="3 answers did not arrive within 900 s",
    )
    assert arrived.verdict.met is True and arrived.met is False


def test_rounds_alternate_and_a_round_without_its_floor_is_refused() -> None:
    assert [in_turn(n, "floor", "figure") for n in range(3)] == [
        ["floor", "figure"],
        ["figure", "floor"],
        ["floor", "figure"],
    ]
    assert in_turn(1, "core", "store", "dbos", "sqlite3") == ["sqlite3", "dbos", "store", "core"]
    with pytest.raises(ValueError, match="each round needs its own floor"):
        ratios([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="not positive"):
        ratios([1.0], [0.0])
    with pytest.raises(ValueError, match="no rounds"):
        judge([], None, "lower")


def test_a_quick_run_prints_spreads_verdicts_and_how_long_it_took(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "figures.json"
    assert main(["--quick", "--only", "3,5", "--json", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("threadbot benchmarks on ") and "load average" in lines[0]
    figures = [i for i, line in enumerate(lines) if re.match(r"   \S.*: ", line)]
    assert len(figures) == 2
    for i in figures:
        assert re.match(r" +spread: \S+ to \S+.* over 1 round \(", lines[i + 1]), lines[i + 1]
        assert re.match(r" +verdict: median of the .*; target .*: (met|MISSED)$", lines[i + 2])
    assert "figure | value | floor | judged on (median) | spread | target | met" in lines
    assert re.fullmatch(r"all benchmarks took \d+ s.*; load average now [\d. ]+", lines[-1])
    report = json.loads(out.read_text(encoding="utf-8"))
    [late] = report["results"][0]["figures"]
    assert late["ratios"] == [late["rounds"][0] / late["floor_rounds"][0]]
    assert late["spread"] == [late["median"]] * 2 and late["met"] in (True, False)
    assert isinstance(report["seconds"], float) and report["quick"] is True
