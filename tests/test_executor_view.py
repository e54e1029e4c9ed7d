"""The executor's own view of the history (issue 28, Roles): the plan, not the planning.

When ``executor_model`` differs from ``planner_model``, the executor's first request
starts with one user message that holds the request and the approved plan's steps
(then the executing step's instructions), and none of the planning turns: not their
text, not their tool calls, not the plan call's result; its later requests hold its
own turns after that message. With one model (the default, or both roles set to the
same one) the executor reads the whole history, planning included, so the cached
prefix holds. Seen where the model sees it: the requests a scripted model per role
received through the console harness, and the requests the local Messages API fake
received through the real ``anthropic`` client (which answers 400, as the API does,
to a ``tool_use`` without its ``tool_result``). A restart between the approval and
the executor's first request builds the same view, from the journal; the context
strategies' notes are in the view, and a compaction summarizes the view and then
starts it. Built incrementally, the view equals the view built at once.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.app import build
from bot.settings import Settings
from core.models.base import Message
from core.models.scripted import ScriptedCall, ScriptedRoles, ScriptedTurn
from core.run.history import History
from core.vocabulary.entries import (
    AssistantTurn,
    ContextNote,
    DecisionEntry,
    Entry,
    JournalRecord,
    StepEntered,
    ToolCall,
    ToolResultEntry,
    UserText,
)
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.people import Person
from core.vocabulary.requests import PlanApproval, RequestState
from core.vocabulary.verdicts import Approved
from tests.fakes.anthropic_server import (
    FakeAnthropicServer,
    Reply,
    check_tool_results,
    text,
    tool_use,
)
from tests.harness import Chat
from tests.test_cache_prefix import canonical, running, unmarked

REQUEST = "write the notes"
LOOKING = "Looking at the workspace first."
STEPS = ["Write notes.md", "Say it is done"]
PLAN_BLOCK = (
    "[threadbot: plan v1, approved by alice; the planning before it is left out]\n"
    "1. Write notes.md\n2. Say it is done"
)


def planner_turns() -> list[ScriptedTurn]:
    """A look around (its own words and a ``list_files`` call), then the plan."""
    return [
        ScriptedTurn(text=LOOKING, calls=[ScriptedCall("list_files", {"path": "."})]),
        ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": STEPS})]),
    ]


def executor_turns() -> list[ScriptedTurn]:
    return [
        ScriptedTurn(calls=[ScriptedCall("write_file", {"path": "notes.md", "content": "n\n"})]),
        ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Notes written."})]),
    ]


def blocks(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [block for message in messages for block in message["content"]]


def texts(messages: Sequence[Message]) -> list[str]:
    """The text blocks of ``messages``, in order."""
    return [b["text"] for b in blocks(messages) if b.get("type") == "text"]


def tool_uses(messages: Sequence[Message]) -> list[str]:
    """``name id`` of every ``tool_use`` in ``messages``."""
    return [f"{b['name']} {b['id']}" for b in blocks(messages) if b.get("type") == "tool_use"]


def result_ids(messages: Sequence[Message]) -> list[str]:
    return [b["tool_use_id"] for b in blocks(messages) if b.get("type") == "tool_result"]


def well_formed(messages: Sequence[Message]) -> None:
    """User first, roles alternating, every ``tool_use`` answered first in the next message
    and every ``tool_result`` answering the message before (the Messages API's rules,
    https://docs.anthropic.com/en/docs/build-with-claude/tool-use)."""
    assert messages and messages[0]["role"] == "user"
    for before, after in itertools.pairwise(messages):
        assert before["role"] != after["role"], messages
    assert check_tool_results(messages) is None, check_tool_results(messages)


async def run_the_story(settings: Settings) -> tuple[ScriptedRoles, Chat, str]:
    """The request, its plan approved, the run to its answer; the model, the chat and
    what the thread showed."""
    model = ScriptedRoles(planner=planner_turns(), executor=executor_turns())
    app = await build(settings, model=model)
    try:
        await app.start()
        chat = Chat(app)
        await chat.mention(REQUEST)
        await chat.react(chat.bot_message("📋 Plan (v1)"))
        await app.hub.settled()
        assert (await chat.snapshot()).status.lifecycle is Lifecycle.DONE
        return model, chat, chat.out.getvalue()
    finally:
        await app.close()


# --- another model: the executor starts from the plan ------------------------------------


async def test_with_another_model_the_executor_reads_the_request_and_the_plan_not_the_planning(
    settings: Settings,
) -> None:
    settings.planner_model = "claude-plans"
    settings.executor_model = "claude-does"
    model, _chat, shown = await run_the_story(settings)

    assert "✅ Notes written." in shown
    assert next(settings.workspace_root.rglob("notes.md")).read_text() == "n\n"
    planner, executor = model.of("planner").requests, model.of("executor").requests
    assert [r.model for r in planner] == ["claude-plans"] * 2
    assert [r.model for r in executor] == ["claude-does"] * 2
    # The planner read the whole conversation, its step's instructions first.
    assert texts(planner[1].messages)[0].startswith("[threadbot: the planning step]")

    first = executor[0].messages
    well_formed(first)
    assert len(first) == 1  # one user message: the request, the plan, the step
    request, plan, step = texts(first)
    assert (request, plan) == (f"alice: {REQUEST}", PLAN_BLOCK)
    assert step.startswith("[threadbot: the executing step] The plan is approved.")
    # None of the planning: its words, its calls, their results, its step.
    said = json.dumps(first)
    for planning in (LOOKING, "list_files", "propose_plan", "[empty directory]", "planning step"):
        assert planning not in said, planning
    assert "was approved by alice. Carry it out now." not in said  # the plan call's result
    assert tool_uses(first) == [] and result_ids(first) == []

    # Its next request: the same first message, then its own turn and that turn's result.
    second = executor[1].messages
    well_formed(second)
    assert second[0] == first[0]
    assert tool_uses(second) == ["write_file toolu_scripted_executor_0_0"]
    assert result_ids(second) == ["toolu_scripted_executor_0_0"]
    assert "wrote 2 bytes to notes.md" in json.dumps(second[-1])
    assert LOOKING not in json.dumps(second)


async def test_with_one_model_the_executor_reads_the_whole_history(settings: Settings) -> None:
    settings.planner_model = "claude-same"
    settings.executor_model = "claude-same"
    model, _chat, shown = await run_the_story(settings)

    assert "✅ Notes written." in shown
    planner, executor = model.of("planner").requests, model.of("executor").requests
    first = executor[0].messages
    well_formed(first)
    # The planning conversation as the planner last read it, extended: the cached prefix.
    assert first[: len(planner[1].messages)] == planner[1].messages
    assert texts(first)[0].startswith("[threadbot: the planning step]")
    assert LOOKING in texts(first)
    assert tool_uses(first) == [
        "list_files toolu_scripted_planner_0_0",
        "propose_plan toolu_scripted_planner_1_0",
    ]
    assert "Plan v1 was approved by alice. Carry it out now." in json.dumps(first)
    assert PLAN_BLOCK not in texts(first)
    assert executor[1].messages[: len(first)] == first


# --- a restart between the approval and the executor's first request ---------------------


async def test_a_restart_before_the_executor_s_first_request_gives_the_same_view(
    sqlite_settings: Settings,
) -> None:
    sqlite_settings.planner_model = "claude-plans"
    sqlite_settings.executor_model = "claude-does"
    held = ScriptedTurn(gate=asyncio.Event(), calls=[ScriptedCall("list_files", {})])
    before = ScriptedRoles(planner=planner_turns(), executor=[held])
    app = await build(sqlite_settings, model=before)
    try:
        await app.start()
        chat = Chat(app)
        await chat.mention(REQUEST)
        await chat.react(chat.bot_message("📋 Plan (v1)"))
        await held.started.wait()  # the executor was asked; its answer never comes
        thread = chat.thread
    finally:
        await app.close()  # the bot stops with the executor's first call unanswered

    after = ScriptedRoles(executor=executor_turns())
    app = await build(sqlite_settings, model=after)
    try:
        await app.start()  # the run left running goes on
        chat = Chat(app)
        chat.thread = thread
        await app.hub.settled()
        snap = await chat.snapshot()
    finally:
        await app.close()

    assert snap.status.lifecycle is Lifecycle.DONE
    (asked,) = before.of("executor").requests
    again = after.of("executor").requests
    assert len(again) == 2
    # The view built from the stored journal is the one built before the restart.
    assert again[0].messages == asked.messages
    assert texts(asked.messages)[:2] == [f"alice: {REQUEST}", PLAN_BLOCK]
    assert LOOKING not in json.dumps(asked.messages)
    assert after.of("planner").requests == []


# --- what else the view holds: context notes, and a compaction of it ---------------------


async def test_the_task_list_note_is_in_the_executor_s_view(settings: Settings) -> None:
    settings.planner_model = "claude-plans"
    settings.executor_model = "claude-does"
    settings.context_strategy = "task_list"
    model = ScriptedRoles(
        planner=planner_turns(),
        executor=[
            ScriptedTurn(
                calls=[
                    ScriptedCall("write_file", {"path": "notes.md", "content": "n\n"}),
                    ScriptedCall("report_progress", {"step": "step 2 of 2", "note": "written"}),
                ]
            ),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Notes written."})]),
        ],
    )
    app = await build(settings, model=model)
    try:
        await app.start()
        chat = Chat(app)
        await chat.mention(REQUEST)
        await chat.react(chat.bot_message("📋 Plan (v1)"))
        await app.hub.settled()
        snap = await chat.snapshot()
    finally:
        await app.close()

    assert snap.status.lifecycle is Lifecycle.DONE
    notes = [r.entry.text for r in snap.journal if isinstance(r.entry, ContextNote)]
    assert notes == [
        "Task list (plan v1):\n[>] 1. Write notes.md\n[ ] 2. Say it is done",
        "Task list (plan v1):\n[x] 1. Write notes.md\n[>] 2. Say it is done",
    ]
    first, second = (r.messages for r in model.of("executor").requests)
    well_formed(first)
    well_formed(second)
    # The note the run journaled before the executor's first call, after the step.
    assert texts(first)[:2] == [f"alice: {REQUEST}", PLAN_BLOCK]
    assert texts(first)[-1] == f"[threadbot: task list] {notes[0]}"
    # The next one after the turn's results, in the message that holds them.
    assert second[0] == first[0]
    assert result_ids(second[-1:]) == [
        "toolu_scripted_executor_0_0",
        "toolu_scripted_executor_0_1",
    ]
    assert texts(second[-1:]) == [f"[threadbot: task list] {notes[1]}"]


COMPACTED = "Summary: alice asked for a.md; I wrote it and read it back; the list is next."


async def test_a_compaction_summarizes_the_executor_s_view_and_then_starts_it(
    sqlite_settings: Settings,
) -> None:
    sqlite_settings.planner_model = "claude-plans"
    sqlite_settings.executor_model = "claude-does"
    sqlite_settings.context_window = 10_000
    sqlite_settings.compact_at = 0.5  # 5,600 tokens after the executor's third call
    look = [text(LOOKING), tool_use("toolu_01", "list_files", {})]
    script = [
        Reply(look, input_tokens=900),
        Reply([tool_use("toolu_02", "propose_plan", {"steps": STEPS})], input_tokens=1_000),
        Reply(
            [tool_use("toolu_03", "write_file", {"path": "a.md", "content": "a\n"})],
            input_tokens=2_000,
        ),
        Reply([tool_use("toolu_04", "read_file", {"path": "a.md"})], input_tokens=3_000),
        Reply([tool_use("toolu_05", "list_files", {})], input_tokens=5_400, output_tokens=200),
        Reply([text(COMPACTED)], input_tokens=1_200, output_tokens=40),  # the summary's call
        Reply([tool_use("toolu_06", "finish", {"answer": "Done."})], input_tokens=1_300),
    ]
    async with FakeAnthropicServer(script) as server:
        async with running(sqlite_settings, server) as app:
            chat = Chat(app)
            await chat.mention(REQUEST)
            await chat.react(chat.bot_message("📋 Plan (v1)"))
            await app.hub.settled()
            assert (await chat.snapshot()).status.lifecycle is Lifecycle.DONE
            assert "⏳ summarized the oldest part of this conversation" in chat.out.getvalue()

    bodies = [r.body for r in server.requests]
    assert server.remaining == 0
    assert [b["model"] for b in bodies] == ["claude-plans"] * 2 + ["claude-does"] * 5
    for body in bodies:
        well_formed(unmarked(body["messages"]))
    executing, ask, after = bodies[2:5], bodies[5], bodies[6]
    # The summary is asked of the executor's view: its first message, its first turn
    # (the cut keeps the newest two whole) and that turn's result, then the ask.
    view = unmarked(executing[-1]["messages"])
    asked = unmarked(ask["messages"])
    assert canonical(asked[:2]) == canonical(view[:2])
    assert texts(asked[:1])[:2] == [f"alice: {REQUEST}", PLAN_BLOCK]
    assert asked[2]["content"][:-1] == view[2]["content"]
    assert asked[2]["content"][-1]["text"].startswith("[threadbot: this conversation has grown")
    assert tool_uses(asked) == ["write_file toolu_03"]
    # Then the view starts with the summary and holds the two newest turns.
    last = unmarked(after["messages"])
    assert texts(last[:1])[0].endswith(COMPACTED)
    assert texts(last[:1])[1].startswith("[threadbot: the executing step]")
    assert tool_uses(last) == ["read_file toolu_04", "list_files toolu_05"]
    for body in [*executing, ask, after]:
        assert LOOKING not in json.dumps(body["messages"])
        assert "toolu_01" not in json.dumps(body["messages"])


# --- built as the journal grows, the view equals the view built at once ------------------

ALICE = Person(id="U0ALICE001", name="alice")
AT = datetime(2026, 12, 1, tzinfo=UTC)
PLAN = PlanApproval(
    id="plan1",
    tool_use_id="toolu_plan",
    plan_version=1,
    prompt="\n".join(STEPS),
    state=RequestState.DECIDED,
    verdict=Approved(),
)


@st.composite
def turns(draw: st.DrawFn, prefix: str) -> list[Entry]:
    """People's notes, turns with calls and results (in order or not), ids named ``prefix``."""
    entries: list[Entry] = []
    calls: list[str] = []
    for n in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["text", "turn", "result", "result"]))
        if kind == "text":
            entries.append(UserText(author=ALICE, text=f"{prefix} words {n}", role="note"))
        elif kind == "turn":
            made = [  # a turn without calls is an answer: a person speaks next
                ToolCall(id=f"toolu_{prefix}_{n}_{i}", name="list_files", input={})
                for i in range(draw(st.integers(1, 2)))
            ]
            calls += [c.id for c in made]
            entries.append(AssistantTurn(text=f"{prefix} turn {n}", tool_calls=tuple(made)))
        elif calls:
            target = draw(st.sampled_from(calls))
            entries.append(ToolResultEntry(tool_use_id=target, content=f"{prefix} result {n}"))
    return entries


