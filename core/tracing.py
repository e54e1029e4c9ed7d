"""OpenTelemetry spans of a run: the run, its model calls and its tool calls.

Each engine entry point is one run span (``invoke_agent threadbot``; an entry point
called from another one of the same conversation goes on in its span). Inside it,
each model call is a ``chat {model}`` span and each tool call the run executes an
``execute_tool {tool}`` span, both children of the run span, named and attributed
as the GenAI semantic conventions say:

- agent (run) spans: https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-agent-spans/
- model call and tool call spans: https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/
- Anthropic's usage: https://opentelemetry.io/docs/specs/semconv/gen-ai/anthropic/
  (``gen_ai.usage.input_tokens`` counts the cached tokens too: the API's
  ``input_tokens`` plus the cache reads and writes, which are also given apart).

Every span carries the conversation id (``gen_ai.conversation.id``), the run's id
and entry point, and what the engine's ``attributes`` lookup gives for the
conversation: the bot gives the platform ids of its thread (core never learns
where a conversation lives). Attributes are ids, names, states and counts: never a
token, a key, a prompt, a message or a tool's input or output; a failure is
recorded by its exception's class name (``error.type``), never its message.

Only the OpenTelemetry API is imported here; without an SDK installed and a
tracer provider given (or set globally), every span is the API's no-op span and
the lookup is never called. The run's spans live in a context variable for the
extent of the run, so nothing leaks into the next run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import ParamSpec

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider

from core.vocabulary.entries import ModelUsage
from core.vocabulary.tool_records import ToolCallRecord, ToolState

log = logging.getLogger(__name__)
P = ParamSpec("P")

SpanAttributes = Callable[[str], Awaitable[Mapping[str, str]]]
"""The attributes every span of a conversation's runs carries, by the conversation's id
(the bot's: its platform ids). Ids only; asked once per run, only when it is traced."""

AGENT = "threadbot"
"""``gen_ai.agent.name`` of the run spans."""
PROVIDER = "anthropic"
"""``gen_ai.provider.name`` (and the older ``gen_ai.system``) of model call spans: every
model speaks the Messages API (:mod:`core.models.base`)."""

CONVERSATION_ID = "gen_ai.conversation.id"
RUN_ID = "threadbot.run.id"
"""The run's id, as the model calls of the run are stored with it (``ModelUsage.run_id``)."""
RUN_ENTRY = "threadbot.run.entry"
"""The engine entry point of the run: ``start``, ``reply``, ``run``, ``decide``, ``stop``..."""
COST = "threadbot.usage.cost_micro_usd"
"""The model call's cost in integer micro-dollars (``ModelUsage.cost_micro_usd``); absent
for a model without a price. The semantic conventions have no cost attribute."""
TOOL_STATE = "threadbot.tool.state"
"""The tool call's final state (:class:`core.vocabulary.tool_records.ToolState`)."""

FAILED_STATES = frozenset({ToolState.FAILED, ToolState.UNKNOWN, ToolState.INTERRUPTED})
"""Final tool states that set the span's status to error (``error.type`` is the state)."""


@dataclass(frozen=True)
class _Run:
    """The run in progress: its conversation, its tracer, what its spans all carry."""

    conversation_id: str
    tracer: Tracer
    attributes: Mapping[str, str | int]


_run: ContextVar[_Run | None] = ContextVar("threadbot_trace_run", default=None)
_tool: ContextVar[tuple[str, Span] | None] = ContextVar("threadbot_trace_tool", default=None)


class Tracing:
    """Opens the run span of each engine entry point (:meth:`run`).

    ``provider``: the tracer provider the spans go to (the bot's, when it exports
    them); None: the global one, the API's no-op unless an SDK was installed as
    the global provider. ``attributes``: what every span of a conversation carries
    besides its id (:data:`SpanAttributes`).
    """

    def __init__(
        self,
        *,
        provider: TracerProvider | None = None,
        attributes: SpanAttributes | None = None,
    ) -> None:
        self._tracer = (provider or trace.get_tracer_provider()).get_tracer(AGENT)
        self._attributes = attributes

    @contextlib.asynccontextmanager
    async def run(self, entry: str, conversation_id: str, run_id: str) -> AsyncIterator[None]:
        """The span of one run of ``conversation_id`` by the entry point ``entry``.

        Within a run of the same conversation (an entry point calling another), the
        block goes on in that run's span. An exception out of the block sets the
        span's status to error; a cancellation (a stop, a shutdown) marks it
        ``threadbot.cancelled``.
        """
        current = _run.get()
        if current is not None and current.conversation_id == conversation_id:
            yield
            return
        base: dict[str, str | int] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": AGENT,
            CONVERSATION_ID: conversation_id,
            RUN_ID: run_id,
            RUN_ENTRY: entry,
        }
        with _span(self._tracer, f"invoke_agent {AGENT}", SpanKind.INTERNAL, base) as span:
            if span.is_recording():
                base.update(await self._place(conversation_id))
                span.set_attributes(base)
            token = _run.set(_Run(conversation_id, self._tracer, base))
            try:
                yield
            finally:
                _run.reset(token)

    async def _place(self, conversation_id: str) -> Mapping[str, str]:
        """The lookup's attributes; none when it fails (tracing never fails a run)."""
        if self._attributes is None:
            return {}
        try:
            return await self._attributes(conversation_id)
        except Exception:
            log.warning("conversation %s: no span attributes", conversation_id, exc_info=True)
            return {}


