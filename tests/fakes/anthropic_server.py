"""A scripted local fake of the Anthropic Messages API, for tests.

It answers ``POST /v1/messages`` on ``127.0.0.1`` the way the real API does, so the
real ``anthropic`` client can be pointed at it (``base_url=server.base_url``), and
``GET /v1/models`` (the models of :attr:`FakeAnthropicServer.models`, newest first,
paged by ``limit``: https://docs.anthropic.com/en/api/models-list), recorded in
``server.model_lists``. A request without a key answers 401
``authentication_error``; so does any other key than ``api_key`` when one is given.

* ``"stream": true`` -> server-sent events in the documented order
  (https://docs.anthropic.com/en/api/messages-streaming): ``message_start``, then per
  content block ``content_block_start`` / ``content_block_delta`` (``text_delta``
  word by word, or ``input_json_delta`` with the tool input's JSON cut in three
  ``partial_json`` pieces) / ``content_block_stop``, then ``message_delta``
  (``stop_reason``, output usage) and ``message_stop``; one ``ping`` after the
  first block starts.
* otherwise -> one JSON ``message`` object.
* errors -> ``{"type": "error", "error": {"type": ..., "message": ...}}`` with the
  given status (https://docs.anthropic.com/en/api/errors).

Each request takes the next scripted answer, in order: a list of content blocks
(``text(...)``, ``tool_use(...)``), a :class:`Reply` (blocks plus stop reason, usage,
or a connection cut) or an :class:`ApiError`. Every request is recorded in
``server.requests`` (parsed JSON body and headers), valid or not.

When many conversations talk to the fake at once, their order is not known: give
``respond``, a callable that builds the answer (any of the above) from the request's
parsed JSON body, e.g. from a marker in its first user message. It answers every
valid request the script has no answer left for (a script may still open the way).

Before taking a scripted answer the server enforces the Messages API's tool rules and
answers 400 ``invalid_request_error`` when one is broken (the scripted answer is then
kept for the next request), in the API's words: every assistant ``tool_use`` block
must be answered, in the very next user message, by exactly one ``tool_result`` with
its ``tool_use_id``; those ``tool_result`` blocks come before any other block of that
message; a ``tool_result`` must answer a ``tool_use`` of the previous assistant
message; a request whose messages hold ``tool_use`` or ``tool_result`` blocks must
define ``tools`` ("Requests which include `tool_use` or `tool_result` blocks must
define tools."); and a ``tool_choice`` may only be given with ``tools`` ("tool_choice
may only be specified while providing tools."), its ``type`` one of ``auto``,
``any``, ``tool`` and ``none``
(https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use).

Usage::

    async with FakeAnthropicServer([[text("Hi"), tool_use("toolu_1", "ls", {})]]) as server:
        client = anthropic.AsyncAnthropic(api_key="test-key", base_url=server.base_url)
        ...
        assert server.requests[0].body["model"] == "claude-test"
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from tests.fakes.local import LocalServer

Block = dict[str, Any]
"""A content block of the Messages API, e.g. ``{"type": "text", "text": "Hi"}``."""


def text(value: str) -> Block:
    """A ``text`` content block."""
    return {"type": "text", "text": value}


def tool_use(id: str, name: str, input: Mapping[str, Any]) -> Block:
    """A ``tool_use`` content block (``id`` like ``"toolu_01"``)."""
    return {"type": "tool_use", "id": id, "name": name, "input": dict(input)}


@dataclass(frozen=True)
class Reply:
    """One scripted assistant message.

    ``stop_reason`` defaults to ``"tool_use"`` when a block is a ``tool_use``, else
    ``"end_turn"``. Streaming only: ``cut_after`` drops the connection after that many
    events; ``hang_after`` sends that many events and then nothing until the server
    stops (to test a stop or timeout while the model is answering); ``gate_after`` sends
    that many events and waits for ``gate`` before the rest (a test sees what the bot did
    with a response half written).
    """

    content: Sequence[Block]
    stop_reason: str | None = None
    input_tokens: int = 10
    output_tokens: int = 5
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cut_after: int | None = None
    hang_after: int | None = None
    gate_after: int | None = None
    gate: asyncio.Event | None = None


@dataclass(frozen=True)
class ApiError:
    """One scripted error answer: HTTP ``status``, ``error.type`` and ``error.message``.

    ``in_stream=True`` answers a streaming request with 200, ``message_start`` and then
    an ``error`` event, as the API does when it fails mid-response.
    """

    status: int
    type: str
    message: str
    headers: Mapping[str, str] = field(default_factory=dict)
    in_stream: bool = False

    @classmethod
    def overloaded(cls, *, in_stream: bool = False) -> ApiError:
        """529 ``overloaded_error``, retry at once (``retry-after-ms: 1``)."""
        return cls(529, "overloaded_error", "Overloaded", _RETRY_NOW, in_stream)

    @classmethod
    def rate_limited(cls) -> ApiError:
        """429 ``rate_limit_error``, retry at once (``retry-after-ms: 1``)."""
        return cls(
            429,
            "rate_limit_error",
            "Number of request tokens has exceeded your rate limit",
            _RETRY_NOW,
        )

    @classmethod
    def invalid_request(cls, message: str) -> ApiError:
        """400 ``invalid_request_error`` with ``message``."""
        return cls(400, "invalid_request_error", message)


# The SDK treats ``retry-after: 0`` as "no advice" and backs off ~0.5 s; a positive
# ``retry-after-ms`` (which it reads first) makes the retry immediate.
_RETRY_NOW = {"retry-after": "0", "retry-after-ms": "1"}

Scripted = Reply | ApiError | Sequence[Block]
Responder = Callable[[dict[str, Any]], Scripted]
"""Builds the answer to one request from its parsed JSON body (``model``, ``messages``...)."""


@dataclass(frozen=True)
class RecordedRequest:
    """A request as received: parsed JSON ``body`` (``{}`` if unreadable) and ``headers``."""

    body: dict[str, Any]
    headers: CIMultiDict[str]

    @property
    def api_key(self) -> str | None:
        """The key sent as ``x-api-key`` or as ``Authorization: Bearer`` (anthropic 2.x)."""
        bearer = self.headers.get("authorization", "")
        return self.headers.get("x-api-key") or bearer.removeprefix("Bearer ") or None


class FakeAnthropicServer(LocalServer):
    """The fake API. Start it with ``async with`` (or :meth:`start` / :meth:`stop`).

    ``api_key``: if set, other keys answer 401 ``authentication_error``. ``respond``:
    builds the answer of every request once the script is used up (see the module
    docstring); without it such a request answers 400. ``delay``: seconds each answer
    of ``POST /v1/messages`` waits before it starts (a model that takes its time).
    """

    def __init__(
        self,
        script: Iterable[Scripted] = (),
        *,
        api_key: str | None = None,
        respond: Responder | None = None,
        delay: float = 0.0,
    ) -> None:
        self._script: deque[Scripted] = deque(script)
        self.delay = delay
        self.api_key = api_key
        self.respond = respond
        self.requests: list[RecordedRequest] = []
        self.model_lists: list[RecordedRequest] = []
        """Every ``GET /v1/models`` (its query as ``body``), valid or not."""
        self.models: list[str] = ["claude-opus-5-5", "claude-sonnet-5"]
        """The model ids ``GET /v1/models`` lists, newest first."""
        self._runner: web.AppRunner | None = None
        self._stopping = asyncio.Event()
        self.base_url = ""

    def add(self, *answers: Scripted) -> None:
        """Append answers to the script."""
        self._script.extend(answers)

    @property
    def remaining(self) -> int:
        """How many scripted answers are not used yet."""
        return len(self._script)

    async def start(self) -> None:
        """Listen on ``127.0.0.1`` on a free port and set :attr:`base_url`."""
        self._stopping = asyncio.Event()
        app = web.Application()
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        host, port = self._runner.addresses[0][:2]
        self.base_url = f"http://{host}:{port}"

    async def stop(self) -> None:
        """Stop listening and close open connections (ending any hanging stream)."""
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        number = len(self.requests) + 1
        try:
            body = json.loads(await request.read())
        except ValueError:
            body = None
        self.requests.append(
            RecordedRequest(body if isinstance(body, dict) else {}, CIMultiDict(request.headers))
        )
        if not isinstance(body, dict):
            return _error(ApiError.invalid_request("request body is not a JSON object"), number)
        if self.delay:
            await asyncio.sleep(self.delay)
        refused = self._refused(self.requests[-1])
        if refused is not None:
            return _error(refused, number)
        problem = _check_request(body)
        if problem is not None:
            return _error(ApiError.invalid_request(problem), number)
        if self._script:
            answer = self._script.popleft()
        elif self.respond is not None:
            answer = self.respond(body)
        else:
            message = f"fake Anthropic server: no scripted answer left for request #{number}"
            return _error(ApiError.invalid_request(message), number)
        if isinstance(answer, ApiError):
            if answer.in_stream and body.get("stream"):
                return await _stream_error(request, answer, body, number)
            return _error(answer, number)
        reply = answer if isinstance(answer, Reply) else Reply(content=list(answer))
        if body.get("stream"):
            return await _stream(request, reply, body, number, self._stopping)
        message_json = _message(reply, body, number)
        return web.Response(
            text=json.dumps(message_json), headers=_headers(number, "application/json")
        )

    def _refused(self, request: RecordedRequest) -> ApiError | None:
        """The 401 for a request without a key, or with another key than :attr:`api_key`."""
        if request.api_key is None:
            return ApiError(401, "authentication_error", "x-api-key header is required")
        if self.api_key is not None and request.api_key != self.api_key:
            return ApiError(401, "authentication_error", "invalid x-api-key")
        return None

    async def _models(self, request: web.Request) -> web.Response:
        """``GET /v1/models``: the first ``limit`` (default 20) of :attr:`models`."""
        recorded = RecordedRequest(dict(request.query), CIMultiDict(request.headers))
        self.model_lists.append(recorded)
        number = len(self.model_lists)
        refused = self._refused(recorded)
        if refused is not None:
            return _error(refused, number)
        try:
            limit = int(request.query.get("limit", "20"))
        except ValueError:
            return _error(ApiError.invalid_request("limit: Input should be an integer"), number)
        ids = self.models[: max(1, min(limit, 1000))]
        data = [
            {
                "type": "model",
                "id": model,
                "display_name": model,
                "created_at": "2026-01-01T00:00:00Z",
            }
            for model in ids
        ]
        page = {
            "data": data,
            "has_more": len(ids) < len(self.models),
            "first_id": ids[0] if ids else None,
            "last_id": ids[-1] if ids else None,
        }
        return web.Response(text=json.dumps(page), headers=_headers(number, "application/json"))


def _headers(number: int, content_type: str) -> dict[str, str]:
    return {"Content-Type": content_type, "request-id": f"req_fake_{number}"}


def _error(error: ApiError, number: int) -> web.Response:
    payload = {"type": "error", "error": {"type": error.type, "message": error.message}}
    headers = {**_headers(number, "application/json"), **error.headers}
    return web.Response(status=error.status, text=json.dumps(payload), headers=headers)


def _stop_reason(reply: Reply) -> str:
    if reply.stop_reason is not None:
        return reply.stop_reason
    return "tool_use" if any(b.get("type") == "tool_use" for b in reply.content) else "end_turn"


def _message(reply: Reply, body: Mapping[str, Any], number: int) -> dict[str, Any]:
    """The non-streaming ``message`` object."""
    return {
        "id": f"msg_fake_{number}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": [dict(b) for b in reply.content],
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": {
            "input_tokens": reply.input_tokens,
            "output_tokens": reply.output_tokens,
            "cache_creation_input_tokens": reply.cache_creation_input_tokens,
            "cache_read_input_tokens": reply.cache_read_input_tokens,
        },
    }


Event = tuple[str, dict[str, Any]]
"""A server-sent event: its name and its JSON data (whose ``type`` is the name)."""


def _event(name: str, **data: Any) -> Event:
    return name, {"type": name, **data}


def sse_events(reply: Reply, body: Mapping[str, Any], number: int = 1) -> list[Event]:
    """The server-sent events of a streamed ``reply``, in order."""
    start = _message(reply, body, number)
    start.update(content=[], stop_reason=None, usage={**start["usage"], "output_tokens": 1})
    events = [_event("message_start", message=start)]
    for index, block in enumerate(reply.content):
        if block["type"] == "tool_use":
            opening = {**block, "input": {}}
            raw = json.dumps(block["input"])
            third = max(1, len(raw) // 3)
            pieces = [raw[:third], raw[third : 2 * third], raw[2 * third :]]
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces if p]
        elif block["type"] == "text":
            opening = {"type": "text", "text": ""}
            words = re.findall(r"\s*\S+\s*", block["text"])
            deltas = [{"type": "text_delta", "text": w} for w in words]
        else:
            raise ValueError(f"fake Anthropic server cannot stream a {block['type']!r} block")
        events.append(_event("content_block_start", index=index, content_block=opening))
        if index == 0:
            events.append(_event("ping"))
        events += [_event("content_block_delta", index=index, delta=d) for d in deltas]
        events.append(_event("content_block_stop", index=index))
    delta = {"stop_reason": _stop_reason(reply), "stop_sequence": None}
    events.append(
        _event("message_delta", delta=delta, usage={"output_tokens": reply.output_tokens})
    )
    events.append(_event("message_stop"))
    return events


async def _open_stream(request: web.Request, number: int) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={**_headers(number, "text/event-stream"), "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    return response


async def _send(response: web.StreamResponse, name: str, data: Mapping[str, Any]) -> None:
    await response.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())


async def _stream(
    request: web.Request,
    reply: Reply,
    body: Mapping[str, Any],
    number: int,
    stopping: asyncio.Event,
) -> web.StreamResponse:
    response = await _open_stream(request, number)
    for sent, (name, data) in enumerate(sse_events(reply, body, number)):
        if sent == reply.hang_after:
            await stopping.wait()
        if sent == reply.gate_after and reply.gate is not None:
            await reply.gate.wait()
        if sent in (reply.cut_after, reply.hang_after):
            if request.transport is not None:
                request.transport.abort()
            return response
        await _send(response, name, data)
    await response.write_eof()
    return response


async def _stream_error(
    request: web.Request, error: ApiError, body: Mapping[str, Any], number: int
) -> web.StreamResponse:
    response = await _open_stream(request, number)
    name, start = sse_events(Reply(content=[]), body, number)[0]
    await _send(response, name, start)
    await _send(response, *_event("error", error={"type": error.type, "message": error.message}))
    await response.write_eof()
    return response


def _blocks(message: Mapping[str, Any]) -> list[Block]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _check_request(body: Mapping[str, Any]) -> str | None:
    """The first broken rule of a request body, as the API words it, or ``None``."""
    for key in ("model", "max_tokens", "messages"):
        if key not in body:
            return f"{key}: Field required"
    messages = body["messages"]
    if not isinstance(messages, list):
        return "messages: Input should be a valid list"
    return check_tool_results(messages) or check_tools_defined(body)


TOOLS_NEEDED = "Requests which include `tool_use` or `tool_result` blocks must define tools."
"""The API's words for a history with tool blocks in a request without ``tools``."""
CHOICE_WITHOUT_TOOLS = "tool_choice may only be specified while providing tools."
"""The API's words for a ``tool_choice`` in a request without ``tools``."""
_CHOICES = ("auto", "any", "tool", "none")


