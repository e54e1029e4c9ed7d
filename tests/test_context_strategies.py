"""Context strategies (issue 25): what the model is told of its plan, as journaled notes.

A scripted model runs a plan of three steps through the engine, reporting its progress
with ``report_progress``; the requests it received show the ``task_list`` note as
steps get done, and the ``task_tree`` path, each appended in the user message after
the tool results (never by rewriting an earlier message), and nothing at all under
``flat`` and ``none`` (docs/architecture.md, "Context strategies and notes"). Through
the real Anthropic client, every request still extends the one before for each
strategy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.settings import Settings
from conversations.events import PlatformRef
from conversations.render import render_event
from conversations.store.memory import MemoryStore
from core.contexts import STRATEGIES, StrategyName, TaskTree, note_change
from core.models.base import ModelRequest
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.run.engine import Engine
from core.run.history import build_messages
from core.run.settings import EngineSettings
from core.tools.base import Toolbox
from core.tools.control import control_tools
from core.vocabulary.entries import AssistantTurn, ContextNote
from core.vocabulary.inputs import Approve, ThreadMessage
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.people import Person
from core.workflows import default_workflow
from tests.fakes.anthropic_server import FakeAnthropicServer, tool_use
from tests.harness import Chat
from tests.test_cache_prefix import assert_each_request_extends_the_one_before, running

ALICE = Person(id="U0ALICE001", name="alice")
STEPS = ["Write the log", "Ask for the colour", "Write the report"]


def progress(step: str) -> ScriptedCall:
    return ScriptedCall("report_progress", {"note": f"on {step}", "step": step})


def script() -> list[ScriptedTurn]:
    """A plan of three steps, progress reported (step 2 twice), then the answer."""
    return [
        ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": STEPS})]),
        ScriptedTurn(text="Log written.", calls=[progress("step 2 of 3")]),
        ScriptedTurn(calls=[progress("step 2 of 3")]),
        ScriptedTurn(calls=[progress("3")]),
        ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Done."})]),
    ]


async def opened(
    tmp_path: Path, strategy: str, turns: list[ScriptedTurn]
) -> tuple[MemoryStore, Engine, str, ScriptedModel]:
    """A conversation opened on a memory store, and an engine with ``strategy`` whose model
    plays ``turns``."""
    store = MemoryStore(render=render_event)
    model = ScriptedModel(turns)
    engine = Engine(
        journal=store.journal,
        model=model,
        toolbox=Toolbox(control_tools()),
        settings=EngineSettings(context_strategy=strategy),
    )
    cid = await store.threads.open_conversation(
        delivery_key="k",
        binding=PlatformRef(platform="console", channel="c", thread="t"),
        requester=ALICE,
        workspace_root=tmp_path,
        position=default_workflow().start,
    )
    assert cid is not None
    return store, engine, cid, model


async def planned_run(
    tmp_path: Path, strategy: str, turns: list[ScriptedTurn]
) -> tuple[MemoryStore, str, ScriptedModel]:
    """``turns`` through an engine with ``strategy``: the request, the plan approved by
    alice, the run to its end."""
    store, engine, cid, model = await opened(tmp_path, strategy, turns)
    await engine.start(
        cid, ThreadMessage(text="write the log and the report\nplease", author=ALICE)
    )
    (plan,) = (await store.journal.load(cid)).open_requests
    await engine.decide(cid, Approve(request_id=plan.id, by=ALICE))
    await engine.run(cid)
    assert (await store.journal.load(cid)).status.lifecycle is Lifecycle.DONE
    return store, cid, model


def notes_in(request: ModelRequest) -> list[str]:
    """The threadbot context notes of the newest message of ``request``."""
    return [
        block["text"]
        for block in request.messages[-1]["content"]
        if block.get("type") == "text" and block["text"].startswith("[threadbot: task")
    ]


def task_list(*marks: str) -> str:
    pairs = enumerate(zip(marks, STEPS, strict=True), 1)
    lines = [f"[{mark}] {n}. {step}" for n, (mark, step) in pairs]
    return "[threadbot: task list] Task list (plan v1):\n" + "\n".join(lines)


async def test_a_failed_run_carried_on_keeps_its_task_list(tmp_path: Path) -> None:
    """A run that failed after step 1 and is carried on where it failed (a request by
    someone who may) still carries out its plan: the list goes on from where it was."""
    from core.vocabulary.errors import ModelError

    turns = script()
    turns.insert(2, ScriptedTurn(error=ModelError("the model is down", retryable=False)))
    store, engine, cid, model = await opened(tmp_path, "task_list", turns)
    await engine.start(cid, ThreadMessage(text="write the log and the report", author=ALICE))
    (plan,) = (await store.journal.load(cid)).open_requests
    await engine.decide(cid, Approve(request_id=plan.id, by=ALICE))
    await engine.run(cid)
    assert (await store.journal.load(cid)).status.lifecycle is Lifecycle.FAILED

    await engine.start(cid, ThreadMessage(text="go on", author=ALICE, may_continue=True))

    snap = await store.journal.load(cid)
    assert snap.status.lifecycle is Lifecycle.DONE
    said = [r.entry.text for r in snap.journal if isinstance(r.entry, ContextNote)]
    assert said == [  # each once: the list goes on after the failure, not lost, not repeated
        task_list(">", " ", " ").removeprefix("[threadbot: task list] "),
        task_list("x", ">", " ").removeprefix("[threadbot: task list] "),
        task_list("x", "x", ">").removeprefix("[threadbot: task list] "),
    ]
    assert notes_in(model.requests[-1]) == [task_list("x", "x", ">")]


async def test_task_list_shows_the_plan_steps_pending_and_done_as_they_get_done(
    tmp_path: Path,
) -> None:
    store, cid, model = await planned_run(tmp_path, "task_list", script())

    assert [notes_in(r) for r in model.requests] == [
        [],  # before the plan: nothing to list
        [task_list(">", " ", " ")],  # approved: the first step is in hand
        [task_list("x", ">", " ")],  # "step 2 of 3": step 1 is done
        [],  # step 2 again: nothing changed, nothing said
        [task_list("x", "x", ">")],
    ]
    # Each note comes after the tool results, in the user message, and stays there.
    third = model.requests[2].messages[-1]["content"]
    assert [b["type"] for b in third] == ["tool_result", "text"]
    assert model.requests[4].messages[: len(model.requests[2].messages)] == (
        model.requests[2].messages
    )
    notes = [r.entry for r in (await store.journal.load(cid)).journal]
    assert [n.scope for n in notes if isinstance(n, ContextNote)] == ["run"] * 3


async def test_task_tree_shows_the_path_from_the_request_to_the_step_in_hand(
    tmp_path: Path,
) -> None:
    store, cid, model = await planned_run(tmp_path, "task_tree", script())

    root = "[threadbot: task tree] Task path: write the log and the report"
    assert [notes_in(r) for r in model.requests] == [
        [f"{root}"],  # before the plan: the request alone
        [f"{root} > step 1. Write the log"],
        [f"{root} > step 2. Ask for the colour"],
        [],
        [f"{root} > step 3. Write the report"],
    ]
    # The path note of a step expires when the step is done; a nested scope's task
    # ends the path, its note labelled with the scope.
    snap = await store.journal.load(cid)
    journaled = [r.entry for r in snap.journal if isinstance(r.entry, ContextNote)]
    assert [n.task for n in journaled] == [None, *STEPS]
    change = note_change(snap, TaskTree(), "check", ["check the log"])
    assert change is not None
    (note,) = change.entries
    assert isinstance(note, ContextNote) and note.scope == "check"
    assert note.text == "Task path: write the log and the report > check the log"  # all done


@pytest.mark.parametrize("strategy", ["flat", "none"])
async def test_flat_and_none_tell_the_model_nothing_more(tmp_path: Path, strategy: str) -> None:
    store, cid, model = await planned_run(tmp_path, strategy, script())

    assert [notes_in(r) for r in model.requests] == [[]] * 5
    snap = await store.journal.load(cid)
    assert not any(isinstance(r.entry, ContextNote) for r in snap.journal)
    last = max(i for i, r in enumerate(snap.journal) if isinstance(r.entry, AssistantTurn))
    assert model.requests[-1].messages == build_messages(snap.journal[:last])


PLANNED_TURNS = [
    [tool_use("toolu_01", "list_files", {})],
    [tool_use("toolu_02", "propose_plan", {"steps": STEPS})],
    [tool_use("toolu_03", "write_file", {"path": "log", "content": "one\n"})],
    [tool_use("toolu_04", "report_progress", {"note": "log written", "step": "step 2 of 3"})],
    [tool_use("toolu_05", "read_file", {"path": "log"})],
    [tool_use("toolu_06", "report_progress", {"note": "asked", "step": "step 3 of 3"})],
    [tool_use("toolu_07", "write_file", {"path": "report.md", "content": "blue\n"})],
    [tool_use("toolu_08", "finish", {"answer": "Done."})],
]


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_each_request_extends_the_one_before_whatever_the_strategy(
    sqlite_settings: Settings, strategy: StrategyName
) -> None:
    sqlite_settings.context_strategy = strategy
    async with FakeAnthropicServer(PLANNED_TURNS) as server:
        async with running(sqlite_settings, server) as app:
            chat = Chat(app)
            await chat.mention("write the log and the report")
            await chat.react(chat.bot_message("📋 Plan (v1)"))
            await app.hub.settled()
            assert (await chat.snapshot()).status.lifecycle is Lifecycle.DONE

    bodies = [r.body for r in server.requests]
    assert len(bodies) == len(PLANNED_TURNS) and server.remaining == 0
    assert_each_request_extends_the_one_before(bodies)
    said = [_notes(body) for body in bodies]
    if strategy in ("flat", "none"):
        assert said == [[]] * len(bodies)
    else:
        assert sum(map(len, said)) == (3 if strategy == "task_list" else 4), said


def _notes(body: dict[str, Any]) -> list[str]:
    return [
        b["text"]
        for b in body["messages"][-1]["content"]
        if b.get("type") == "text" and b["text"].startswith("[threadbot: task")
    ]