class ModelCall:
    """The span of one model call, told the call's usage once it is answered."""

    def __init__(self, span: Span) -> None:
        self._span = span

    def answered(self, usage: ModelUsage | None, stop_reason: str) -> None:
        """Set the response's model, tokens, cost and finish reason on the span.

        ``gen_ai.usage.input_tokens`` is the API's ``input_tokens`` plus the cache
        reads and writes (the semantic conventions' Anthropic page); the cache reads
        and writes are also given on their own.
        """
        self._span.set_attribute("gen_ai.response.finish_reasons", [stop_reason])
        if usage is None:
            return
        self._span.set_attributes(
            {
                "gen_ai.response.model": usage.model,
                "gen_ai.usage.input_tokens": (
                    usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
                ),
                "gen_ai.usage.output_tokens": usage.output_tokens,
                "gen_ai.usage.cache_read.input_tokens": usage.cache_read_tokens,
                "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens,
            }
        )
        if usage.cost_micro_usd is not None:
            self._span.set_attribute(COST, usage.cost_micro_usd)


@contextlib.contextmanager
def model_call(model: str, *, max_tokens: int) -> Iterator[ModelCall]:
    """The span of a model call to ``model`` (the id asked for), a child of the run's span.

    Outside a run nothing is recorded. A failure of the call (its exception) sets
    the span's status to error with ``error.type``.
    """
    attributes: dict[str, str | int] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": PROVIDER,
        "gen_ai.system": PROVIDER,
        "gen_ai.request.model": model,
        "gen_ai.request.max_tokens": max_tokens,
    }
    with _in_run(f"chat {model}", SpanKind.CLIENT, attributes) as span:
        yield ModelCall(span)


@contextlib.contextmanager
def tool_call(name: str, tool_use_id: str) -> Iterator[None]:
    """The span of the tool call ``tool_use_id`` of the tool ``name``, a child of the run's.

    Its final state comes from :func:`tool_call_ended`; outside a run nothing is
    recorded. An exception out of the block sets the span's status to error.
    """
    attributes: dict[str, str | int] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": tool_use_id,
        "gen_ai.tool.type": "function",
    }
    with _in_run(f"execute_tool {name}", SpanKind.INTERNAL, attributes) as span:
        token = _tool.set((tool_use_id, span))
        try:
            yield
        finally:
            _tool.reset(token)


async def traced_call(
    record: ToolCallRecord,
    run: Callable[P, Awaitable[None]],
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> None:
    """``await run(*args, **kwargs)``, the run of the tool call ``record``, inside its span
    (:func:`tool_call`). The coroutine is made inside the span, so a task cancelled
    before it started leaves none behind unawaited."""
    with tool_call(record.name, record.tool_use_id):
        await run(*args, **kwargs)


def tool_call_ended(tool_use_id: str, state: ToolState) -> None:
    """Record ``state`` as the final state of the call ``tool_use_id`` on its span.

    Only the span of that call takes it (a result given outside the call's span,
    such as a call closed by a stop, has none). ``failed``, ``unknown`` and
    ``interrupted`` set the span's status to error, with the state as ``error.type``.
    """
    current = _tool.get()
    if current is None or current[0] != tool_use_id:
        return
    span = current[1]
    span.set_attribute(TOOL_STATE, state.value)
    if state in FAILED_STATES:
        span.set_attribute("error.type", state.value)
        span.set_status(Status(StatusCode.ERROR))


@contextlib.contextmanager
def _in_run(name: str, kind: SpanKind, attributes: Mapping[str, str | int]) -> Iterator[Span]:
    """A child span of the current run, with the run's attributes before ``attributes``;
    a no-op span outside a run."""
    run = _run.get()
    if run is None:
        with _span(trace.NoOpTracer(), name, kind, attributes) as span:
            yield span
        return
    with _span(run.tracer, name, kind, {**run.attributes, **attributes}) as span:
        yield span


@contextlib.contextmanager
def _span(
    tracer: Tracer, name: str, kind: SpanKind, attributes: Mapping[str, str | int]
) -> Iterator[Span]:
    """A span made current for the block; an exception sets error status with its class
    name as ``error.type`` (never its message), a cancellation only says so."""
    with tracer.start_as_current_span(
        name,
        kind=kind,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except asyncio.CancelledError:
            span.set_attribute("threadbot.cancelled", True)
            raise
        except Exception as exc:
            span.set_attribute("error.type", type(exc).__qualname__)
            span.set_status(Status(StatusCode.ERROR))
            raise
