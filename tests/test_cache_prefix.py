"""Prompt caching (issue 15, a first step): each request is the previous one, extended.

The real Anthropic model against the local Messages API fake, through a run with a
plan approval, a tool call, a question a person answers (the run holds nothing
while it waits) and a restart of the bot: from the second request on, every
request's tools and system prompt are byte-identical to the previous request's,
and its earlier messages are the previous request's messages (cache markers
aside); the breakpoints sit on the last tool, the system prompt and the newest
message.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from bot.app import build
from conversations.events import PlatformRef
from conversations.render import render_event
from conversations.store.memory import MemoryStore
from core import lifecycle
from core.journal import Change, UserText
from core.lifecycle import Lifecycle
from core.models.anthropic import anthropic_model_from
from core.models.scripted import ScriptedModel, ScriptedTurn
from core.people import Person
from core.run.engine import Engine
from core.tools.base import Toolbox
from core.tools.control import control_tools
from core.workflow import default_workflow
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
    return json.dumps(value, sort_keys=False, separators=(",", ":"), ensure_ascii=False)


async def test_every_request_extends_the_one_before_across_approval_wait_and_restart(
    sqlite_settings,
) -> None:
    script = [
        [text("A plan."), tool_use("toolu_01", "propose_plan", {"steps": ["Look", "Ask"]})],
        [tool_use("toolu_02", "list_files", {})],
        [tool_use("toolu_03", "ask_user", {"question": "Which branch?"})],
        [tool_use("toolu_04", "finish", {"answer": "Done on main."})],
    ]
    async with FakeAnthropicServer(script) as server:

        async def started() -> Any:
            model = anthropic_model_from(
                api_key="test-key", base_url=server.base_url, model="claude-test"
            )
            app = await build(sqlite_settings, model=model)
            await app.start()
            return app, model

        app, model = await started()
        chat = Chat(app)
        await chat.mention("look around and ask me")
        await chat.react(chat.bot_message("📋 Plan (v1)"))
        await app.hub.settled()
        assert str((await chat.snapshot()).status) == "waiting(question)"
        await app.close()
        await model.aclose()

        app, model = await started()  # a restart while the run waits for a person
        thread, chat = chat.thread, Chat(app)
        chat.thread = thread  # the same thread, seen by the new process
        await chat.reply("main")
        await app.hub.settled()
        assert (await chat.snapshot()).status.lifecycle is Lifecycle.DONE
        await app.close()
        await model.aclose()

    bodies = [r.body for r in server.requests]
    assert len(bodies) == 4
    for body in bodies:
        assert body["tools"][-1]["cache_control"] == CACHE
        assert body["system"][-1]["cache_control"] == CACHE
        newest = body["messages"][-1]["content"]
        assert newest[-1]["cache_control"] == CACHE
    for before, after in itertools.pairwise(bodies):
        assert canonical(after["tools"]) == canonical(before["tools"])
        assert canonical(after["system"]) == canonical(before["system"])
        earlier = unmarked(before["messages"])
        assert canonical(unmarked(after["messages"][: len(earlier)])) == canonical(earlier)


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
    model = ScriptedModel([ScriptedTurn(text="Tidied.")])
    engine = Engine(
        journal=store.journal,
        model=model,
        toolbox=Toolbox(control_tools()),
        workflow=default_workflow(),
    )

    await engine.run(cid)

    executing = default_workflow().position("executing").instructions.strip()
    (request,) = model.requests
    assert request.messages[-1]["content"][-1]["text"] == (
        f"[threadbot: the executing step] {executing}"
    )
    assert executing not in request.system
    kinds = [r.entry.kind for r in (await store.journal.load(cid)).journal]
    assert kinds.count("step_entered") == 1