@st.composite
def approved_journals(draw: st.DrawFn) -> tuple[list[JournalRecord], int]:
    """A journal of planning, the plan, its approval and execution; the approval's index."""
    entries: list[Entry] = [
        StepEntered(position="planning", instructions="plan"),
        UserText(author=ALICE, text=REQUEST),
        *draw(turns("early")),
        AssistantTurn(
            tool_calls=(ToolCall(id="toolu_plan", name="propose_plan", input={"steps": STEPS}),)
        ),
    ]
    at = len(entries)
    entries += [
        DecisionEntry(request_id="plan1", verdict=Approved(), by=ALICE),
        ToolResultEntry(tool_use_id="toolu_plan", content="Plan v1 was approved by alice."),
        StepEntered(position="executing", instructions="carry it out"),
        *draw(turns("late")),
    ]
    return [JournalRecord(seq=i + 1, at=AT, entry=e) for i, e in enumerate(entries)], at


@settings(max_examples=200, deadline=None)
@given(approved_journals())
def test_built_as_it_grows_the_executor_s_view_equals_the_view_built_at_once(
    drawn: tuple[list[JournalRecord], int],
) -> None:
    journal, at = drawn
    history = History()
    for end in range(at + 1, len(journal) + 1):
        grown = history.build(tuple(journal[:end]), PLAN)
        assert grown == History().build(tuple(journal[:end]), PLAN)
        well_formed(grown)
        assert texts(grown)[:2] == [f"alice: {REQUEST}", PLAN_BLOCK]
        assert "early" not in json.dumps(grown)
    # The whole history, asked of the same History, starts it over; and back again.
    assert history.build(tuple(journal)) == History().build(tuple(journal))
    assert history.build(tuple(journal), PLAN) == History().build(tuple(journal), PLAN)


def test_the_request_is_the_one_that_began_the_task() -> None:
    """A request that carried the planning on after a failure is not the task's request."""
    journal = [
        JournalRecord(seq=i + 1, at=AT, entry=e)
        for i, e in enumerate(
            [
                StepEntered(position="planning", instructions="plan"),
                UserText(author=ALICE, text=REQUEST),
                UserText(author=ALICE, text="try again"),
                AssistantTurn(
                    tool_calls=(
                        ToolCall(id="toolu_plan", name="propose_plan", input={"steps": STEPS}),
                    )
                ),
                DecisionEntry(request_id="plan1", verdict=Approved(), by=ALICE),
                ToolResultEntry(tool_use_id="toolu_plan", content="approved"),
            ]
        )
    ]
    (only,) = History().build(tuple(journal), PLAN)
    assert texts([only]) == [f"alice: {REQUEST}", PLAN_BLOCK]
