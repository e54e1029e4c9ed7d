"""Prompt caching (issue 15): each request is the previous one, extended.

The real Anthropic model against the local Messages API fake, through a scripted
10-turn run: a look around, a plan approved with a reaction, ordinary workspace
tool calls, a question a person answers (the run holds nothing while it waits)
with a restart of the bot during that wait, more tool calls and the answer. From
the second request on, every request's tools and system prompt are
byte-identical to the previous request's, and its earlier messages are the
previous request's messages (cache markers aside); the breakpoints sit on the
last tool, the system prompt and the newest message, and nowhere else; so under
each context strategy, whose notes are appended, never written into an earlier
message (docs/architecture.md, "Context strategies and notes").
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.app import App, build
from bot.settings import Settings
from conversations.events import PlatformRef
from conversations.render import render_event
from conversations.store.memory import MemoryStore
from core.contexts import STRATEGIES, StrategyName
from core.models.anthropic import anthropic_model_from
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.run.engine import Engine
from core.tools.base import Toolbox
from core.tools.control import control_tools
from core.vocabulary import lifecycle
from core.vocabulary.entries import StepEntered, UserText
from core.vocabulary.journal import Change
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.people import Person
from core.workflows import default_workflow
from tests.fakes.anthropic_server import FakeAnthropicServer, text, tool_use
from tests.harness import Chat

CACHE = {"type": "ephemeral"}
ALICE = Person(id="U0ALICE001", name="alice")


def unmarked(value: Any) -> Any:
    """``value`` without its ``cache_control`` markers."""
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def canonical(value: Any) -> str:
    """``value`` as compact JSON, keys in their given order (so order counts too)."""
    return json.dumps(value, sort_keys=False, separators=(",", ":"), ensure_ascii=False)


def markers(value: Any) -> int:
    """How many ``cache_control`` markers ``value`` carries, at any depth."""
    if isinstance(value, dict):
        return ("cache_control" in value) + sum(markers(v) for v in value.values())
    if isinstance(value, list):
        return sum(markers(v) for v in value)
    return 0


def assert_each_request_extends_the_one_before(bodies: Sequence[dict[str, Any]]) -> None:
    """Every body has its three breakpoints (the last tool, the last system block, the
    last block of the newest message) and no other; from the second body on, its
    tools and system are byte-identical to the previous body's and its earlier
    messages are the previous body's messages, cache markers aside."""
    for number, body in enumerate(bodies, 1):
        assert body["tools"][-1]["cache_control"] == CACHE, number
        assert body["system"][-1]["cache_control"] == CACHE, number
        assert body["messages"][-1]["content"][-1]["cache_control"] == CACHE, number
        assert markers(body) == 3, number
    for number, (before, after) in enumerate(itertools.pairwise(bodies), 2):
        assert canonical(after["tools"]) == canonical(before["tools"]), number
        assert canonical(after["system"]) == canonical(before["system"]), number
        earlier = unmarked(before["messages"])
        assert len(after["messages"]) > len(earlier), number
        assert canonical(unmarked(after["messages"][: len(earlier)])) == canonical(earlier), number


@asynccontextmanager
async def running(
    settings: Settings, server: FakeAnthropicServer, **build_with: Any
) -> AsyncIterator[App]:
    """A started bot whose model is the real Anthropic model pointed at ``server`` (and
    whatever else ``build_with`` gives :func:`bot.app.build`); closed (the bot, then
    the model's HTTP client) on leaving, as at a shutdown."""
    model = anthropic_model_from(api_key="test-key", base_url=server.base_url, model="claude-test")
    app = await build(settings, model=model, **build_with)
    await app.start()
    try:
        yield app
    finally:
        await app.close()
        await model.aclose()


def tool_result(body: dict[str, Any], tool_use_id: str) -> str:
    """The content of the ``tool_result`` for ``tool_use_id`` in ``body``'s newest message."""
    (found,) = [
        block
        for block in body["messages"][-1]["content"]
        if block.get("type") == "tool_result" and block.get("tool_use_id") == tool_use_id
    ]
    content = found["content"]
    return content if isinstance(content, str) else canonical(content)


