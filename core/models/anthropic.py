"""The :class:`~core.models.base.Model` protocol spoken by the Anthropic Messages API.

One :class:`~core.models.base.ModelRequest` becomes one streaming ``POST /v1/messages``
(server-sent events, https://docs.anthropic.com/en/api/messages-streaming). The
events of :mod:`core.models.base` come out in this order:

* a :class:`~core.models.base.TextDelta` for each ``text_delta``, as it arrives;
* a :class:`~core.models.base.ToolInputDelta` for each ``input_json_delta``, as it
  arrives, named by its ``tool_use`` block's id and tool (from the block's
  ``content_block_start``);
* after the final message, a :class:`~core.models.base.ToolCallEvent` for each ``tool_use``
  block, in content order, with its input parsed to a dict;
* one :class:`~core.models.base.Usage` (token counts of the call);
* one :class:`~core.models.base.TurnEnd` with the API's ``stop_reason``.

Other content blocks (``thinking``, server tools) are not turned into events.

Every request carries prompt-cache breakpoints (``cache_control: ephemeral``,
https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching): on the last
tool and on the system prompt (the long-lived prefix, rendered tools, then system),
and on the last block of the newest message, so the next turn reads everything
before it from the cache (:func:`with_breakpoints`; three of the four allowed).

A request whose ``tool_choice`` is ``none`` (the model may not call the tools it is
given: an expert's consultation) sends ``tool_choice: {"type": "none"}`` beside its
tools; ``auto``, the API's default, is not sent, so the bytes of every other request
stay as they were. The API refuses a ``tool_choice`` without ``tools``, and a history
holding ``tool_use`` blocks without ``tools``
(https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use):
without tools no ``tool_choice`` is sent (none can be called anyway).

Retries are the SDK's: the client retries connection errors, 408, 409, 429 and 5xx
``max_retries`` times, honouring ``retry-after``. What is still failing afterwards
becomes a :class:`~core.vocabulary.errors.ModelError` (https://docs.anthropic.com/en/api/errors)::

    429 rate_limit_error, 529 overloaded_error   -> ModelOverloaded (retryable)
    other 5xx, 408, 409, connection, timeout      -> ModelError(retryable=True)
    other 4xx (400 invalid_request_error, 401...) -> ModelError(retryable=False)

An ``error`` event in the middle of a stream (HTTP status 200) is classified by its
``error.type`` the same way; a connection lost mid-stream, or a stream that ends
without a stop reason, is ``ModelError(retryable=True)``. The SDK does not retry
those: the caller decides. Messages are safe to show to people: they carry the
API's own explanation, never the key or the request.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any, cast

import anthropic
import httpx2
from anthropic.types import MessageParam, ToolChoiceNoneParam, ToolParam

from core.models.base import (
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCallEvent,
    ToolChoice,
    ToolInputDelta,
    TurnEnd,
    Usage,
)
from core.vocabulary.errors import ModelError, ModelOverloaded

log = logging.getLogger(__name__)

_OVERLOADED_TYPES = frozenset({"overloaded_error", "rate_limit_error"})
_RETRYABLE_TYPES = frozenset({"api_error", "timeout_error"})
_RETRYABLE_STATUSES = frozenset({408, 409})
BROKE_OFF = "The connection to the model API broke off"
"""What a thread is told when the model's response stopped coming part way."""