def check_tools_defined(body: Mapping[str, Any]) -> str | None:
    """The API's error for a request that uses tools it does not define: a ``tool_choice``
    (of a known type) without ``tools``, or ``tool_use``/``tool_result`` blocks in its
    messages without ``tools``; ``None`` when it is well formed."""
    tools = body.get("tools")
    choice = body.get("tool_choice")
    if choice is not None:
        kind = choice.get("type") if isinstance(choice, dict) else None
        if kind not in _CHOICES:
            return "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'"
        if not tools:
            return CHOICE_WITHOUT_TOOLS
    if not tools and any(
        block.get("type") in ("tool_use", "tool_result")
        for message in body.get("messages") or ()
        if isinstance(message, dict)
        for block in _blocks(message)
    ):
        return TOOLS_NEEDED
    return None


def check_tool_results(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """Check the ``tool_use`` / ``tool_result`` pairing of a message list.

    Returns the API-style error message of the first violation, or ``None``.
    """
    asked: list[str] = []  # tool_use ids of the previous assistant message
    for i, message in enumerate(messages):
        blocks = _blocks(message)
        if message.get("role") == "assistant":
            if asked:
                return _unanswered(i - 1, asked)
            asked = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            continue
        answered: list[str] = []
        seen_other = False
        for j, block in enumerate(blocks):
            if block.get("type") != "tool_result":
                seen_other = True
                continue
            use_id = block.get("tool_use_id")
            where = f"messages.{i}.content.{j}"
            if seen_other:
                return f"{where}: `tool_result` blocks must come before any other content"
            if use_id not in asked or use_id in answered:
                return (
                    f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {use_id}. "
                    "Each `tool_result` block must have a corresponding `tool_use` block in the "
                    "previous message."
                )
            answered.append(use_id)
        missing = [a for a in asked if a not in answered]
        if missing:
            return _unanswered(i - 1, missing)
        asked = []
    if asked:
        return _unanswered(len(messages) - 1, asked)
    return None


def _unanswered(index: int, ids: Sequence[str]) -> str:
    return (
        f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately "
        f"after: {', '.join(ids)}. Each `tool_use` block must have a corresponding `tool_result` "
        "block in the next message."
    )
