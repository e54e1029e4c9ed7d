"""The agent as a composition: the primitives, the typed model decision, and a loop
count derived from the journal (docs/architecture.md, "The agent as a composition").

The primitives are checked alone with steps that record what ran; the agent built
from them is checked through the bot: a run killed at every model turn and
restarted stops at its turn cap exactly where a run that went straight through
stops, and read-only calls run side by side have their results journaled in the
model's order, whichever finished first.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from core.models.base import ToolKind
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.run.agent import TurnCount, turns_in_step
from core.run.compose import CONTINUE, DONE, WAIT, Branch, Flow, Loop, Outcome, Sequence
from core.run.decision import ModelDecision
from core.run.state import Run
from core.vocabulary.entries import AssistantTurn, JournalRecord, ToolCall, ToolResultEntry
from tests.console_process import Bot, command, plan
from tests.harness import Chat


class Recorded:
    """A step that appends its name to ``ran`` and returns ``outcome``."""

    def __init__(self, name: str, ran: list[str], outcome: Outcome = CONTINUE) -> None:
        self.name = name
        self._ran = ran
        self._outcome = outcome

    async def go(self, run: Run) -> Outcome:
        self._ran.append(self.name)
        return self._outcome


def a_run() -> Run:
    return Run(conversation_id="c1", snapshot=None)


async def test_a_sequence_goes_on_while_its_steps_say_continue() -> None:
    ran: list[str] = []
    steps = Sequence(Recorded("a", ran), Recorded("b", ran, WAIT), Recorded("c", ran))
    assert await steps.go(a_run()) == WAIT
    assert ran == ["a", "b"]
    ran.clear()
    assert await Sequence(Recorded("a", ran), Recorded("c", ran)).go(a_run()) == CONTINUE
    assert ran == ["a", "c"]


async def test_a_loop_stops_at_its_condition_or_its_cap_counted_from_outside() -> None:
    ran: list[str] = []
    rounds: list[int] = []

    class Round:
        async def go(self, run: Run) -> Outcome:
            rounds.append(len(rounds))
            return CONTINUE

    capped = Loop(
        Round(),
        until=lambda run: False,
        cap=lambda run: 3,
        count=lambda run: len(rounds),
        on_cap=Recorded("ask to go on", ran, WAIT),
    )
    assert await capped.go(a_run()) == WAIT
    assert (len(rounds), ran) == (3, ["ask to go on"])

    rounds[:] = [0, 1]  # a loop that restarts where its count says: one round left
    ran.clear()
    assert await capped.go(a_run()) == WAIT
    assert (len(rounds), ran) == (3, ["ask to go on"])

    rounds.clear()
    ran.clear()
    until = Loop(
        Round(),
        until=lambda run: len(rounds) == 2,
        cap=lambda run: 10,
        count=lambda run: len(rounds),
        on_cap=Recorded("never", ran),
    )
    assert await until.go(a_run()) == CONTINUE
    assert (len(rounds), ran) == (2, [])


async def test_a_loop_ends_with_the_first_outcome_that_does_not_go_on() -> None:
    ran: list[str] = []
    loop = Loop(
        Recorded("done", ran, DONE),
        until=lambda run: False,
        cap=lambda run: 5,
        count=lambda run: len(ran),
        on_cap=Recorded("never", ran),
    )
    assert await loop.go(a_run()) == DONE
    assert ran == ["done"]


async def test_a_branch_goes_on_with_the_case_its_outcome_names() -> None:
    ran: list[str] = []
    failed = Outcome(Flow.DONE, "model_failed", reason="overloaded")
    told: list[Outcome] = []

    def handler(outcome: Outcome) -> Recorded:
        told.append(outcome)
        return Recorded("handled", ran, WAIT)

    branch = Branch(Recorded("model", ran, failed), {"model_failed": handler})
    assert await branch.go(a_run()) == WAIT
    assert (ran, told) == (["model", "handled"], [failed])
    ran.clear()
    plain = Branch(Recorded("model", ran, CONTINUE), {"model_failed": handler})
    assert await plain.go(a_run()) == CONTINUE
    assert ran == ["model"]


def test_a_model_turn_reads_as_a_typed_decision_in_the_models_order() -> None:
    kinds = {"read_file": ToolKind.READ_ONLY, "run_command": ToolKind.MUTATING}
    turn = AssistantTurn(
        text="Looking.",
        tool_calls=(
            ToolCall(id="t1", name="read_file", input={"path": "a"}),
            ToolCall(id="t2", name="run_command", input={"command": "ls"}),
        ),
    )
    decision = ModelDecision.of(turn, kinds.__getitem__)
    assert decision.thinking == "Looking."
    assert [(a.call.id, a.kind) for a in decision.actions] == [
        ("t1", ToolKind.READ_ONLY),
        ("t2", ToolKind.MUTATING),
    ]
    assert decision.independent and not decision.answers
    assert decision.order == {"t1": 0, "t2": 1}
    answer = ModelDecision.of(AssistantTurn(text="Done."), kinds.__getitem__)
    assert answer.answers and not answer.independent and answer.thinking == "Done."


def test_the_turn_count_starts_again_when_a_person_gives_the_run_its_work() -> None:
    from datetime import UTC, datetime

    from core.vocabulary.entries import DecisionEntry, UserText
    from core.vocabulary.people import Person
    from core.vocabulary.verdicts import Approved

    alice = Person(id="U1", name="alice")
    entries = [
        UserText(author=alice, text="do it"),
        AssistantTurn(text="plan"),
        DecisionEntry(request_id="r1", verdict=Approved(), by=alice),
        AssistantTurn(text="one"),
        ToolResultEntry(tool_use_id="t1", content="ok"),
        UserText(author=alice, text="by the way", role="note"),
        AssistantTurn(text="two"),
    ]
    at = datetime(2026, 12, 3, tzinfo=UTC)
    journal = tuple(JournalRecord(seq=i + 1, at=at, entry=e) for i, e in enumerate(entries))
    assert turns_in_step(journal) == 2  # a note is not a person giving work
    assert turns_in_step(journal[:3]) == 0
    assert turns_in_step(journal[:2]) == 1

    counted = TurnCount()  # as the journal grows, reading only what was appended
    assert [counted(journal[:k]) for k in range(len(journal) + 1)] == [
        turns_in_step(journal[:k]) for k in range(len(journal) + 1)
    ]
    other = tuple(r.model_copy(update={"seq": r.seq + 10}) for r in journal[3:])
    assert counted(other) == turns_in_step(other) == 2  # not the same journal: again
    assert counted(journal[:2]) == 1


class Probe:
    """A read-only test tool: ``probe_a`` finishes only after ``probe_b`` has finished."""

    def __init__(self, name: str, finished: dict[str, asyncio.Event], after: str | None) -> None:
        from core.models.base import ToolSpec

        self.spec = ToolSpec(
            name=name,
            description="probe",
            input_schema={"type": "object"},
            kind=ToolKind.READ_ONLY,
        )
        self._finished = finished
        self._after = after

    async def run(self, args, ctx):  # type: ignore[no-untyped-def]
        from core.tools.base import ToolOutput

        if self._after:
            await asyncio.wait_for(self._finished[self._after].wait(), 60)
        self._finished[self.spec.name].set()
        return ToolOutput(content=f"{self.spec.name} ok", note=f"{self.spec.name} ran")


async def test_side_by_side_results_are_journaled_in_the_models_order(settings) -> None:
    from bot.app import build
    from bot.engines import default_toolbox
    from core.tools.base import Toolbox
    from tests.test_durable_core import plan as approved_plan

    finished = {"probe_a": asyncio.Event(), "probe_b": asyncio.Event()}
    probes = [Probe("probe_a", finished, "probe_b"), Probe("probe_b", finished, None)]
    toolbox = Toolbox([*default_toolbox(), *probes])
    model = ScriptedModel(
        [
            approved_plan(),
            ScriptedTurn(calls=[ScriptedCall("probe_a", {}), ScriptedCall("probe_b", {})]),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Both ran."})]),
        ]
    )
    app = await build(settings, model=model, toolbox=toolbox)
    try:
        chat = Chat(app)
        await app.start()
        await chat.mention("probe")
        await chat.react(chat.bot_message("📋"))
        await app.hub.settled()
        assert "✅ Both ran." in chat.out.getvalue()
        snap = await chat.snapshot()
        results = [r.entry for r in snap.journal if isinstance(r.entry, ToolResultEntry)]
        probed = [r.content for r in results if snap.tool_calls[r.tool_use_id].name != "finish"]
        assert probed[-2:] == ["probe_a ok", "probe_b ok"]  # b finished first
        out = chat.out.getvalue()
        assert out.index("probe_a ran") < out.index("probe_b ran")
    finally:
        await app.close()


CAPPED = [
    plan("Write the log"),
    *({"calls": [command(f"echo {n} >> log")]} for n in range(1, 7)),
]
"""A plan, then a command per turn: more turns than the cap of 3 lets the run take."""
CAP_INPUT = "write the log\n+✅ 2\n"


def ended(bot: Bot) -> tuple[list[str], str, int, list[tuple]]:
    """What the thread shows, the log, the model turns journaled, where it waits and the
    state of each tool call."""
    from tests.test_restart_differential import thread_text

    turns = bot.query("select count(*) from journal where kind = 'assistant_turn'")[0][0]
    log = (bot.workspace() / "log").read_text()
    waits = bot.query("select lifecycle, wait_kind from conversations")
    calls = bot.query("select name, state from tool_calls order by turn_seq")
    return thread_text(bot), log, turns, waits, calls


@pytest.fixture(scope="module")
def capped_straight(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    bot = Bot(tmp_path_factory.mktemp("capped"), CAPPED, env={"THREADBOT_STEP_TURN_LIMIT": "3"})
    done = bot.run(CAP_INPUT)
    assert done.returncode == 0, done.stderr
    return ended(bot)


def test_a_capped_run_asks_to_go_on_after_its_turns(capped_straight: tuple) -> None:
    text, log, turns, state, calls = capped_straight
    assert (log, turns) == ("1\n2\n", 4)  # the plan, then 3 turns; the third's call waits
    assert state == [("waiting", "continue")]
    assert [s for _, s in calls] == ["done", "done", "done", "approved"]
    assert any("3 model turns" in line for line in text)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_a_run_killed_at_any_turn_stops_at_its_cap_as_the_straight_run(
    tmp_path: Path, k: int, capped_straight: tuple
) -> None:
    bot = Bot(tmp_path, CAPPED, env={"THREADBOT_STEP_TURN_LIMIT": "3"})
    killed = bot.run(CAP_INPUT, fault=f"after_model_response:{k}")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    for _restart in range(3):
        ((lifecycle, wait),) = bot.query("select lifecycle, wait_kind from conversations")
        if lifecycle != "running" and wait != "plan_approval":
            break
        lines = "+✅ 2\n" if wait == "plan_approval" else ""
        assert bot.run(lines).returncode == 0
    assert ended(bot) == capped_straight
