"""A conversation keeps its workflow after the file changes and the bot restarts, with
real processes (issue 29).

``threadbot run`` on Slack (HTTP mode) against the Slack fake, the real ``anthropic``
client against the Messages API fake, one SQLite file (:mod:`tests.process_harness`),
a ``workflows_folder`` holding a workflow whose first state asks the people a
question. The bot asks; the test kills it (SIGKILL), edits the file (the question and
the agent state's instructions change) and starts another process; Alice's answer
moves the run on, and the model's request holds the instructions the conversation
started with, never the new ones.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.fakes.anthropic_server import FakeAnthropicServer, tool_use
from tests.fakes.slack_api import FakeSlackApi
from tests.process_harness import BotProcess, Channel, eventually


def asking(version: str) -> str:
    """A workflow file: a question, then an agent state whose instructions name
    ``version``, then its end."""
    return f"""\
[workflow]
name = "asking"
description = "Ask which file, then read it and answer."
start = "ask"

[states.ask]
kind = "human"
ask = "question"
prompt = "Which file should I read ({version})?"

[states.ask.on]
answered = "reading"

[states.reading]
kind = "agent"
tools = ["read_only", "finish"]
instructions = "Read the file named in the answer: instructions {version}."

[states.reading.on]
finished = "done"

[states.done]
kind = "end"
"""


@pytest.fixture
async def fakes() -> AsyncIterator[tuple[FakeSlackApi, FakeAnthropicServer, Channel]]:
    async with FakeSlackApi() as api, FakeAnthropicServer() as model:
        async with aiohttp.ClientSession() as http:
            yield api, model, Channel(api, http)


def texts_of(body: dict) -> list[str]:
    """Every text the Messages API request ``body`` sends: its system prompt's and its
    messages' text blocks and tool results."""
    said = [block["text"] for block in body.get("system", []) if "text" in block]
    for message in body["messages"]:
        content = message["content"]
        blocks = content if isinstance(content, list) else [{"text": content}]
        for block in blocks:
            text = block.get("text", block.get("content", ""))
            said.append(text if isinstance(text, str) else str(text))
    return said


async def test_a_conversation_keeps_its_workflow_after_the_file_changes_and_a_restart(
    tmp_path: Path, fakes: tuple[FakeSlackApi, FakeAnthropicServer, Channel]
) -> None:
    api, model, channel = fakes
    flows = tmp_path / "flows"
    flows.mkdir()
    (flows / "asking.toml").write_text(asking("v1"))
    settings = {
        "workflows_folder": str(flows),
        "workflows": "default,chat,validate-fix,asking",
    }
    model.add([tool_use("toolu_done", "finish", {"answer": "notes.md is empty."})])

    first = BotProcess(tmp_path, api, model.base_url, **settings)
    await first.start()
    try:
        thread = await channel.mention(first, "workflow=asking read a file for me")
        await eventually(lambda: channel.post_with(thread, "Which file should I read (v1)?"))
    finally:
        await first.kill()  # SIGKILL
    assert model.requests == []  # the question is the workflow's own: no model call

    (flows / "asking.toml").write_text(asking("v2"))
    again = BotProcess(tmp_path, api, model.base_url, **settings)
    await again.start()
    try:
        await channel.reply(again, thread, "notes.md")
        await eventually(lambda: channel.post_with(thread, "✅ notes.md is empty."))
        # the answer shows as it streams, before the run's last commit
        done = [("done", "done")]
        await eventually(
            lambda: again.query("select lifecycle, position from conversations") == done
        )
    finally:
        await again.kill()

    (request,) = model.requests
    said = texts_of(request.body)
    assert (
        "[threadbot: the reading step] Read the file named in the answer: instructions v1." in said
    )
    assert not any("v2" in text for text in said)
    assert not any("(v2)" in text for text in channel.texts(thread))  # not asked again
    answer = channel.post_with(thread, "✅ notes.md is empty.")
    assert answer is not None
    footer = str(answer["text"]).splitlines()[1]  # the last line mentions the requester
    assert footer.endswith(" · workflow asking"), answer["text"]
    assert first.query("select lifecycle, position from conversations") == [("done", "done")]
