"""Workflows run by the engine: each kind of state, the choice at the start, and keeping it.

Engine-level stories on a memory store with the real ``run_command`` (no sandbox): what
the thread is told (the outbox's texts), what the journal and the requests hold, how
many times the check ran (docs/architecture.md, "Workflows").
"""

from __future__ import annotations

import stat
from datetime import timedelta
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from conversations.events import PlatformRef, PostReply
from conversations.render import render_event
from conversations.store.memory import MemoryStore
from core.context import CountingIds, ManualClock, RunContext
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.run.engine import Engine
from core.run.settings import EngineSettings
from core.tools.base import Toolbox
from core.tools.command import RunCommand
from core.tools.control import control_tools
from core.tools.workspace import ListFiles, ReadFile, WriteFile
from core.tracing import Tracing
from core.vocabulary.entries import AssistantTurn, ContextNote, StepEntered, WorkflowChosen
from core.vocabulary.errors import ModelError
from core.vocabulary.inputs import Approve, Choose, DecideOutcome, ThreadMessage
from core.vocabulary.lifecycle import Lifecycle, WaitKind
from core.vocabulary.people import Person
from core.vocabulary.requests import PlanApproval, RequestState, WaitRequest
from core.workflows.loading import Source, load, shipped_sources
from core.workflows.model import StateKind

ALICE = Person(id="U0ALICE001", name="alice")


def finish(answer: str) -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("finish", {"answer": answer})])


def command(line: str) -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("run_command", {"command": line})])


class Bot:
    """An engine over a memory store, one conversation at a time, a clock the test moves."""

    def __init__(
        self,
        tmp_path: Path,
        model: ScriptedModel,
        *,
        store: MemoryStore | None = None,
        extra: list[Source] | None = None,
        clock: ManualClock | None = None,
        tracing: Tracing | None = None,
        **settings: object,
    ) -> None:
        self.tmp_path = tmp_path
        self.store = store or MemoryStore(render=render_event)
        self.model = model
        self.clock = clock or ManualClock()
        self.library = load([*shipped_sources(), *(extra or [])])
        settings.setdefault("workflows", self.library.names)  # all of them, unless told
        self.engine = Engine(
            journal=self.store.journal,
            model=model,
            toolbox=Toolbox([*control_tools(), ListFiles(), ReadFile(), WriteFile(), RunCommand()]),
            workflows=self.library,
            settings=EngineSettings(**settings),  # type: ignore[arg-type]
            context=RunContext(clock=self.clock, ids=CountingIds("req")),
            tracing=tracing,
        )
        self.cid = ""

    async def mention(self, text: str, key: str = "m-1") -> str:
        cid = await self.store.threads.open_conversation(
            delivery_key=key,
            binding=PlatformRef(platform="console", channel="c", thread=key),
            requester=ALICE,
            workspace_root=self.tmp_path / "workspaces",
            position="",
        )
        assert cid is not None
        self.cid = cid
        await self.engine.start(cid, ThreadMessage(text=text, author=ALICE))
        return cid

    async def approve_plan(self) -> None:
        snap = await self.store.journal.load(self.cid)
        (plan,) = [r for r in snap.open_requests if isinstance(r, PlanApproval)]
        await self.engine.decide(self.cid, Approve(request_id=plan.id, by=ALICE))
        await self.engine.run(self.cid)

    async def texts(self) -> list[str]:
        return [
            row.action.text
            for row in await self.store.outbox.rows(self.cid)
            if isinstance(row.action, PostReply)
        ]

    async def steps(self) -> list[str]:
        snap = await self.store.journal.load(self.cid)
        return [r.entry.position for r in snap.journal if isinstance(r.entry, StepEntered)]


