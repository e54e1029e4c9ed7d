"""AnthropicModel, driven through the real ``anthropic`` client against a local fake API."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anthropic
import pytest
from aiohttp import web

from core.models.anthropic import AnthropicModel, anthropic_model_from
from core.models.base import (
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCallEvent,
    ToolInputDelta,
    ToolSpec,
    TurnEnd,
    Usage,
)
from core.vocabulary.errors import ModelError, ModelOverloaded
from tests.fakes.anthropic_server import (
    ApiError,
    FakeAnthropicServer,
    Reply,
    check_tool_results,
    sse_events,
    text,
    tool_use,
)

MODEL_ID = "claude-test-1"
MakeModel = Callable[..., AnthropicModel]

READ_FILE = ToolSpec(
    name="read_file",
    description="Read a text file of the workspace.",
    input_schema={
        "type": "object",
        "properties": {"path": {"type": "string"}, "max_lines": {"type": "integer"}},
        "required": ["path"],
    },
)
RUN_TESTS = ToolSpec(
    name="run_tests",
    description="Run the test suite and report failures.",
    input_schema={"type": "object", "properties": {"pattern": {"type": "string"}}},
)

# A conversation one tool round in: the fake API accepts it because the first
# tool_use is answered by its tool_result.
HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": [{"type": "text", "text": "Why does the build fail?"}]},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Running the tests."},
            {"type": "tool_use", "id": "toolu_01", "name": "run_tests", "input": {}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "1 failed: test_io"},
        ],
    },
]


@pytest.fixture
async def server() -> AsyncIterator[FakeAnthropicServer]:
    async with FakeAnthropicServer() as fake:
        yield fake


@pytest.fixture
async def models() -> AsyncIterator[list[AnthropicModel]]:
    """Models made in a test, closed at its end."""
    made: list[AnthropicModel] = []
    yield made
    for model in made:
        await model.aclose()


@pytest.fixture
def model_for(models: list[AnthropicModel]) -> MakeModel:
    """An AnthropicModel on the real client, pointed at a fake server."""

    def make(server: FakeAnthropicServer, *, max_retries: int = 0) -> AnthropicModel:
        client = anthropic.AsyncAnthropic(
            api_key="test-key", base_url=server.base_url, max_retries=max_retries
        )
        models.append(AnthropicModel(client=client, model=MODEL_ID))
        return models[-1]

    return make


async def collect(model: AnthropicModel, request: ModelRequest) -> list[ModelEvent]:
    return [event async for event in model.stream(request)]


def ask(text_: str = "Hello") -> ModelRequest:
    return ModelRequest(system="You are terse.", messages=[{"role": "user", "content": text_}])


async def test_tool_call_turn_sends_the_request_and_streams_text_then_the_call(
    server: FakeAnthropicServer, model_for: MakeModel
) -> None:
    call = tool_use("toolu_02", "read_file", {"path": "src/io.py", "max_lines": 40})
    reply = Reply(
        content=[text("The failure is in io. Let me read it."), call],
        input_tokens=321,
        output_tokens=45,
        cache_read_input_tokens=300,
        cache_creation_input_tokens=12,
    )
    server.add(reply)
    request = ModelRequest(
        system="You are a careful engineer.",
        messages=HISTORY,
        tools=[READ_FILE, RUN_TESTS],
        max_tokens=2048,
    )

    events = await collect(model_for(server), request)

    [received] = server.requests
    assert received.api_key == "test-key"
    assert received.body["model"] == MODEL_ID
    assert received.body["max_tokens"] == 2048
    assert received.body["stream"] is True
    cache = {"type": "ephemeral"}  # the breakpoints: the last tool, the system, the newest
    assert received.body["system"] == [
        {"type": "text", "text": "You are a careful engineer.", "cache_control": cache}
    ]
    *earlier, newest = received.body["messages"]
    assert earlier == HISTORY[:-1]
    *blocks, last = newest["content"]
    assert newest["role"] == HISTORY[-1]["role"]
    assert last["cache_control"] == cache and not any("cache_control" in b for b in blocks)
    assert [*blocks, {k: v for k, v in last.items() if k != "cache_control"}] == HISTORY[-1][
        "content"
    ]
    tools = [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in (READ_FILE, RUN_TESTS)
    ]
    assert received.body["tools"] == [tools[0], {**tools[1], "cache_control": cache}]

    # The tool input really arrived in several input_json_delta pieces.
    pieces = [d for name, d in sse_events(reply, received.body) if d.get("index") == 1]
    assert sum(d.get("delta", {}).get("type") == "input_json_delta" for d in pieces) >= 2

    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1
    assert "".join(d.text for d in deltas) == "The failure is in io. Let me read it."
    # The input's pieces come as they arrive, named by their block, and join to its JSON.
    inputs = [e for e in events if isinstance(e, ToolInputDelta)]
    assert len(inputs) >= 2
    assert {(e.index, e.id, e.name) for e in inputs} == {(1, "toolu_02", "read_file")}
    assert json.loads("".join(e.partial_json for e in inputs)) == {
        "path": "src/io.py",
        "max_lines": 40,
    }
    assert events[len(deltas) + len(inputs) :] == [
        ToolCallEvent(
            id="toolu_02", name="read_file", input={"path": "src/io.py", "max_lines": 40}
        ),
        Usage(
            model=MODEL_ID,
            input_tokens=321,
            output_tokens=45,
            cache_read_tokens=300,
            cache_write_tokens=12,
        ),
        TurnEnd(stop_reason="tool_use", content=events[-1].content),
    ]
    assert [b["type"] for b in events[-1].content] == ["text", "tool_use"]
    assert events[-1].content[1]["input"] == {"path": "src/io.py", "max_lines": 40}


async def test_text_answer_ends_the_turn(server: FakeAnthropicServer, model_for: MakeModel) -> None:
    server.add([text("All tests pass now.")])

    events = await collect(model_for(server), ask())

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "All tests pass now."
    assert not [e for e in events if isinstance(e, ToolCallEvent)]
    assert events[-2:] == [
        Usage(model=MODEL_ID, input_tokens=10, output_tokens=5),
        TurnEnd(stop_reason="end_turn", content=({"type": "text", "text": "All tests pass now."},)),
    ]
    assert "tools" not in server.requests[0].body


async def test_tool_call_without_input_or_text(
    server: FakeAnthropicServer, model_for: MakeModel
) -> None:
    server.add([tool_use("toolu_03", "run_tests", {})])

    events = await collect(model_for(server), ask("Run the tests"))

    calls = [e for e in events if not isinstance(e, ToolInputDelta)]
    assert calls[0] == ToolCallEvent(id="toolu_03", name="run_tests", input={})
    assert events[-1].stop_reason == "tool_use"


@pytest.mark.parametrize(
    ("error", "kind", "message"),
    [
        (ApiError.overloaded(), ModelOverloaded, "The model API is overloaded"),
        (ApiError.overloaded(in_stream=True), ModelOverloaded, "The model API is overloaded"),
        (ApiError.rate_limited(), ModelOverloaded, "The model API is rate-limiting us"),
        (ApiError(500, "api_error", "Internal server error"), ModelError, "failed"),
    ],
)
async def test_overload_and_server_errors_are_retryable(
    server: FakeAnthropicServer,
    model_for: MakeModel,
    error: ApiError,
    kind: type[ModelError],
    message: str,
) -> None:
    server.add(error)

    with pytest.raises(kind, match=message) as caught:
        await collect(model_for(server, max_retries=0), ask())

    assert type(caught.value) is kind
    assert caught.value.retryable is True
    assert isinstance(caught.value.__cause__, anthropic.APIStatusError)
    assert len(server.requests) == 1


async def test_a_failure_is_logged_with_its_status_type_and_host(
    server: FakeAnthropicServer, model_for: MakeModel, caplog: pytest.LogCaptureFixture
) -> None:
    server.add(ApiError.overloaded())

    with caplog.at_level("WARNING", logger="core.models.anthropic"), pytest.raises(ModelError):
        await collect(model_for(server, max_retries=0), ask())

    (record,) = [r for r in caplog.records if r.name == "core.models.anthropic"]
    assert record.levelname == "WARNING"
    message = record.getMessage()
    assert "at 127.0.0.1 failed: The model API is overloaded" in message
    assert "(HTTP 529, overloaded_error)" in message
    assert "test-key" not in message


async def test_bad_request_is_not_retryable(
    server: FakeAnthropicServer, model_for: MakeModel
) -> None:
    server.add(ApiError.invalid_request("max_tokens: Input should be greater than 0"))

    with pytest.raises(ModelError) as caught:
        await collect(model_for(server, max_retries=2), ask())

    assert not isinstance(caught.value, ModelOverloaded)
    assert caught.value.retryable is False
    assert str(caught.value) == (
        "The model API rejected the request: max_tokens: Input should be greater than 0"
    )
    assert len(server.requests) == 1  # the SDK does not retry a 400


async def test_sdk_retries_an_overload_then_succeeds(
    server: FakeAnthropicServer, model_for: MakeModel
) -> None:
    server.add(ApiError.overloaded(), [text("Back again.")])

    events = await collect(model_for(server, max_retries=1), ask())

    assert events[-1].stop_reason == "end_turn"
    first, second = server.requests
    assert second.body == first.body
    assert second.headers["x-stainless-retry-count"] == "1"


class TimedServer(FakeAnthropicServer):
    """The fake API, also noting when each ``POST /v1/messages`` arrived."""

    def __init__(self, *answers: Any) -> None:
        super().__init__(answers)
        self.arrivals: list[float] = []
        """``time.monotonic()`` at each request's arrival, in order."""

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        self.arrivals.append(time.monotonic())
        return await super()._messages(request)


