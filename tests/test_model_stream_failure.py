"""A model stream that fails midway is never half-applied (issue 15).

The real Anthropic model against the local Messages API fake, in an engine run
after an approved plan: the answer to a request breaks off (the connection cut
in the middle of a tool call's input, or just before ``message_stop``, or an
``error`` event in a 200 stream). The journal then holds nothing of that answer:
no assistant turn, no tool call, no file written, and the history it builds is
the failed request's messages; the thread shows the failure with its retry
request and nothing of the partial text; the conversation waits for a retry.
After the requester's 🔁, the next request body is the failed one's, and the
run goes on to its answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from bot.settings import Settings
from core.run.history import build_messages
from core.vocabulary.entries import AssistantTurn
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.requests import RequestKind, RequestState
from core.vocabulary.tool_records import ToolState
from tests.fakes.anthropic_server import (
    ApiError,
    Block,
    FakeAnthropicServer,
    Reply,
    Scripted,
    sse_events,
    text,
    tool_use,
)
from tests.harness import Chat
from tests.test_cache_prefix import canonical, running, unmarked

PARTIAL = "Writing the notes now."
WRITE = tool_use("toolu_02", "write_file", {"path": "notes.md", "content": "the notes\n"})
ANSWER: list[Block] = [text(PARTIAL), WRITE]
"""The answer that breaks off the first time and comes whole on the retry."""


def cut_before(
    content: list[Block], where: Callable[[str, Mapping[str, Any]], bool], nth: int = 0
) -> Reply:
    """``content`` streamed up to the ``nth`` event (from 0) that ``where(name, data)``
    picks; there the connection is cut. The text is always out by then (asserted)."""
    events = sse_events(Reply(content=content), {})
    cut = [i for i, (name, data) in enumerate(events) if where(name, data)][nth]
    assert any(data.get("delta", {}).get("type") == "text_delta" for _, data in events[:cut])
    return Reply(content=content, cut_after=cut)


def is_tool_input_piece(name: str, data: Mapping[str, Any]) -> bool:
    """Whether the event carries a piece of a tool call's input (``input_json_delta``)."""
    return name == "content_block_delta" and data["delta"]["type"] == "input_json_delta"


FAILURES: dict[str, Scripted] = {
    # The second of the tool input's three pieces never comes.
    "cut in a tool input": cut_before(ANSWER, is_tool_input_piece, nth=1),
    # Everything came, the stop reason too, but not message_stop.
    "cut before message_stop": cut_before(ANSWER, lambda name, _: name == "message_stop"),
    # A 200 stream: message_start, then an error event.
    "error event": ApiError.overloaded(in_stream=True),
}

ERRORS = {
    "cut in a tool input": "The connection to the model API broke off",
    "cut before message_stop": "The connection to the model API broke off",
    "error event": "The model API is overloaded",
}


@pytest.mark.parametrize("failure", list(FAILURES))
async def test_a_stream_that_breaks_off_leaves_nothing_and_the_retry_sends_the_same_request(
    settings: Settings, failure: str
) -> None:
    script = [
        [tool_use("toolu_01", "propose_plan", {"steps": ["Write the notes"]})],
        FAILURES[failure],
        ANSWER,
        [tool_use("toolu_03", "finish", {"answer": "Written."})],
    ]
    async with FakeAnthropicServer(script) as server, running(settings, server) as app:
        chat = Chat(app)
        await chat.mention("write the notes")
        await chat.react(chat.bot_message("📋 Plan (v1)"))
        await app.hub.settled()

        snap = await chat.snapshot()
        workspace = Path(snap.workspace)
        assert len(server.requests) == 2  # a failure midway is not retried behind our back
        failed = server.requests[1].body
        # Nothing of the broken answer in the store.
        assert str(snap.status) == "waiting(retry)"
        (waiting,) = snap.open_requests
        assert waiting.kind is RequestKind.RETRY
        turns = [r.entry for r in snap.journal if isinstance(r.entry, AssistantTurn)]
        assert [c.name for t in turns for c in t.tool_calls] == ["propose_plan"]
        assert PARTIAL not in canonical([r.entry.model_dump(mode="json") for r in snap.journal])
        assert set(snap.tool_calls) == {"toolu_01"}
        assert not (workspace / "notes.md").exists()
        assert canonical(build_messages(snap.journal)) == canonical(unmarked(failed["messages"]))
        # The thread shows the failure and how to go on, nothing of the partial answer.
        assert chat.said()[-1].startswith(f"⚠️ {ERRORS[failure]} — react :repeat:")
        assert PARTIAL not in chat.out.getvalue()

        await chat.react(chat.bot_message("⚠️"), "repeat")
        await app.hub.settled()

        snap = await chat.snapshot()
    assert len(server.requests) == 4 and server.remaining == 0
    assert canonical(server.requests[2].body) == canonical(failed)
    assert snap.status.lifecycle is Lifecycle.DONE
    assert [r.state for r in snap.requests if r.kind is RequestKind.RETRY] == [RequestState.DECIDED]
    turns = [r.entry for r in snap.journal if isinstance(r.entry, AssistantTurn)]
    assert [t.text for t in turns].count(PARTIAL) == 1
    assert snap.tool_calls["toolu_02"].state is ToolState.DONE
    assert (workspace / "notes.md").read_text() == "the notes\n"
    said = chat.said()
    assert "🔁 Retried by alice" in said
    assert said[-3:] == [f"⏳ {PARTIAL}", "⏳ wrote notes.md", "✅ Written."]