def counting_check(tmp_path: Path, passes_at: int | None) -> str:
    """A check command that fails until its ``passes_at``-th run (None: always fails),
    printing which run it is; its count is kept beside the workspaces."""
    script = tmp_path / "check.sh"
    count = tmp_path / "runs"
    passing = "exit 1" if passes_at is None else f'[ "$n" -ge {passes_at} ]'
    script.write_text(
        f'n=$(( $(cat {count} 2>/dev/null || echo 0) + 1 )); echo "$n" > {count}\n'
        f'echo "check run $n"\n{passing}\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return f"sh {script}"


def runs_of(tmp_path: Path) -> int:
    return int((tmp_path / "runs").read_text())


async def test_validate_fix_runs_the_check_fixes_until_it_passes_and_reports_its_output(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [
            command("echo one >> fixes.txt"),
            finish("fixed the first thing"),
            command("echo two >> fixes.txt"),
            finish("fixed the second thing"),
        ]
    )
    bot = Bot(tmp_path, model, check_command=counting_check(tmp_path, passes_at=3))

    await bot.mention("make the check pass workflow=validate-fix")
    snap = await bot.store.journal.load(bot.cid)
    assert snap.status.wait is WaitKind.PLAN_APPROVAL  # the first state is the approval
    assert snap.requests[0].prompt.splitlines()[0] == f"Run the check: `{bot_check(tmp_path)}`"
    assert model.requests == []  # no model call before the approval

    await bot.approve_plan()

    snap = await bot.store.journal.load(bot.cid)
    assert snap.status.lifecycle is Lifecycle.DONE
    assert runs_of(tmp_path) == 3
    assert await bot.steps() == [
        "approval", "check", "fix", "check", "fix", "check", "passed",
    ]  # fmt: skip
    assert len(model.requests) == 4  # two fixes of two turns, nothing else
    answer = (await bot.texts())[-1]
    assert answer.startswith(f"✅ `{bot_check(tmp_path)}` passes.")
    assert "check run 3" in answer
    assert "workflow validate-fix" in answer  # the footer names the workflow
    assert in_workspace(snap.workspace, "fixes.txt") == "one\ntwo\n"


def in_workspace(workspace: str, name: str) -> str | None:
    """The text of file ``name`` in ``workspace`` (None: there is none)."""
    path = Path(workspace) / name
    return path.read_text() if path.exists() else None


def bot_check(tmp_path: Path) -> str:
    return f"sh {tmp_path / 'check.sh'}"


async def test_validate_fix_stops_at_its_cap_and_reports_the_last_failure(tmp_path: Path) -> None:
    model = ScriptedModel(
        [turn for n in range(3) for turn in (command(f"echo {n} >> f"), finish(f"fix {n}"))]
    )
    bot = Bot(tmp_path, model, check_command=counting_check(tmp_path, passes_at=None))

    await bot.mention("workflow=validate-fix please")
    await bot.approve_plan()

    snap = await bot.store.journal.load(bot.cid)
    assert snap.status.lifecycle is Lifecycle.FAILED
    assert runs_of(tmp_path) == 4  # the check's max_visits
    assert (await bot.steps())[-1] == "still_failing"
    answer = (await bot.texts())[-1]
    assert answer.startswith(f"❌ `{bot_check(tmp_path)}` still fails after 4 runs.")
    assert "check run 4" in answer
    assert len(model.requests) == 6


async def test_a_rejected_fixed_plan_runs_nothing(tmp_path: Path) -> None:
    from core.vocabulary.inputs import Reject

    bot = Bot(tmp_path, ScriptedModel([]), check_command=counting_check(tmp_path, passes_at=1))
    await bot.mention("workflow=validate-fix")
    snap = await bot.store.journal.load(bot.cid)
    await bot.engine.decide(bot.cid, Reject(request_id=snap.requests[0].id, by=ALICE))
    await bot.engine.run(bot.cid)

    assert not (tmp_path / "runs").exists()
    assert (await bot.steps())[-1] == "not_run"
    assert (await bot.texts())[-1].startswith("✅ Nothing was run: the plan was rejected.")


ERRORING = """
[workflow]
name = "careful"
start = "work"
error = "gave_up"

[states.work]
kind = "agent"
tools = ["read_only", "finish"]
instructions = "Look and answer."

[states.work.on]
finished = "done"

[states.done]
kind = "end"

[states.gave_up]
kind = "end"
status = "failed"
message = "The model failed; the workflow stopped at its error state."
"""


async def test_a_run_whose_model_errors_takes_the_error_transition(tmp_path: Path) -> None:
    model = ScriptedModel([ScriptedTurn(error=ModelError("the model is gone", retryable=False))])
    bot = Bot(
        tmp_path,
        model,
        extra=[Source("careful.toml", ERRORING)],
        workflow="careful",
    )

    await bot.mention("what is here?")

    snap = await bot.store.journal.load(bot.cid)
    assert snap.position == "gave_up"
    assert snap.status.lifecycle is Lifecycle.FAILED
    texts = await bot.texts()
    assert any("error: the model is gone" in t for t in texts)
    assert texts[-1].startswith("❌ The model failed; the workflow stopped at its error state.")


async def test_chat_answers_with_read_only_tools_and_no_plan(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("write_file", {"path": "x", "content": "y"})]),
            finish("It is empty."),
        ]
    )
    bot = Bot(tmp_path, model)

    await bot.mention("workflow=chat what is in here?")

    snap = await bot.store.journal.load(bot.cid)
    assert snap.status.lifecycle is Lifecycle.DONE
    assert not any(isinstance(r, PlanApproval) for r in snap.requests)
    assert in_workspace(snap.workspace, "x") is None  # the mutating call was denied
    assert model.requests[0].messages[0]["content"][-1]["text"] == "alice: what is in here?"
    answer = (await bot.texts())[-1]
    assert answer.startswith("✅ It is empty.") and "workflow chat" in answer


