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
so the share must not drop).

**Floor.** None: the target is a share, not a speed.

**Rounds.** One: the share is a count of bytes, the same in every run (nothing
drifts), so the spread printed beside the verdict is that one round's.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Mapping
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
from core.workflow import default_workflow
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
    context strategy."""
    started = time.perf_counter()
    figures = []
    for strategy in STRATEGIES:
        place = root / strategy
        place.mkdir(parents=True, exist_ok=True)
        figures.append(await _figure(place, turns, strategy))
    return Result(
        number=7,
        title="The cached prefix: each request against the one before",
        sizes=f"{turns} tool turns of ~2,000 tokens, ~3,000 tokens of system prompt and tools",
        figures=figures,
        seconds=time.perf_counter() - started,
    )


async def _figure(root: Path, turns: int, strategy: str) -> Figure:
    """The figure of one conversation under the context strategy ``strategy``."""
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
            workflow=default_workflow(),
            settings=EngineSettings(
                instructions=INSTRUCTIONS, step_turn_limit=turns + 5, context_strategy=strategy
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
    inputs = [_input(r.body) for r in server.requests]
    pairs = list(itertools.pairwise(inputs))
    shared = [_shared(a, b) for a, b in pairs]
    shares = [n / len(b) for n, (_, b) in zip(shared, pairs, strict=True)]
    mean = sum(shares) / len(shares) if shares else 0.0
    weighted = sum(shared) / sum(len(b) for _, b in pairs) if pairs else 0.0
    # All a request can share with the one before is that one, less the brackets that
    # closed its message list: the rest (the new turn and its results) is new.
    kept = [n / (len(a) - 2) for n, (a, _) in zip(shared, pairs, strict=True)]
    named = "" if strategy == "flat" else f" ({strategy})"
    return Figure(
        key="cache_prefix_share" if strategy == "flat" else f"cache_prefix_share_{strategy}",
        label=f"share of each request's input that the previous request sent{named}",
        unit="",
        rounds=[round(mean, 4)],
        target=Target(TARGET, of_floor=False),
        better="higher",
        notes=[
            f"{len(inputs)} requests; lowest share {min(shares):.4f}; weighted by size "
            f"{weighted:.4f}; of each previous request, {min(kept):.4f} at least was "
            f"sent again unchanged; first request {len(inputs[0]):,} characters, "
            f"last {len(inputs[-1]):,}"
        ]
        if shares
        else [],
    )
