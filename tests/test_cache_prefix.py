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
from core.lifecycle import Lifecycle
from core.models.anthropic import anthropic_model_from
from tests.fakes.anthropic_server import FakeAnthropicServer, text, tool_use
from tests.harness import Chat

CACHE = {"type": "ephemeral"}


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