async def test_a_workflow_the_channel_does_not_allow_is_refused_with_the_allowed_ones(
    tmp_path: Path,
) -> None:
    bot = Bot(tmp_path, ScriptedModel([]), workflows=("chat",))

    await bot.mention("workflow=validate-fix fix it")

    snap = await bot.store.journal.load(bot.cid)
    assert snap.status.lifecycle is Lifecycle.IDLE
    assert not any(isinstance(r.entry, WorkflowChosen) for r in snap.journal)
    assert await bot.texts() == [
        "Workflow `validate-fix` is not allowed in this channel; ask for one of: default, "
        "chat (workflow=NAME in the mention). Nothing was started."
    ]


def asking(version: str) -> str:
    return f"""
[workflow]
name = "asking"
start = "ask"

[states.ask]
kind = "human"
ask = "question"
prompt = "Which file, {version}?"

[states.ask.on]
answered = "work"

[states.work]
kind = "agent"
tools = ["read_only", "finish"]
instructions = "Instructions {version}."

[states.work.on]
finished = "done"

[states.done]
kind = "end"
"""


async def test_a_conversation_keeps_its_workflow_when_the_file_changes_and_the_bot_restarts(
    tmp_path: Path,
) -> None:
    first = Bot(tmp_path, ScriptedModel([]), extra=[Source("a.toml", asking("v1"))])
    await first.mention("workflow=asking read a file")
    assert (await first.texts())[-1].startswith("❓ Which file, v1?")

    model = ScriptedModel([finish("read it")])
    second = Bot(tmp_path, model, store=first.store, extra=[Source("a.toml", asking("v2"))])
    second.cid = first.cid
    await second.engine.reply(first.cid, ThreadMessage(text="notes.md", author=ALICE))

    snap = await second.store.journal.load(second.cid)
    assert snap.status.lifecycle is Lifecycle.DONE
    said = [b["text"] for m in model.requests[0].messages for b in m["content"] if "text" in b]
    assert "[threadbot: the work step] Instructions v1." in said
    assert not any("v2" in text for text in said)


WAITING = """
[workflow]
name = "later"
start = "approve"

[states.approve]
kind = "human"
ask = "approve"
steps = ["Wait an hour", "Then answer"]

[states.approve.on]
approved = "pause"
rejected = "done"

[states.pause]
kind = "wait"
duration = "1h"
description = "Waiting an hour."

[states.pause.on]
timeout = "answer"

[states.answer]
kind = "agent"
tools = ["read_only", "finish"]
instructions = "The hour is over: answer."

[states.answer.on]
finished = "done"

[states.done]
kind = "end"
"""


async def test_a_wait_is_a_timer_in_the_store_that_fires_once(tmp_path: Path) -> None:
    model = ScriptedModel([finish("an hour later")])
    bot = Bot(tmp_path, model, extra=[Source("later.toml", WAITING)])
    await bot.mention("workflow=later")
    await bot.approve_plan()

    snap = await bot.store.journal.load(bot.cid)
    assert snap.status.wait is WaitKind.TIMER
    (timer,) = snap.open_requests
    assert isinstance(timer, WaitRequest)
    assert timer.expires_at == bot.clock() + timedelta(hours=1)
    assert timer.remind_at is None  # no reminder for a timer

    bot.clock.advance(3600)
    assert await bot.engine.expire(bot.cid, timer.id)
    assert not await bot.engine.expire(bot.cid, timer.id)  # fired once

    snap = await bot.store.journal.load(bot.cid)
    assert snap.status.lifecycle is Lifecycle.DONE
    assert [r.state for r in snap.requests if isinstance(r, WaitRequest)] == [RequestState.EXPIRED]
    assert (await bot.texts())[-1].startswith("✅ an hour later")