async def test_a_rate_limit_is_waited_out_for_its_retry_after_through_the_sdk_retries(
    models: list[AnthropicModel],
) -> None:
    # Only ``retry-after`` (whole seconds): no ``retry-after-ms``, which the SDK reads
    # first. Without the header the SDK's first backoff is at most 0.5 s.
    limited = ApiError(
        429,
        "rate_limit_error",
        "Number of request tokens has exceeded your rate limit",
        headers={"retry-after": "1"},
    )
    async with TimedServer(limited, [text("Worth the wait.")]) as server:
        model = anthropic_model_from("test-key", server.base_url, MODEL_ID)  # default retries
        models.append(model)

        events = await collect(model, ask())

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Worth the wait."
    assert events[-1] == TurnEnd(
        stop_reason="end_turn", content=({"type": "text", "text": "Worth the wait."},)
    )
    first, second = server.requests
    assert second.body == first.body
    assert second.headers["x-stainless-retry-count"] == "1"
    assert server.arrivals[1] - server.arrivals[0] >= 0.9


async def test_unanswered_tool_use_is_rejected_by_the_api(
    server: FakeAnthropicServer, model_for: MakeModel
) -> None:
    server.add([text("never sent")])
    request = ModelRequest(system="s", messages=[*HISTORY[:2], {"role": "user", "content": "Go"}])

    with pytest.raises(ModelError, match="toolu_01") as caught:
        await collect(model_for(server), request)

    assert caught.value.retryable is False
    assert "rejected the request" in str(caught.value)
    assert server.remaining == 1  # the scripted answer waits for a valid request


