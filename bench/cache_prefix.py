"""Benchmark 7: the share of each model request that the previous request already sent.

**Figure.** One conversation through the engine and the real Anthropic model
implementation (the ``anthropic`` client against the local Messages API fake,
:mod:`tests.fakes.anthropic_server`): a plan, its approval, then ``turns`` turns
that each call a read-only tool returning about 2,000 tokens (8,000 characters),
then the answer. The system prompt and the tools come to about 3,000 tokens
(12,000 characters of team instructions and the tools' schemas). For every
request from the second on, the share of its input (the tools, the system prompt
and the messages, as JSON in the order the API reads them, ``cache_control``
markers left out) that is the previous request's input, byte for byte, from the
start: what a prompt cache can serve. The figure is the mean of those shares;
printed with it: the lowest, the share weighted by size, and how much of each
previous request the next one sent again unchanged (1.0: all of it; what a
request can never share is the turn and the tool output that are new in it).
Target: at least 0.95. The same conversation is measured under each context strategy
(:mod:`core.contexts`): ``cache_prefix_share`` is the default, ``flat``;
``cache_prefix_share_task_list`` and the others follow it (their notes are appended,
so the share must not drop). In all of these the planner and the executor are one model,
so the executor reads the whole history. ``cache_prefix_share_executor_view`` is the
``flat`` conversation with the planner and the executor on two models (``m-plans``,
``m-does``): the executor reads its own view (the request and the plan, then its own
turns: :meth:`core.run.history.History.build`), and each request is set against the
previous request to its own model (a prompt cache serves one model); the first request
to each model has none (printed beside the figure, and left out of the mean).

**Floor.** None for the one-model figures: the target is a share, not a speed. The
executor's view is printed beside the one-model ``flat`` figure of the same run, as its
floor (its target is still the value 0.95, not a ratio to that).

**Rounds.** One: the share is a count of bytes, the same in every run (nothing
drifts), so the spread printed beside the verdict is that one round's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench._report import Figure, Result
from bench._verdict import Target
from conversations.events import PlatformRef
from conversations.render import render_event
from conversations.store.memory import MemoryStore
from core.contexts import STRATEGIES
from core.models.anthropic import anthropic_model_from
from core.models.base import ToolKind, ToolSpec
from core.run.engine import Engine
from core.run.settings import EngineSettings
from core.tools.base import Toolbox, ToolContext, ToolOutput
from core.tools.control import control_tools
from core.vocabulary.inputs import Approve, ThreadMessage
from core.vocabulary.people import Person
from core.workflows import default_workflow
from tests.fakes.anthropic_server import FakeAnthropicServer, tool_use

TARGET = 0.95
ALICE = Person(id="U0ALICE001", name="alice")
INSTRUCTIONS = " ".join(f"Team rule {n}: keep the build green and say why." for n in range(240))
"""About 12,000 characters (3,000 tokens) of team instructions in the system prompt."""


class FetchPage:
    """A read-only tool whose output is about 2,000 tokens, different on every call."""

    spec = ToolSpec(
        name="fetch_page",
        description="Fetch a page of the build log.",
        input_schema={
            "type": "object",
            "properties": {"page": {"type": "integer"}},
            "required": ["page"],
        },
        kind=ToolKind.READ_ONLY,
    )

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        page = int(args.get("page", 0))
        lines = [f"[page {page} line {n}] step {n * page} passed in {n % 7} ms" for n in range(180)]
        return ToolOutput(content="\n".join(lines)[:8000], note=f"fetched page {page}")


def _input(body: Mapping[str, Any]) -> str:
    """The request's input as the API reads it: tools, system, messages, no cache markers."""
    return json.dumps(
        _unmarked([body.get("tools", []), body.get("system", []), body["messages"]]),
        separators=(",", ":"),
        ensure_ascii=False,
    )


def _unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


def _shared(before: str, after: str) -> int:
    """Characters ``after`` shares with ``before`` from the start."""
    limit = min(len(before), len(after))
    n = 0
    while n < limit and before[n] == after[n]:
        n += 1
    return n


async def run(root: Path, *, turns: int = 30) -> Result:
    """Measure the shared prefixes of one conversation of ``turns`` tool turns, under each
    context strategy, and with the executor on another model than the planner."""
    started = time.perf_counter()
    figures = []
    same: list[dict[str, Any]] = []
    for strategy in STRATEGIES:
        place = root / strategy
        place.mkdir(parents=True, exist_ok=True)
        bodies = await _conversation(place, turns, strategy)
        same = same or bodies  # the default, flat, first
        figures.append(_figure(bodies, strategy))
    place = root / "executor_view"
    place.mkdir(parents=True, exist_ok=True)
    bodies = await _conversation(place, turns, "flat", planner="m-plans", executor="m-does")
    figures.append(_executor_view(bodies, same))
    return Result(
        number=7,
        title="The cached prefix: each request against the one before",
        sizes=f"{turns} tool turns of ~2,000 tokens, ~3,000 tokens of system prompt and tools",
        figures=figures,
        seconds=time.perf_counter() - started,
    )