CHOOSING = """
[workflow]
name = "choosing"
start = "pick"

[states.pick]
kind = "human"
ask = "choose"
prompt = "Which way?"
options = ["left", "right"]

[states.pick.on]
left = "went_left"
right = "went_right"

[states.went_left]
kind = "end"
message = "Went left."

[states.went_right]
kind = "end"
message = "Went right."
"""


@pytest.mark.parametrize(("answer", "went"), [("2", "Went right."), ("Left", "Went left.")])
async def test_a_choice_goes_where_the_answer_names_by_number_or_word(
    tmp_path: Path, answer: str, went: str
) -> None:
    bot = Bot(tmp_path, ScriptedModel([]), extra=[Source("c.toml", CHOOSING)])
    await bot.mention("workflow=choosing")
    await bot.engine.reply(bot.cid, ThreadMessage(text="three?", author=ALICE))
    snap = await bot.store.journal.load(bot.cid)
    assert snap.status.wait is WaitKind.QUESTION  # asked again: no option named

    await bot.engine.reply(bot.cid, ThreadMessage(text=answer, author=ALICE))

    assert (await bot.texts())[-1].startswith(f"✅ {went}")
    turns = [
        r.entry
        for r in (await bot.store.journal.load(bot.cid)).journal
        if isinstance(r.entry, AssistantTurn)
    ]
    assert [t.workflow for t in turns] == ["pick", "pick"]  # the workflow's own questions


async def test_a_choice_by_button_or_reaction_goes_where_its_option_leads(
    tmp_path: Path,
) -> None:
    bot = Bot(tmp_path, ScriptedModel([]), extra=[Source("c.toml", CHOOSING)])
    await bot.mention("workflow=choosing")
    snap = await bot.store.journal.load(bot.cid)
    [question] = [r for r in snap.requests if r.state is RequestState.OPEN]

    choice = Choose(request_id=question.id, by=ALICE, option=2)
    assert await bot.engine.decide(bot.cid, choice) is DecideOutcome.DECIDED
    await bot.engine.run(bot.cid)

    assert (await bot.texts())[-1].startswith("✅ Went right.")
    again = Choose(request_id=question.id, by=ALICE, option=1)
    assert await bot.engine.decide(bot.cid, again) is DecideOutcome.ALREADY_DECIDED


def test_the_shipped_workflows_load_with_their_kinds() -> None:
    library = load(shipped_sources())
    assert library.names == ("default", "chat", "validate-fix")
    kinds = {n: s.kind for n, s in library["validate-fix"].states.items()}
    assert kinds["approval"] is StateKind.HUMAN and kinds["check"] is StateKind.ACTION


async def test_a_workflow_that_needs_the_check_command_is_refused_without_it(
    tmp_path: Path,
) -> None:
    bot = Bot(tmp_path, ScriptedModel([]))

    await bot.mention("workflow=validate-fix")

    snap = await bot.store.journal.load(bot.cid)
    assert snap.status.lifecycle is Lifecycle.IDLE
    assert await bot.texts() == [
        "Workflow `validate-fix` needs the `check_command` setting, which is not set for "
        "this channel. Nothing was started."
    ]


def looking(context: str) -> str:
    return f"""
[workflow]
name = "looking"
start = "look"
{context}

[states.look]
kind = "agent"
tools = ["read_only", "finish"]
instructions = "Look and answer."

[states.look.on]
finished = "done"

[states.done]
kind = "end"
"""


@pytest.mark.parametrize(
    ("table", "noted"),
    [("", []), ('[workflow.context]\nstrategy = "task_tree"', ["task_tree"])],
)
async def test_a_workflow_sets_the_context_strategy_of_its_runs(
    tmp_path: Path, table: str, noted: list[str]
) -> None:
    bot = Bot(tmp_path, ScriptedModel([finish("seen")]), extra=[Source("l.toml", looking(table))])

    await bot.mention("workflow=looking what is here?")

    snap = await bot.store.journal.load(bot.cid)
    assert snap.status.lifecycle is Lifecycle.DONE
    assert [r.entry.strategy for r in snap.journal if isinstance(r.entry, ContextNote)] == noted


TIMING_OUT = """
[workflow]
name = "asking_once"
start = "ask"

[states.ask]
kind = "human"
ask = "question"
prompt = "Anything to add?"
timeout = "30m"

[states.ask.on]
answered = "said"
timeout = "silent"

[states.said]
kind = "end"
message = "Thanks."

[states.silent]
kind = "end"
message = "Nobody answered within 30 minutes; going on without it."
"""


