"""Scopes: a composed agent goes on in a nested scope with strategies of its own.

The composition: first a scope nested in the run's, "survey the workspace", whose
loop takes two model turns under the ``task_tree`` context strategy and an
in-memory output cache of its own, the retry policy its parent's; a branch on how
it ended goes on, for ``surveyed``, in a second scope of one turn; then the agent.
Checked: what the model is shown in the scope (the task path, its note journaled
once), which cache kept each large output, that the flaky call inside was retried
under the inherited policy, and that a run killed at each fault point on the way
(the scope just entered, each model turn, each tool result) and resumed by a new
engine ends with the same journal and asks the model the same things as a run that
went straight through (docs/architecture.md, "The agent as a composition").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from core.context import ManualClock
from core.contexts import Flat, TaskTree
from core.models.base import ToolKind, ToolSpec
from core.outputs import InMemoryOutputs, PersistentOutputs
from core.retry import Fixed, NoRetry
from core.run.agent import Running, agent
from core.run.compose import Branch, Do, Flow, Loop, Outcome, Sequence, Step
from core.run.deps import RunDeps
from core.run.history import build_messages
from core.run.scope import INHERIT, Scope, turns_in_scope
from core.run.state import Run
from core.run.steps import ContextNoted, InScope, ModelStep, ToolSteps
from core.tools.base import ToolContext, ToolOutput
from core.tools.workspace import ListFiles
from core.vocabulary.entries import ScopeEntered, ScopeLeft, ToolResultEntry
from core.vocabulary.inputs import Inbox
from core.vocabulary.lifecycle import Lifecycle
from tests.console_process import finish
from tests.engine_setup import Killed, Setup, die_in_place
from tests.flaky_bot import FlakyRead

__all__ = ["die_in_place"]  # a fixture the tests below use, from tests.engine_setup

TASK = "survey the workspace"
BIG = "x" * 30_000
"""A tool output past the default output limit (16,000 characters): previewed, kept whole."""
OUTPUT_ID = re.compile(r"out_[0-9a-f]{12}")


class BigRead:
    """A read-only tool whose output is :data:`BIG`."""

    spec = ToolSpec(
        name="big_read",
        description="Reads a lot.",
        input_schema={"type": "object"},
        kind=ToolKind.READ_ONLY,
    )

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput(content=BIG, note="read a lot")


SCRIPT: list[dict[str, Any]] = [
    {"calls": [{"name": "big_read"}]},  # in the survey: kept in the scope's memory
    {"calls": [{"name": "flaky_read", "input": {"fails": 1, "counter": "c"}}]},
    {"calls": [{"name": "list_files"}]},  # in the report, the branch's case
    {"calls": [{"name": "big_read"}]},  # after them: kept in the store
    finish("Surveyed."),
]
SCOPE_TURNS = 2


def capped_in(deps: RunDeps, scope_id: str, turns: int, outcome: str) -> Loop:
    """Model turns and their tool steps inside ``scope_id``, at most ``turns`` of them;
    then the scope is left with ``outcome``."""

    async def leave(run: Run) -> Outcome:
        return Outcome(Flow.DONE, outcome)

    return Loop(
        Sequence(ToolSteps(deps), Running(), ContextNoted(deps), ModelStep(deps)),
        until=lambda run: run.snap.status.lifecycle is not Lifecycle.RUNNING,
        cap=lambda run: turns,
        count=lambda run: turns_in_scope(run.snap.journal, scope_id),
        on_cap=Do("leave", leave),
    )


def surveyed(scope_cache: InMemoryOutputs) -> Any:
    """The composition: the survey scope; on its outcome ``surveyed``, a report scope (a
    branch: an outcome it does not name goes straight on); then the agent."""

    def compose(deps: RunDeps, inbox: Inbox | None) -> Step:
        survey = capped_in(deps, "survey", SCOPE_TURNS, "surveyed")
        report = capped_in(deps, "report", 1, "reported")
        scoped = InScope(deps, "survey", TASK, survey, context=TaskTree(), cache=scope_cache)
        cases = {
            "surveyed": lambda _: InScope(deps, "report", "report what was found", report),
            "abandoned": lambda _: Do("never", lambda run: pytest.fail("not chosen")),
        }
        return Sequence(Branch(scoped, cases), agent(deps, inbox))

    return compose


def setup(tmp_path: Path) -> Setup:
    """A conversation whose engines compose :func:`surveyed`: the root scope keeps outputs
    in the store and retries a flaky read once a second, twice at most."""
    made = Setup(tmp_path, Fixed(attempts=2, delay_seconds=1.0), SCRIPT, tools=[])
    scope_cache = InMemoryOutputs(3600, ManualClock())
    made.tools = [BigRead(), FlakyRead(), ListFiles()]
    made.options = {
        "compose": surveyed(scope_cache),
        "outputs": PersistentOutputs(made.store.outputs),
    }
    made.scope_cache = scope_cache  # type: ignore[attr-defined]
    return made


def said(setup: Setup) -> list[Any]:
    """What the model received, request by request, output ids written as ``out_ID``."""
    return [OUTPUT_ID.sub("out_ID", repr(request.messages)) for request in setup.requests]


def notes_in(request_messages: str) -> list[str]:
    return re.findall(r"\[threadbot: [^\]]*\][^'\"]*", request_messages)


@pytest.fixture
async def straight(tmp_path: Path) -> Setup:
    made = setup(tmp_path / "straight")
    await made.mention(made.engine())
    return made


def test_a_child_scope_takes_what_it_does_not_name_from_its_parent() -> None:
    cache = object()
    root = Scope(context=Flat(), cache=cache, retry=Fixed(attempts=3))  # type: ignore[arg-type]
    child = root.child("a", "first", context=TaskTree())
    assert (child.cache, child.retry, child.context.name) == (cache, root.retry, "task_tree")
    grandchild = child.child("b", "second", cache=None, retry=NoRetry())
    assert grandchild.context is child.context
    assert (grandchild.cache, grandchild.retry) == (None, NoRetry())
    assert grandchild.path == ("first", "second") and root.path == ()
    assert child.child("c", "third", cache=INHERIT).cache is cache


async def test_the_scope_shows_its_task_path_and_keeps_its_own_cache(straight: Setup) -> None:
    snap = await straight.snapshot()
    assert snap.status.lifecycle is Lifecycle.DONE
    kinds = [r.entry.kind for r in snap.journal]
    entered, left = kinds.index("scope_entered"), kinds.index("scope_left")
    assert kinds[entered:left].count("assistant_turn") == SCOPE_TURNS
    opened = [r.entry for r in snap.journal if isinstance(r.entry, ScopeEntered)]
    closed = [r.entry for r in snap.journal if isinstance(r.entry, ScopeLeft)]
    assert [(e.scope, e.parent, e.task) for e in opened] == [
        ("survey", "run", TASK),
        ("report", "run", "report what was found"),  # the branch's case for "surveyed"
    ]
    assert [(e.scope, e.outcome) for e in closed] == [
        ("survey", "surveyed"),
        ("report", "reported"),
    ]

    requests = [repr(r.messages) for r in straight.requests]
    assert len(requests) == 5
    path = f"Task path: check it > {TASK}"
    assert [n for n in notes_in(requests[0]) if "Task path" in n] == [
        f"[threadbot: task tree, scope survey] {path}"
    ]
    for later in requests[1:]:  # journaled once, never rewritten, never restated
        assert later.count(path) == 1

    results = [r.entry for r in snap.journal if isinstance(r.entry, ToolResultEntry)]
    inside, outside = (OUTPUT_ID.findall(results[i].content)[0] for i in (0, 3))
    assert await straight.scope_cache.retrieve(snap.id, inside) == BIG  # type: ignore[attr-defined]
    assert await straight.store.outputs.get_output(snap.id, inside) is None
    assert await straight.store.outputs.get_output(snap.id, outside) == BIG

    flaky = results[1]
    assert flaky.content.startswith("ok on try 2") and "[after 2 attempts" in flaky.content
    assert straight.sleeps == [1.0]  # the parent's policy, inherited


FAULTS = [
    *(f"after_scope_entered:{k}" for k in range(1, 3)),
    *(f"after_model_response:{k}" for k in range(1, 5)),
    *(f"after_tool_result:{k}" for k in range(1, 5)),
]


@pytest.mark.parametrize("fault", FAULTS)
async def test_a_run_killed_in_or_after_the_scope_ends_as_the_straight_run(
    tmp_path: Path, fault: str, straight: Setup, die_in_place: None
) -> None:
    from core.faults import Faults

    made = setup(tmp_path / "killed")
    with pytest.raises(Killed):
        await made.mention(made.engine(Faults(fault)))
    asked_before = len(made.requests)
    await made.engine().run(made.cid)

    snap, whole = await made.snapshot(), await straight.snapshot()
    assert [r.entry.kind for r in snap.journal] == [r.entry.kind for r in whole.journal]
    normal = lambda j: OUTPUT_ID.sub("out_ID", repr(build_messages(j)))  # noqa: E731
    assert normal(snap.journal) == normal(whole.journal)
    assert said(made)[asked_before:] == said(straight)[asked_before:]
    assert snap.status.lifecycle is Lifecycle.DONE
    assert made.sleeps == straight.sleeps
