"""The engine with the real anthropic client against the local Messages API fake."""

from __future__ import annotations

import io

import pytest

from adapters.console import ConsoleAdapter
from bot.app import build
from bot.engines import default_toolbox
from bot.settings import Settings
from core.models.anthropic import anthropic_model_from
from core.tools.control import offered as offered_tools
from core.vocabulary.lifecycle import Lifecycle
from core.workflows import default_workflow
from tests.fakes.anthropic_server import FakeAnthropicServer, text, tool_use


async def test_claude_gets_the_tools_and_its_tool_use_becomes_a_plan(settings) -> None:
    script = [[text("Here is my plan."), tool_use("toolu_01", "propose_plan", {"steps": ["Read"]})]]
    async with FakeAnthropicServer(script) as server:
        model = anthropic_model_from(
            api_key="test-key", base_url=server.base_url, model="claude-test"
        )
        app = await build(settings, model=model)
        out = io.StringIO()
        console = ConsoleAdapter(input=io.StringIO("what is in here?\n"), output=out, user="alice")
        app.add_sender(console)
        await app.start()
        try:
            assert await console.run(app.hub, settled=app.hub.settled) == 0
            conversation = (await app.store.threads.active(platform="console"))[0]
            snap = await app.store.journal.load(conversation.id)
        finally:
            await app.close()
            await model.aclose()

    body = server.requests[0].body
    assert body["model"] == "claude-test"
    planning = default_workflow().state("planning").instructions.strip()
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": f"[threadbot: the planning step] {planning}"},
                {
                    "type": "text",
                    "text": "alice: what is in here?",
                    "cache_control": {"type": "ephemeral"},
                },
            ],
        }
    ]
    offered = [tool["name"] for tool in body["tools"]]
    # Every tool in every position, in one order: the cached prefix does not change
    # when the plan is approved; a mutating call before approval is refused instead.
    # No expert is set: ask_expert is not offered (tests/test_ask_expert.py).
    every = offered_tools(default_toolbox().select(["all"]), expert=False)
    assert offered == [t.spec.name for t in every]
    assert "ask_expert" not in offered
    assert planning not in str(body["system"])
    assert all("input_schema" in tool for tool in body["tools"])
    assert "📋 Plan (v1)" in out.getvalue() and "1. Read" in out.getvalue()
    assert snap.status.lifecycle is Lifecycle.WAITING
    assert snap.tool_calls["toolu_01"].name == "propose_plan"


async def test_the_app_closes_the_client_of_the_model_it_made_and_not_one_it_was_given(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Left open, a client's connections close when it is garbage-collected, in a task on
    whatever event loop runs then (anthropic's ``AsyncHttpxClientWrapper.__del__``),
    which logs an error there once its own loop is gone."""
    from pydantic import SecretStr

    from core.models import anthropic as anthropic_models

    made: list[anthropic_models.AnthropicModel] = []

    def making(*args: object, **kwargs: object) -> anthropic_models.AnthropicModel:
        made.append(anthropic_model_from(*args, **kwargs))  # type: ignore[arg-type]
        return made[-1]

    monkeypatch.setattr(anthropic_models, "anthropic_model_from", making)
    async with FakeAnthropicServer([]) as server:
        settings.anthropic_api_key = SecretStr("sk-ant-test")
        settings.anthropic_base_url = server.base_url
        app = await build(settings)
        await app.close()
        [own] = made
        assert own._client.is_closed()

        given = anthropic_model_from(api_key="k", base_url=server.base_url, model="claude-test")
        app = await build(settings, model=given)
        await app.close()
        assert not given._client.is_closed()  # its maker closes it
        await given.aclose()
