"""OpenTelemetry spans of a run: the run, its model calls and its tool calls.

Each engine entry point is one run span (``invoke_agent threadbot``; an entry point
called from another one of the same conversation goes on in its run, and its span). Inside it,
each model call is a ``chat {model}`` span and each tool call the run executes an
``execute_tool {tool}`` span, both children of the run span, named and attributed
as the GenAI semantic conventions say (an escalation, which they do not name, is a
``threadbot.escalate`` child span, a delegation's calls its children:
:meth:`RunSpan.escalation`; an expert's consultation a ``threadbot.ask_expert`` child
span, its model call's ``chat`` span inside it: :meth:`RunSpan.consultation`):

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
the lookup is never called. A run holds its span (:class:`RunSpan`, in
:class:`core.run.state.Run`) and makes its model call and tool call spans from it,
so nothing leaks into the next run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider

from core.vocabulary.entries import ModelUsage
from core.vocabulary.tool_records import ToolCallRecord, ToolState

log = logging.getLogger(__name__)

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

ESCALATED_TO = "threadbot.escalation.to"
"""Whom a stuck run asked for help (``people``, or ``expert``: a delegation)."""
ESCALATION_FAILURES = "threadbot.escalation.failures"
"""How many failed calls in a row made the run escalate."""
ESCALATION_OUTCOME = "threadbot.escalation.outcome"
"""How a delegation ended in this run (``merged``, ``not_usable``; absent: it goes on in a
later run, after a person's decision or a restart)."""
ESCALATION_WHY = "threadbot.escalation.why"
"""Why the run escalated: ``failures``, ``early_finish`` or ``prose``."""
NUDGE_WHY = "threadbot.nudge.why"
"""What a nudge answered: ``early_finish`` or ``prose`` (:meth:`RunSpan.nudge`)."""
WORKFLOW_NAME = "threadbot.workflow"
"""The workflow a conversation runs (:meth:`RunSpan.state_entered`)."""
WORKFLOW_STATE = "threadbot.workflow.state"
"""The workflow state entered."""
WORKFLOW_STATE_KIND = "threadbot.workflow.state.kind"
"""Its kind: ``agent``, ``action``, ``human``, ``wait`` or ``end``."""

CONSULTATION_OUTCOME = "threadbot.consultation.outcome"
"""What became of an ``ask_expert`` call: ``answered``, ``failed`` or ``refused``."""
CONSULTATION_NUMBER = "threadbot.consultation.number"
"""The conversation's consultations answered so far, this one included."""

FAILED_STATES = frozenset({ToolState.FAILED, ToolState.UNKNOWN, ToolState.INTERRUPTED})
"""Final tool states that set the span's status to error (``error.type`` is the state)."""


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


class Consultation:
    """The span of one consultation of the expert, told what became of it."""

    def __init__(self, span: Span) -> None:
        self._span = span

    def ended(self, outcome: str, answered: int) -> None:
        """Record ``outcome`` (``answered``, ``failed``, ``refused``) and ``answered``, the
        consultations answered so far; any outcome but ``answered`` sets the span's
        status to error, with the outcome as ``error.type``."""
        self._span.set_attributes({CONSULTATION_OUTCOME: outcome, CONSULTATION_NUMBER: answered})
        if outcome != "answered":
            self._span.set_attribute("error.type", outcome)
            self._span.set_status(Status(StatusCode.ERROR))


class EscalationSpan:
    """The span of one escalation, told how a delegation ended (:meth:`ended`)."""

    def __init__(self, span: Span) -> None:
        self._span = span

    def ended(self, outcome: str) -> None:
        """Record how the delegation ended (``merged``, ``not_usable``)."""
        self._span.set_attribute(ESCALATION_OUTCOME, outcome)


class ToolSpan:
    """The span of one tool call, told the call's final state once it has one."""

    def __init__(self, span: Span) -> None:
        self._span = span

    def ended(self, state: ToolState) -> None:
        """Record ``state`` as the call's final state on its span.

        ``failed``, ``unknown`` and ``interrupted`` set the span's status to error,
        with the state as ``error.type``.
        """
        self._span.set_attribute(TOOL_STATE, state.value)
        if state in FAILED_STATES:
            self._span.set_attribute("error.type", state.value)
            self._span.set_status(Status(StatusCode.ERROR))


@dataclass(frozen=True)
class RunSpan:
    """The span of one run: its tracer and what every span of the run carries.

    Its model calls and tool calls are its child spans (:meth:`model_call`,
    :meth:`tool_call`). :data:`NO_SPAN` records nothing (no run, or no tracing).
    """

    tracer: Tracer
    attributes: Mapping[str, str | int]

    @contextlib.contextmanager
    def model_call(self, model: str, *, max_tokens: int) -> Iterator[ModelCall]:
        """The span of a model call to ``model`` (the id asked for), a child of the run's.

        A failure of the call (its exception) sets the span's status to error with
        ``error.type``.
        """
        attributes: dict[str, str | int] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.system": PROVIDER,
            "gen_ai.request.model": model,
            "gen_ai.request.max_tokens": max_tokens,
        }
        with self._child(f"chat {model}", SpanKind.CLIENT, attributes) as span:
            yield ModelCall(span)

    @contextlib.contextmanager
    def tool_call(self, name: str, tool_use_id: str) -> Iterator[ToolSpan]:
        """The span of the tool call ``tool_use_id`` of the tool ``name``, a child of the
        run's; its final state comes from :meth:`ToolSpan.ended`. An exception out of
        the block sets the span's status to error."""
        attributes: dict[str, str | int] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": tool_use_id,
            "gen_ai.tool.type": "function",
        }
        with self._child(f"execute_tool {name}", SpanKind.INTERNAL, attributes) as span:
            yield ToolSpan(span)

    @contextlib.contextmanager
    def escalation(self, to: str, failures: int, why: str = "failures") -> Iterator[EscalationSpan]:
        """The span of an escalation (``threadbot.escalate``, a child of the run's): the run
        was stuck after ``failures`` failed calls in a row (``why``: ``failures``), or a
        second early finish or reply in prose (``early_finish``, ``prose``:
        :mod:`core.run.nudges`), and asked ``to`` for help: ``people``, or ``expert`` (a
        delegation, :mod:`core.run.delegation`, whose model calls and tool calls are its
        children) (:mod:`core.run.escalation`)."""
        attributes: dict[str, str | int] = {
            ESCALATED_TO: to,
            ESCALATION_FAILURES: failures,
            ESCALATION_WHY: why,
        }
        with self._child("threadbot.escalate", SpanKind.INTERNAL, attributes) as span:
            yield EscalationSpan(span)

    @contextlib.contextmanager
    def consultation(self, record: ToolCallRecord, model: str) -> Iterator[Consultation]:
        """The span of a consultation of the expert ``model`` by the ``ask_expert`` call
        ``record`` (``threadbot.ask_expert``, a child of the run's; the expert's model
        call, if one is made, is its child): :mod:`core.run.consultation`."""
        attributes: dict[str, str | int] = {
            "gen_ai.tool.name": record.name,
            "gen_ai.tool.call.id": record.tool_use_id,
            "gen_ai.request.model": model,
        }
        with self._child("threadbot.ask_expert", SpanKind.INTERNAL, attributes) as span:
            yield Consultation(span)

    @contextlib.contextmanager
    def nudge(self, why: str) -> Iterator[None]:
        """The span of a nudge (``threadbot.nudge``, a child of the run's): a ``finish``
        refused (``why``: ``early_finish``) or a reply in prose answered with a note
        (``prose``), decided outside the model (:mod:`core.run.nudges`)."""
        with self._child("threadbot.nudge", SpanKind.INTERNAL, {NUDGE_WHY: why}):
            yield

    def state_entered(self, workflow: str, state: str, kind: str) -> None:
        """The span of entering a workflow state (``threadbot.workflow.state``, a child of
        the run's, as long as the commit that entered it): the workflow's name, the
        state's and its kind (docs/architecture.md, "Workflows")."""
        attributes = {WORKFLOW_NAME: workflow, WORKFLOW_STATE: state, WORKFLOW_STATE_KIND: kind}
        with self._child("threadbot.workflow.state", SpanKind.INTERNAL, attributes):
            pass

    async def traced_call(
        self, record: ToolCallRecord, run: Callable[[ToolSpan], Awaitable[None]]
    ) -> None:
        """``await run(span)``, the run of the tool call ``record``, inside its span
        (:meth:`tool_call`). The coroutine is made inside the span, so a task cancelled
        before it started leaves none behind unawaited."""
        with self.tool_call(record.name, record.tool_use_id) as span:
            await run(span)

    @contextlib.contextmanager
    def _child(
        self, name: str, kind: SpanKind, attributes: Mapping[str, str | int]
    ) -> Iterator[Span]:
        """A child span of the run, with the run's attributes before ``attributes``."""
        with _span(self.tracer, name, kind, {**self.attributes, **attributes}) as span:
            yield span


NO_SPAN = RunSpan(trace.NoOpTracer(), {})
"""The span of no run: records nothing."""


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
    async def run(self, entry: str, conversation_id: str, run_id: str) -> AsyncIterator[RunSpan]:
        """The span of one run of ``conversation_id`` by the entry point ``entry``.

        An exception out of the block sets the span's status to error; a
        cancellation (a stop, a shutdown) marks it ``threadbot.cancelled``.
        """
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
            yield RunSpan(self._tracer, base)

    async def _place(self, conversation_id: str) -> Mapping[str, str]:
        """The lookup's attributes; none when it fails (tracing never fails a run)."""
        if self._attributes is None:
            return {}
        try:
            return await self._attributes(conversation_id)
        except Exception:
            log.warning("conversation %s: no span attributes", conversation_id, exc_info=True)
            return {}


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
