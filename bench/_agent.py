"""The agent side of the benchmarks: a scripted model that many conversations share, a
zero-cost tool, and the turns the benchmarks script.

:class:`TurnModel` answers by the number of assistant turns already in the request
(like ``core.models.scripted.ScriptFileModel``), so any number of conversations
run it at once, each at its own turn, and it can wait a fixed time first (a model
that takes 50 ms). :class:`TickTool` is a read-only tool that does nothing but
note when it ran, so a tool call costs only what threadbot spends around it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from core.models.base import ModelEvent, ModelRequest, ToolKind, ToolSpec
from core.models.scripted import ScriptedCall, canned_events
from core.tools.base import Tool, Toolbox, ToolContext, ToolOutput

TICK = "bench_tick"
ANSWER = "bench answer"
"""The final answer's text in every script: what a benchmark waits for in the thread."""

Script = Callable[[int], Sequence[ScriptedCall]]
"""Turn number (0 for the first model call of a conversation) -> the calls of that turn."""


def plan_turn() -> list[ScriptedCall]:
    """A turn that proposes a two-step plan (the conversation then waits for approval)."""
    return [ScriptedCall("propose_plan", {"steps": ["look around", "answer"]})]


def tick_turn(calls: int = 1) -> list[ScriptedCall]:
    """A turn of ``calls`` read-only :class:`TickTool` calls."""
    return [ScriptedCall(TICK, {"n": n}) for n in range(calls)]


def finish_turn() -> list[ScriptedCall]:
    """A turn that ends the run with :data:`ANSWER`."""
    return [ScriptedCall("finish", {"answer": ANSWER})]


def story_script(turn: int) -> list[ScriptedCall]:
    """The story: a plan; after its approval two tool calls in one turn; the answer."""
    return [plan_turn, lambda: tick_turn(2), finish_turn][min(turn, 2)]()


def plan_then_finish(turn: int) -> list[ScriptedCall]:
    """A plan; after its approval, the answer at once."""
    return plan_turn() if turn == 0 else finish_turn()


def ticks_then_finish(ticks: int) -> Script:
    """``ticks`` turns of one tool call each (no plan: read-only tools need no
    approval), then the answer: ``ticks + 1`` model turns."""

    def script(turn: int) -> list[ScriptedCall]:
        return tick_turn() if turn < ticks else finish_turn()

    return script


class TurnModel:
    """A :class:`core.models.base.Model` that plays ``script(turn)`` after ``delay`` seconds.

    ``turn`` is the number of assistant messages in the request's history, so the
    same model serves many conversations at once. Call ids are
    ``toolu_bench_<turn>_<index>`` (unique within a conversation). ``calls`` counts
    the requests answered.
    """

    def __init__(self, script: Script, *, delay: float = 0.0) -> None:
        self.name = "bench"
        self._script = script
        self._delay = delay
        self.calls = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Wait ``delay`` seconds, then yield the scripted turn's events."""
        self.calls += 1
        turn = sum(1 for m in request.messages if m["role"] == "assistant")
        if self._delay:
            await asyncio.sleep(self._delay)
        async for event in canned_events(self.name, "bench", request, "", self._script(turn)):
            yield event


class TickTool:
    """A read-only tool that returns at once; appends ``time.perf_counter()`` to
    ``ticks`` (seconds) each time it runs, when given a list."""

    def __init__(self, ticks: list[float] | None = None) -> None:
        self.ticks = ticks

    @property
    def spec(self) -> ToolSpec:
        """``bench_tick``: no required input."""
        return ToolSpec(
            name=TICK,
            description="Does nothing, at once (benchmarks).",
            input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
            kind=ToolKind.READ_ONLY,
        )

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        """Note the time; the result is one short line."""
        if self.ticks is not None:
            self.ticks.append(time.perf_counter())
        return ToolOutput(content=f"tick {args.get('n', 0)}: nothing to do", note="bench_tick")


def toolbox(tick: TickTool | None = None) -> Toolbox:
    """threadbot's default tools and :class:`TickTool`."""
    from bot.engines import default_toolbox

    tools: list[Tool] = [*default_toolbox(), tick or TickTool()]
    return Toolbox(tools)
