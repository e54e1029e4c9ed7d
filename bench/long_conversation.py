"""Benchmark 3: the cost of a tool call late in a long conversation against early in it.

**Figure.** One conversation of ``calls`` model turns of one tool call each, then
the answer, on the app built by ``bot.app.build`` (temporary SQLite file, its
migrations and pragmas, default settings but ``step_turn_limit`` above ``calls``), fed
through its hub with a sender that keeps nothing (:mod:`bench._hub`). The model
answers at once; the tool (:class:`bench._agent.TickTool`, read-only, so no plan
or approval is asked for) does nothing but note ``time.perf_counter()`` when it
runs. The cost of call *k* is the time between the runs of calls *k-1* and *k*:
everything threadbot does for one turn (model request built from the history,
the turn committed, the call's running marker and result, its progress note).
Late cost = mean over calls ``calls-window .. calls`` (450-500 by default).

**Floor.** The same conversation's early cost: mean over calls ``0 .. window``
(0-50), measured in the same conversation.

**Rounds.** ``rounds`` conversations one after another in the same app, each
its own round: the floor (early calls) and the figure (late calls) of a round
are the same conversation's, so the floor always runs first (a conversation
cannot be long before it was short) and alternation is between nothing else. A
round's ratio is its late cost over its early cost; the verdict is on the
median of those ratios (not the median late cost over the median early cost),
printed with their spread. Target: late at most 1.5x early.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from bench._agent import TickTool, TurnModel, ticks_then_finish, toolbox
from bench._hub import mention, threadbot_on_hub
from bench._report import Figure, Result
from bench._verdict import Target

TARGET = 1.5
TIMEOUT = 1800.0


async def run(root: Path, *, calls: int = 500, rounds: int = 3, window: int = 50) -> Result:
    """Measure ``rounds`` conversations of ``calls`` tool calls each (ms per call)."""
    started = time.perf_counter()
    window = min(window, calls // 2)
    ticks: list[float] = []
    model = TurnModel(ticks_then_finish(calls))
    early: list[float] = []
    late: list[float] = []
    async with threadbot_on_hub(
        root / "long", model=model, toolbox=toolbox(TickTool(ticks)), step_turn_limit=calls + 10
    ) as (app, _sender):
        for _ in range(rounds):
            ticks.clear()
            await mention(app)
            await asyncio.wait_for(app.hub.settled(), TIMEOUT)
            if len(ticks) != calls:
                raise RuntimeError(f"the conversation made {len(ticks)} tool calls, not {calls}")
            first = (ticks[window] - ticks[0]) / window * 1000
            last = (ticks[-1] - ticks[-1 - window]) / window * 1000
            early.append(first)
            late.append(last)
    figure = Figure(
        key="tool_call_late",
        label=f"one tool call at calls {calls - window}-{calls}",
        unit="ms",
        rounds=late,
        floor_rounds=early,
        floor_label=f"calls 0-{window} of the same conversation",
        target=Target(TARGET),
    )
    return Result(
        number=3,
        title="A tool call late in a long conversation against early in it",
        sizes=f"{calls} tool calls per conversation, {rounds} conversations",
        figures=[figure],
        seconds=time.perf_counter() - started,
    )