class AnthropicModel:
    """A :class:`~core.models.base.Model` backed by ``anthropic.AsyncAnthropic``.

    ``name`` is the model id sent with every request (e.g. ``"claude-opus-5-5"``).
    The client owns the connection pool, key, base URL, timeout and retry policy.
    """

    def __init__(self, *, client: anthropic.AsyncAnthropic, model: str) -> None:
        self._client = client
        self.name = model

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Yield the events of one streamed response to ``request``.

        An empty ``system`` and an empty tool list are left out of the request. When
        the model is overloaded (:class:`~core.vocabulary.errors.ModelOverloaded`: a 529, or a
        429 after the client's own retries) before any event was yielded, the next
        of ``request.fallbacks`` is asked, with the same request otherwise; a model
        that fails after its answer began is not replaced (the caller retries from
        the journal). Raises :class:`~core.vocabulary.errors.ModelOverloaded` when every model
        was, or :class:`~core.vocabulary.errors.ModelError` (see the module docstring; a 400
        is never retried). Cancelling the consuming task, or closing this
        generator, closes the HTTP stream.
        """
        models = [request.model or self.name, *request.fallbacks]
        for index, model_id in enumerate(models):
            began = False
            try:
                async for event in self._stream(request, model_id):
                    began = True
                    yield event
                return
            except ModelOverloaded:
                if began or index == len(models) - 1:
                    raise
                log.warning("model %s is overloaded; asking %s", model_id, models[index + 1])

    async def _stream(self, request: ModelRequest, model_id: str) -> AsyncIterator[ModelEvent]:
        """One streamed response of ``model_id`` (see :meth:`stream`)."""
        tools = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
        system, tools, messages = with_breakpoints(request.system, tools, request.messages)
        choice = tool_choice(request.tool_choice, has_tools=bool(tools))
        streaming = False  # an event came: a connection error now broke the stream off
        try:
            async with self._client.messages.stream(
                model=model_id,
                max_tokens=request.max_tokens,
                system=cast(Any, system) if system else anthropic.omit,
                messages=cast(list[MessageParam], messages),
                tools=cast(list[ToolParam], tools) if tools else anthropic.omit,
                tool_choice=choice if choice is not None else anthropic.omit,
            ) as stream:
                opened: dict[int, tuple[str, str]] = {}  # tool_use blocks: index -> id, name
                async for event in stream:
                    streaming = True
                    if (
                        event.type == "content_block_start"
                        and event.content_block.type == "tool_use"
                    ):
                        opened[event.index] = (event.content_block.id, event.content_block.name)
                    elif event.type == "content_block_delta" and event.delta.type == "text_delta":
                        yield TextDelta(text=event.delta.text)
                    elif (
                        event.type == "content_block_delta"
                        and event.delta.type == "input_json_delta"
                        and event.index in opened
                    ):
                        call_id, name = opened[event.index]
                        yield ToolInputDelta(
                            index=event.index,
                            id=call_id,
                            name=name,
                            partial_json=event.delta.partial_json,
                        )
                message = await stream.get_final_message()
        except anthropic.APIError as exc:
            raise self._logged(_model_error(exc, streaming=streaming), exc) from exc
        except httpx2.TimeoutException as exc:  # SDKs before 2.17 do not wrap these
            error = ModelError("The model API timed out", retryable=True)
            raise self._logged(error, exc) from exc
        except httpx2.TransportError as exc:
            error = ModelError(BROKE_OFF, retryable=True)
            raise self._logged(error, exc) from exc
        if message.stop_reason is None:
            error = ModelError("The model API response ended early", retryable=True)
            raise self._logged(error, None)

        for block in message.content:
            if block.type == "tool_use":
                yield ToolCallEvent(id=block.id, name=block.name, input=_as_input(block.input))
        usage = message.usage
        yield Usage(
            model=message.model or model_id,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_input_tokens or 0,
            cache_write_tokens=usage.cache_creation_input_tokens or 0,
        )
        yield TurnEnd(
            stop_reason=message.stop_reason,
            content=tuple(b.model_dump(mode="json", exclude_none=True) for b in message.content),
        )

    def _logged(self, error: ModelError, cause: BaseException | None) -> ModelError:
        """Log ``error`` at WARNING with its cause: status, error type, endpoint host."""
        status = getattr(cause, "status_code", None)
        kind = getattr(cause, "type", None) or (type(cause).__name__ if cause else "no stop reason")
        log.warning(
            "model %s at %s failed: %s (HTTP %s, %s)",
            self.name,
            self._client.base_url.host,
            error,
            status if status is not None else "-",
            kind,
        )
        return error

    async def aclose(self) -> None:
        """Close the client's HTTP connections (the client is unusable afterwards)."""
        await self._client.close()


def anthropic_model_from(
    api_key: str | None,
    base_url: str | None,
    model: str,
    max_retries: int = 2,
    timeout: float = 600.0,
) -> AnthropicModel:
    """Build an :class:`AnthropicModel` with its own ``AsyncAnthropic`` client.

    ``api_key`` and ``base_url`` fall back to ``ANTHROPIC_API_KEY`` and
    ``ANTHROPIC_BASE_URL`` when ``None``. ``max_retries`` is the SDK's retry count
    for connection errors, 408, 409, 429 and 5xx; ``timeout`` is in seconds.
    """
    client = anthropic.AsyncAnthropic(
        api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout
    )
    return AnthropicModel(client=client, model=model)


def tool_choice(choice: ToolChoice, *, has_tools: bool) -> ToolChoiceNoneParam | None:
    """The ``tool_choice`` sent for ``choice``: ``{"type": "none"}`` for ``none`` when the
    request has tools; None (not sent) for ``auto``, the API's default, and for a request
    without tools (the API refuses a ``tool_choice`` without them; see the module
    docstring)."""
    if choice == "none" and has_tools:
        return {"type": "none"}
    return None


def _as_input(raw: object) -> dict[str, Any]:
    """A ``tool_use`` input as a dict (the API always sends a JSON object)."""
    return cast(dict[str, Any], raw) if isinstance(raw, dict) else {}


CACHE: dict[str, str] = {"type": "ephemeral"}
"""A prompt-cache breakpoint (the default five-minute lifetime)."""
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})
"""Blocks that cannot carry ``cache_control``."""