async def test_a_question_with_a_timeout_transition_moves_on_when_nobody_answers(
    tmp_path: Path,
) -> None:
    bot = Bot(tmp_path, ScriptedModel([]), extra=[Source("t.toml", TIMING_OUT)])
    await bot.mention("workflow=asking_once")
    snap = await bot.store.journal.load(bot.cid)
    (question,) = snap.open_requests
    assert question.expires_at == bot.clock() + timedelta(minutes=30)  # the state's timeout

    bot.clock.advance(30 * 60)
    assert await bot.engine.expire(bot.cid, question.id)

    snap = await bot.store.journal.load(bot.cid)
    assert snap.status.lifecycle is Lifecycle.DONE  # moved on, not cancelled
    assert snap.position == "silent"
    texts = await bot.texts()
    assert texts[-1].startswith("✅ Nobody answered within 30 minutes; going on without it.")


NESTED = """
[workflow]
name = "nested"
start = "approve"

[states.approve]
kind = "human"
ask = "approve"
steps = ["Change the file", "Check it"]
tools = ["run_command"]

[states.approve.on]
approved = "work"
rejected = "over"

[states.work]
kind = "agent"
tools = ["all"]
mutating = true
instructions = "Make the change."

[states.work.on]
finished = { if = "changed_files", then = "checked", else = "over" }

[states.checked]
kind = "workflow"
workflow = "validate-fix"

[states.checked.on]
passed = "over"
still_failing = "over"
not_run = "over"

[states.over]
kind = "end"
message = "Over."
"""