TEN_TURNS = [
    [text("Looking first."), tool_use("toolu_01", "list_files", {})],
    [text("A plan."), tool_use("toolu_02", "propose_plan", {"steps": ["Write", "Ask", "Edit"]})],
    [tool_use("toolu_03", "write_file", {"path": "notes.md", "content": "draft\n"})],
    [tool_use("toolu_04", "read_file", {"path": "notes.md"})],
    [tool_use("toolu_05", "ask_user", {"question": "Which branch?"})],
    [tool_use("toolu_06", "list_files", {})],
    [tool_use("toolu_07", "edit_file", {"path": "notes.md", "old": "draft", "new": "final"})],
    [tool_use("toolu_08", "read_file", {"path": "notes.md"})],
    [tool_use("toolu_09", "write_file", {"path": "done.txt", "content": "main\n"})],
    [tool_use("toolu_10", "finish", {"answer": "Done on main."})],
]
"""The model's side of the run: ten answers, one per request."""


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_ten_requests_each_extend_the_one_before_across_approval_wait_and_restart(
    sqlite_settings: Settings, strategy: StrategyName
) -> None:
    sqlite_settings.context_strategy = strategy  # each context strategy (issue 25)
    async with FakeAnthropicServer(TEN_TURNS) as server:
        async with running(sqlite_settings, server) as app:
            chat = Chat(app)
            await chat.mention("write notes, ask me the branch, then finish them")
            assert str((await chat.snapshot()).status) == "waiting(plan_approval)"
            assert len(server.requests) == 2
            await chat.react(chat.bot_message("📋 Plan (v1)"))
            await app.hub.settled()
            assert str((await chat.snapshot()).status) == "waiting(question)"
            assert len(server.requests) == 5
            thread = chat.thread

        async with running(sqlite_settings, server) as app:  # a restart during the wait
            chat = Chat(app)
            chat.thread = thread  # the same thread, seen by the new process
            await chat.reply("main")
            await app.hub.settled()
            snap = await chat.snapshot()
            assert snap.status.lifecycle is Lifecycle.DONE
            workspace = Path(snap.workspace)
            assert chat.said()[-1].startswith("✅ Done on main.")

    bodies = [r.body for r in server.requests]
    assert len(bodies) == 10 and server.remaining == 0
    assert_each_request_extends_the_one_before(bodies)
    # The tools really ran, in the workspace, on both sides of the restart.
    assert tool_result(bodies[3], "toolu_03") == "wrote 6 bytes to notes.md"
    assert tool_result(bodies[4], "toolu_04") == "draft\n"
    assert "main" in canonical(bodies[5]["messages"][-1])  # the answer to the question
    assert tool_result(bodies[8], "toolu_08") == "final\n"
    assert (workspace / "notes.md").read_text() == "final\n"
    assert (workspace / "done.txt").read_text() == "main\n"


async def test_a_conversation_from_before_steps_were_journaled_is_told_its_step(
    tmp_path,
) -> None:
    store = MemoryStore(render=render_event)
    cid = await store.threads.open_conversation(
        delivery_key="old",
        binding=PlatformRef(platform="console", channel="c", thread="old"),
        requester=ALICE,
        workspace_root=tmp_path,
        position="planning",
    )
    assert cid is not None
    # As an older threadbot left it: approved, executing, its step told in the system
    # prompt only, so nothing of it in the journal.
    await store.journal.commit(
        cid,
        Change(
            entries=(UserText(author=ALICE, text="tidy the notes", role="request"),),
            status=lifecycle.RUNNING,
            position="executing",
        ),
    )
    model = ScriptedModel([ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Tidied."})])])
    engine = Engine(
        journal=store.journal,
        model=model,
        toolbox=Toolbox(control_tools()),
    )

    await engine.run(cid)

    executing = default_workflow().state("executing").instructions.strip()
    (request,) = model.requests
    assert request.messages[-1]["content"][-1]["text"] == (
        f"[threadbot: the executing step] {executing}"
    )
    assert executing not in request.system
    steps = [
        r.entry.position
        for r in (await store.journal.load(cid)).journal
        if isinstance(r.entry, StepEntered)
    ]
    assert steps == ["executing", "answered"]  # told once; then the end, entered