def with_breakpoints(
    system: str, tools: list[dict[str, Any]], messages: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """``(system, tools, messages)`` with cache breakpoints, as the API takes them.

    The system prompt becomes one text block; the last tool, that block and the last
    markable block of the newest message get ``cache_control``. Nothing else changes
    (and nothing is mutated): the bytes before each breakpoint are the caller's, so
    a caller that builds the same history gets the same prefix.
    """
    system_blocks = [{"type": "text", "text": system, "cache_control": CACHE}] if system else []
    marked_tools = [*tools[:-1], {**tools[-1], "cache_control": CACHE}] if tools else []
    marked = list(messages)
    if marked:
        newest = dict(marked[-1])
        content = newest.get("content")
        blocks = (
            [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        )
        for index in range(len(blocks) - 1, -1, -1):
            if blocks[index].get("type") not in _UNMARKABLE:
                blocks[index] = {**blocks[index], "cache_control": CACHE}
                break
        newest["content"] = blocks
        marked[-1] = newest
    return system_blocks, marked_tools, marked


def _model_error(exc: anthropic.APIError, *, streaming: bool = False) -> ModelError:
    """Translate an SDK failure (after the SDK's own retries) into a core error.

    ``streaming``: the response had begun (an event came), so a connection error
    broke it off rather than kept the API out of reach (anthropic 2.17 and later wrap
    an error read mid-stream in ``APIConnectionError``; earlier releases raise the
    httpx error itself, caught beside this)."""
    if isinstance(exc, anthropic.APITimeoutError):
        return ModelError("The model API timed out", retryable=True)
    if isinstance(exc, anthropic.APIConnectionError):
        return ModelError(
            BROKE_OFF if streaming else "Could not reach the model API", retryable=True
        )
    if not isinstance(exc, anthropic.APIStatusError):
        return ModelError("The model API sent a response that could not be read", retryable=False)

    status, kind = exc.status_code, exc.type
    detail = exc.api_message or f"HTTP {status}"
    if status in (429, 529) or kind in _OVERLOADED_TYPES:
        if status == 429 or kind == "rate_limit_error":
            return ModelOverloaded("The model API is rate-limiting us", retryable=True)
        return ModelOverloaded("The model API is overloaded", retryable=True)
    if status >= 500 or status in _RETRYABLE_STATUSES or kind in _RETRYABLE_TYPES:
        return ModelError(f"The model API failed: {detail}", retryable=True)
    return ModelError(f"The model API rejected the request: {detail}", retryable=False)