async def test_connection_cut_mid_stream_is_retryable(
    server: FakeAnthropicServer, model_for: MakeModel
) -> None:
    server.add(Reply(content=[text("one two three four")], cut_after=4))
    seen: list[ModelEvent] = []

    with pytest.raises(ModelError) as caught:
        async for event in model_for(server).stream(ask()):
            seen.append(event)

    assert caught.value.retryable is True
    assert seen and all(isinstance(e, TextDelta) for e in seen)


async def test_unreachable_api_is_retryable(model_for: MakeModel) -> None:
    async with FakeAnthropicServer() as gone:
        pass  # started and stopped: nothing listens on its port any more

    with pytest.raises(ModelError, match="Could not reach the model API") as caught:
        await collect(model_for(gone), ask())

    assert caught.value.retryable is True


async def test_cancelling_the_consumer_propagates(
    server: FakeAnthropicServer, model_for: MakeModel
) -> None:
    server.add(Reply(content=[text("thinking about it for a long time")], hang_after=4))
    first_text = asyncio.Event()
    model = model_for(server)

    async def consume() -> None:
        async for event in model.stream(ask()):
            if isinstance(event, TextDelta):
                first_text.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_text.wait(), timeout=60)
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


async def test_factory_builds_a_working_model(
    server: FakeAnthropicServer, models: list[AnthropicModel]
) -> None:
    server.add([text("ok")])

    model = anthropic_model_from("test-key", server.base_url, MODEL_ID, max_retries=0, timeout=5)
    models.append(model)

    assert model.name == MODEL_ID
    assert (await collect(model, ask()))[-1].stop_reason == "end_turn"