async def test_a_sub_workflow_runs_inlined_and_a_guard_decides_by_its_condition(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([command("echo x > changed.txt"), finish("changed it")])
    bot = Bot(
        tmp_path,
        model,
        extra=[Source("n.toml", NESTED)],
        check_command=counting_check(tmp_path, passes_at=1),
    )
    await bot.mention("workflow=nested")
    await bot.approve_plan()  # the outer plan
    await bot.approve_plan()  # validate-fix's own, inside

    assert runs_of(tmp_path) == 1
    assert await bot.steps() == [
        "approve", "work", "checked/approval", "checked/check", "over",
    ]  # fmt: skip
    assert (await bot.texts())[-1].startswith("✅ Over.")


async def test_each_state_entered_is_a_span_with_the_workflow_and_the_state(
    tmp_path: Path,
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel([command("echo one >> fixes.txt"), finish("fixed")])
    bot = Bot(
        tmp_path,
        model,
        tracing=Tracing(provider=provider),
        check_command=counting_check(tmp_path, passes_at=2),
    )
    await bot.mention("workflow=validate-fix")
    await bot.approve_plan()

    entered = [
        (
            span.attributes["threadbot.workflow"],
            span.attributes["threadbot.workflow.state"],
            span.attributes["threadbot.workflow.state.kind"],
        )
        for span in exporter.get_finished_spans()
        if span.name == "threadbot.workflow.state" and span.attributes is not None
    ]
    provider.shutdown()
    assert entered == [
        ("validate-fix", "approval", "human"),
        ("validate-fix", "check", "action"),
        ("validate-fix", "fix", "agent"),
        ("validate-fix", "check", "action"),
        ("validate-fix", "passed", "end"),
    ]


async def test_a_check_command_changed_after_the_plan_runs_the_one_approved(
    tmp_path: Path,
) -> None:
    first = Bot(tmp_path, ScriptedModel([]), check_command="echo the-approved-check")
    await first.mention("workflow=validate-fix")
    assert "`echo the-approved-check`" in (await first.texts())[-1]

    # The channel's setting changes and the bot restarts before anyone approves.
    second = Bot(tmp_path, ScriptedModel([]), store=first.store, check_command="echo another")
    second.cid = first.cid
    await second.approve_plan()

    texts = await second.texts()
    assert not any("another" in text for text in texts)
    assert texts[-1].startswith("✅ `echo the-approved-check` passes.")
    assert "the-approved-check" in texts[-1].split("Its last output:")[1]


ECHOING = """
[workflow]
name = "echoing"
start = "approve"

[states.approve]
kind = "human"
ask = "approve"
steps = ["Say what was asked"]

[states.approve.on]
approved = "said"
rejected = "said"

[states.said]
kind = "end"
message = "You asked: {request}"
"""


async def test_a_request_that_holds_a_placeholder_is_shown_as_it_was_written(
    tmp_path: Path,
) -> None:
    bot = Bot(
        tmp_path,
        ScriptedModel([]),
        extra=[Source("echoing.toml", ECHOING)],
        check_command="make secret-check",
    )
    await bot.mention("workflow=echoing what is {check_command} after {runs}?")
    await bot.approve_plan()

    answer = (await bot.texts())[-1]
    assert answer.startswith("✅ You asked: what is {check_command} after {runs}?\n")


LOOPING = """
[workflow]
name = "looping"
start = "a"

[states.a]
kind = "agent"
tools = ["read_only", "finish"]
instructions = "Answer once more."
max_visits = 3

[states.a.on]
finished = "a"
cap = "capped"

[states.capped]
kind = "end"
status = "failed"
message = "Capped after three answers."
"""


async def test_a_state_that_leads_to_itself_is_entered_again_until_its_cap(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([finish(f"answer {n}") for n in range(1, 5)])
    bot = Bot(tmp_path, model, extra=[Source("loop.toml", LOOPING)])

    await bot.mention("workflow=looping")

    assert len(model.requests) == 3  # the start's visit counts as one of the three
    assert await bot.steps() == ["a", "a", "a", "capped"]
    texts = await bot.texts()
    assert any("answer 3" in text for text in texts)  # the last answer, as a note
    assert texts[-1].startswith("❌ Capped after three answers.")  # the end's own message


SHELLING = """
[workflow]
name = "shelling"
start = "approve"

[states.approve]
kind = "human"
ask = "approve"
steps = ["Write a note"]
tools = ["write_file"]

[states.approve.on]
approved = "echo"
rejected = "over"

[states.echo]
kind = "action"
command = "echo {request} > said.txt"

[states.echo.on]
passed = "over"
failed = "over"

[states.over]
kind = "end"
message = "Done."
"""


async def test_the_fixed_plan_shows_what_the_actions_run_and_the_request_is_never_shell(
    tmp_path: Path,
) -> None:
    bot = Bot(tmp_path, ScriptedModel([]), extra=[Source("shelling.toml", SHELLING)])
    await bot.mention("workflow=shelling hi; touch injected; echo $(id -u)")

    snap = await bot.store.journal.load(bot.cid)
    (plan,) = snap.requests
    steps = plan.prompt.splitlines()
    assert steps[0] == "Write a note"
    assert steps[1] == "Run `echo 'hi; touch injected; echo $(id -u)' > said.txt`"
    await bot.approve_plan()

    snap = await bot.store.journal.load(bot.cid)
    assert in_workspace(snap.workspace, "injected") is None
    assert in_workspace(snap.workspace, "said.txt") == "hi; touch injected; echo $(id -u)\n"


@pytest.mark.parametrize(
    "text",
    ["*workflow=chat* hi", "_workflow=chat_ hi", "(workflow=chat) hi", "workflow=“chat” hi"],
)
def test_an_ask_for_a_workflow_in_marks_or_quotes_is_read(text: str) -> None:
    from core.run.workflow import asked_for

    assert asked_for(text) == ("chat", "hi")


FOR_CHECKS = """
[workflow]
name = "checked"
start = "first"

[states.first]
kind = "agent"
tools = ["read_only", "finish"]

[states.first.on]
finished = "waiting"

[states.waiting]
kind = "wait"
person = true
timeout = "{timeout}"

[states.waiting.on]
answered = "approval"
timeout = "over"

[states.approval]
kind = "human"
ask = "plan"

[states.approval.on]
approved = "over"
rejected = "over"

[states.over]
kind = "end"
"""


def test_what_would_fail_at_run_time_is_refused_when_the_file_is_loaded() -> None:
    from core.workflows.loading import WorkflowErrors

    with pytest.raises(WorkflowErrors) as raised:
        load([*shipped_sources(), Source("c.toml", FOR_CHECKS.replace("{timeout}", "2h"))])
    assert [str(e) for e in raised.value.errors] == [
        "c.toml:13: a wait for a person needs a prompt",
        "c.toml:19: 'approval' waits on the model's plan (ask = \"plan\"): only a "
        'plan_proposed transition leads there (use ask = "approve" with steps for a plan '
        "of the workflow's own)",
    ]
    with pytest.raises(WorkflowErrors) as raised:
        load([*shipped_sources(), Source("c.toml", FOR_CHECKS.replace("{timeout}", "9999d"))])
    assert "is longer than a year (366d)" in str(raised.value)