async def _conversation(
    root: Path,
    turns: int,
    strategy: str,
    *,
    planner: str | None = None,
    executor: str | None = None,
) -> list[dict[str, Any]]:
    """The bodies of the requests of one conversation under the context strategy
    ``strategy``, the planner and the executor on the models named (None: ``m``)."""
    script = [[tool_use("toolu_plan", "propose_plan", {"steps": ["Read the log"]})]]
    script += [[tool_use(f"toolu_{n}", "fetch_page", {"page": n})] for n in range(1, turns + 1)]
    script += [[tool_use("toolu_end", "finish", {"answer": "The log is clean."})]]
    store = MemoryStore(render=render_event)
    async with FakeAnthropicServer(script) as server:
        model = anthropic_model_from(api_key="bench-key", base_url=server.base_url, model="m")
        engine = Engine(
            journal=store.journal,
            model=model,
            toolbox=Toolbox([*control_tools(), FetchPage()]),
            settings=EngineSettings(
                instructions=INSTRUCTIONS,
                step_turn_limit=turns + 5,
                context_strategy=strategy,
                planner_model=planner,
                executor_model=executor,
            ),
        )
        cid = await store.threads.open_conversation(
            delivery_key="bench",
            binding=PlatformRef(platform="bench", channel="c", thread="t"),
            requester=ALICE,
            workspace_root=root,
            position=default_workflow().start,
        )
        assert cid is not None
        await engine.start(cid, ThreadMessage(text="why is the build slow?", author=ALICE))
        plan = (await store.journal.load(cid)).open_requests[0]
        await engine.decide(cid, Approve(request_id=plan.id, by=ALICE))
        await engine.run(cid)
        await model.aclose()
    return [r.body for r in server.requests]


@dataclass(frozen=True)
class _Shares:
    """What each request shares with the previous request to its model: ``shares`` (of its
    input, one per request that has such a previous one), the characters ``shared`` and
    the ``sizes`` of those requests, ``kept`` (of the previous one, less the two
    brackets that closed its message list), and the ``cold`` requests (none before to
    their model: nothing to share)."""

    shares: list[float]
    shared: list[int]
    sizes: list[int]
    kept: list[float]
    cold: int

    @property
    def mean(self) -> float:
        return sum(self.shares) / len(self.shares) if self.shares else 0.0

    @property
    def weighted(self) -> float:
        return sum(self.shared) / sum(self.sizes) if self.sizes else 0.0


def _shares(bodies: list[dict[str, Any]]) -> _Shares:
    """Each request against the previous request to the same model (a prompt cache is the
    model's own); with one model, simply against the one before."""
    last: dict[str, str] = {}
    found = _Shares([], [], [], [], 0)
    for body in bodies:
        after = _input(body)
        before = last.get(body["model"])
        last[body["model"]] = after
        if before is None:
            found = replace(found, cold=found.cold + 1)
            continue
        n = _shared(before, after)
        found.shares.append(n / len(after))
        found.shared.append(n)
        found.sizes.append(len(after))
        # All a request can share with the one before is that one, less the brackets
        # that closed its message list: the rest (the new turn and its results) is new.
        found.kept.append(n / (len(before) - 2))
    return found


def _figure(bodies: list[dict[str, Any]], strategy: str) -> Figure:
    """The figure of one conversation on one model under the context strategy ``strategy``."""
    found = _shares(bodies)
    inputs = [_input(b) for b in bodies]
    named = "" if strategy == "flat" else f" ({strategy})"
    return Figure(
        key="cache_prefix_share" if strategy == "flat" else f"cache_prefix_share_{strategy}",
        label=f"share of each request's input that the previous request sent{named}",
        unit="",
        rounds=[round(found.mean, 4)],
        target=Target(TARGET, of_floor=False),
        better="higher",
        notes=[
            f"{len(inputs)} requests; lowest share {min(found.shares):.4f}; weighted by size "
            f"{found.weighted:.4f}; of each previous request, {min(found.kept):.4f} at least "
            f"was sent again unchanged; first request {len(inputs[0]):,} characters, "
            f"last {len(inputs[-1]):,}"
        ]
        if found.shares
        else [],
    )


def _executor_view(bodies: list[dict[str, Any]], same: list[dict[str, Any]]) -> Figure:
    """The figure of the conversation with the executor on another model than the
    planner's (its own view: the request and the plan, then its turns), beside the same
    conversation on one model (``same``: its requests' bodies) as its floor."""
    found, floor = _shares(bodies), _shares(same)
    executor = [b for b in bodies if b["model"] == "m-does"]
    whole = len(_input(same[1])) if len(same) > 1 else 0
    return Figure(
        key="cache_prefix_share_executor_view",
        label="the same, the executor on another model than the planner (its own view), "
        "each request against the previous one to its model",
        unit="",
        rounds=[round(found.mean, 4)],
        floor_rounds=[round(floor.mean, 4)],
        floor_label="one model for both roles",
        target=Target(TARGET, of_floor=False),
        better="higher",
        notes=[
            f"{len(bodies)} requests, {found.cold} with no request before to their model "
            f"(the planner's first, the executor's first: nothing to share; counted as "
            f"sharing nothing, the mean is {sum(found.shares) / len(bodies):.4f}); lowest share "
            f"{min(found.shares):.4f}; weighted by size {found.weighted:.4f}; of each "
            f"previous request, {min(found.kept):.4f} at least was sent again unchanged; the "
            f"executor's first request {len(_input(executor[0])):,} characters, against "
            f"{whole:,} when it reads the whole history"
        ]
        if found.shares and executor
        else [],
    )