def _use(*ids: str) -> dict[str, Any]:
    blocks = [{"type": "tool_use", "id": i, "name": "t", "input": {}} for i in ids]
    return {"role": "assistant", "content": blocks}


def _results(*ids: str, text_first: bool = False) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [
        {"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ids
    ]
    note = {"type": "text", "text": "and also"}
    return {"role": "user", "content": [note, *blocks] if text_first else [*blocks, note]}


ASK = {"role": "user", "content": "go"}


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([ASK, _use("a", "b"), _results("a", "b")], None),
        ([ASK, _use("a", "b"), _results("a")], "without `tool_result`"),
        ([ASK, _use("a"), _results("a", "a")], "unexpected `tool_use_id`"),
        ([ASK, _use("a"), _results("a", "z")], "unexpected `tool_use_id`"),
        ([ASK, _results("a")], "unexpected `tool_use_id`"),
        ([ASK, _use("a"), _results("a", text_first=True)], "must come before"),
        ([ASK, _use("a"), _use("b")], "without `tool_result`"),
        ([ASK, _use("a")], "without `tool_result`"),
    ],
)
def test_fake_api_tool_result_rule(messages: list[dict[str, Any]], problem: str | None) -> None:
    found = check_tool_results(messages)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


async def test_an_overloaded_model_falls_over_to_the_next_before_its_answer_began(
    server: FakeAnthropicServer, model_for: MakeModel
) -> None:
    server.add(ApiError.overloaded(), ApiError.overloaded(), [text("From the second fallback.")])
    request = ask().model_copy(update={"fallbacks": ("claude-backup", "claude-last")})

    events = await collect(model_for(server), request)

    assert [r.body["model"] for r in server.requests] == [MODEL_ID, "claude-backup", "claude-last"]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == (
        "From the second fallback."
    )
    (usage,) = [e for e in events if isinstance(e, Usage)]
    assert usage.model == "claude-last"


async def test_a_bad_request_never_falls_over_and_the_last_overload_is_raised(
    server: FakeAnthropicServer, model_for: MakeModel
) -> None:
    request = ask().model_copy(update={"fallbacks": ("claude-backup",)})
    server.add(ApiError.invalid_request("messages: too long"))
    with pytest.raises(ModelError, match="too long") as refused:
        await collect(model_for(server), request)
    assert not isinstance(refused.value, ModelOverloaded) and not refused.value.retryable
    assert [r.body["model"] for r in server.requests] == [MODEL_ID]  # a 400: never retried

    server.add(ApiError.overloaded(), ApiError.overloaded())
    with pytest.raises(ModelOverloaded):  # every model overloaded: the run waits to retry
        await collect(model_for(server), request)
    assert [r.body["model"] for r in server.requests[1:]] == [MODEL_ID, "claude-backup"]
