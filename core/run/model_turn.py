"""One model call of a run: the request, the streamed answer, its usage and cost.

The request is the same in every position, the cached prefix of every call: the run's
system prompt and every tool offered here (:func:`tools_of`: ``ask_expert`` only where
an expert may be consulted; a position's instructions are in the history,
:class:`core.vocabulary.entries.StepEntered`, and the tools it does not offer are
refused when called, :mod:`core.run.admission`). Its model is the position's role's
(:meth:`core.workflows.model.Workflow.role_at`,
:meth:`core.run.settings.EngineSettings.model_of`: the planner's while planning, the
executor's once the plan is approved), unless the run's scope names a role of its own
(the expert's, in a delegation: :attr:`core.run.scope.Scope.role`, :func:`role_of`), and
the journaled usage names that role. Its messages are the run's history
(:class:`core.run.history.History`): the whole of it, or, for the executor when its
model differs from the planner's, the executor's own view, which starts from the
approved plan (:func:`own_plan`). The answer becomes an
:class:`core.vocabulary.entries.AssistantTurn`, journaled with its tokens, latency,
price entry and cost (:mod:`core.pricing`), in its trace span
(:meth:`core.tracing.RunSpan.model_call`). While the model writes a turn of the
conversation's own run, its text so far and its ``finish`` call's ``answer`` so far go
to the deps' preview (:mod:`core.run.preview`, docs/architecture.md "Streamed answers").
:func:`answer` asks a request made elsewhere (an expert's consultation,
:mod:`core.run.consultation`) the same way."""

from __future__ import annotations

import time
from typing import Any

from core.models.base import (
    Message,
    ModelRequest,
    TextDelta,
    ToolCallEvent,
    ToolInputDelta,
    ToolSpec,
    TurnEnd,
    Usage,
)
from core.pricing import priced
from core.run.deps import RunDeps
from core.run.executor_view import approved_plan
from core.run.preview import AnswerPieces
from core.run.state import Run
from core.tools import control
from core.vocabulary.entries import AssistantTurn, ModelRole, ModelUsage, ToolCall
from core.vocabulary.requests import PlanApproval
from core.vocabulary.snapshot import ConversationSnapshot
from core.workflows.model import Outcome, StateKind


async def model_turn(
    run: Run, deps: RunDeps, snap: ConversationSnapshot, messages: list[Message] | None = None
) -> AssistantTurn:
    """The model's answer to ``messages`` (None: the run's history of ``snap``), in its span.

    Raises :class:`core.vocabulary.errors.ModelError` when the model fails for good.
    """
    settings = run.settings
    role = role_of(run, deps, snap)
    request = ModelRequest(
        system=settings.system,
        messages=messages or run.history.build(snap.journal, own_plan(run, deps, snap)),
        tools=tools_of(run, deps),
        max_tokens=settings.max_tokens,
        model=settings.model_of(role),
        fallbacks=settings.fallback_models,
        role=role,
    )
    return await answer(run, deps, request, snap.position)


def tools_of(run: Run, deps: RunDeps) -> list[ToolSpec]:
    """The tools every request of ``run`` offers, the same bytes on each: the toolbox's,
    less ``ask_expert`` where no expert may be consulted (:func:`consults_expert`,
    :func:`core.tools.control.offered`)."""
    tools = control.offered(deps.toolbox.select(["all"]), expert=consults_expert(run))
    return [t.spec for t in tools]


def consults_expert(run: Run) -> bool:
    """Whether ``ask_expert`` is offered to ``run``'s model now: an expert may be consulted
    (:attr:`core.run.settings.EngineSettings.consults_expert`) and the model asking is not
    the expert itself (in a delegation: it would be consulted on the executor's
    history, not its own work, and spend the conversation's consultations)."""
    return run.settings.consults_expert and run.scope.role != "expert"


async def answer(run: Run, deps: RunDeps, request: ModelRequest, position: str) -> AssistantTurn:
    """The model's answer to ``request`` (made in ``position``), in its span, priced and
    attributed to ``request.role``, once the run holds a ``model`` slot
    (:mod:`core.run.slots`). Raises :class:`core.vocabulary.errors.ModelError`
    when the model fails for good."""
    model = request.model or deps.model.name
    async with deps.slots.hold(run.conversation_id, "model"):  # waits outside the span
        with run.span.model_call(model, max_tokens=request.max_tokens) as span:
            turn = await _streamed(run, deps, request, position)
            span.answered(turn.usage, turn.stop_reason)
            return turn


def own_plan(run: Run, deps: RunDeps, snap: ConversationSnapshot) -> PlanApproval | None:
    """The approved plan whose own view of the history a request of ``snap``'s position
    reads (:meth:`core.run.history.History.build`), or None for the whole history.

    The executor's requests read its own view when its model differs from the
    planner's (:meth:`core.run.settings.EngineSettings.model_of`, the model's own
    default where a role names none, as the request asks): the planning turns
    were another model's, whose prompt cache it does not share, so the request starts
    from the request and the approved plan. With the same model the whole history
    stays, and with it the cached prefix. No plan approved yet: the whole history.
    """
    if role_of(run, deps, snap) != "executor":
        return None
    settings, default = run.settings, deps.model.name
    if (settings.model_of("executor") or default) == (settings.model_of("planner") or default):
        return None
    return approved_plan(snap.requests)


def role_of(run: Run, deps: RunDeps, snap: ConversationSnapshot) -> ModelRole:
    """The role whose model a call of ``run`` asks now: its scope's own, else the position's."""
    return run.scope.role or run.workflow.role_at(snap.position)


async def _streamed(run: Run, deps: RunDeps, request: ModelRequest, position: str) -> AssistantTurn:
    text: list[str] = []
    calls: list[ToolCall] = []
    model = request.model or deps.model.name
    usage = ModelUsage(model=model, input_tokens=0, output_tokens=0)
    stop_reason = "end_turn"
    content: tuple[dict[str, Any], ...] = ()
    started = time.monotonic()
    pieces = AnswerPieces() if _previewed(run, position) else None
    whole = False  # the response came to its end
    try:
        async for event in deps.model.stream(request):
            match event:
                case TextDelta():
                    text.append(event.text)
                    if pieces is not None and event.text.strip():
                        deps.preview.wrote(run.conversation_id, "".join(text).strip())
                case ToolInputDelta():
                    grown = (
                        None
                        if pieces is None
                        else pieces.add(event.id, event.name, event.partial_json)
                    )
                    if grown is not None:
                        deps.preview.grew(run.conversation_id, grown)
                case ToolCallEvent():
                    calls.append(ToolCall(id=event.id, name=event.name, input=event.input))
                case Usage():
                    model = event.model  # the model that answered (maybe a fallback)
                    usage = ModelUsage(
                        model=event.model,
                        input_tokens=event.input_tokens,
                        output_tokens=event.output_tokens,
                        cache_read_tokens=event.cache_read_tokens,
                        cache_write_tokens=event.cache_write_tokens,
                    )
                case TurnEnd():
                    stop_reason = event.stop_reason
                    content = event.content
        whole = True
    finally:  # a turn that broke off ends its preview too
        if pieces is not None and (pieces.shown or any(t.strip() for t in text)):
            deps.preview.ended(run.conversation_id, whole)
    return AssistantTurn(
        text="".join(text).strip(),
        tool_calls=tuple(calls),
        stop_reason=stop_reason,
        model=model,
        content=content,
        usage=_priced(run, usage, position, request.role, time.monotonic() - started),
    )


def _previewed(run: Run, position: str) -> bool:
    """Whether a turn of ``run`` at ``position`` shows its text and answer as they are
    written: the
    conversation's own run, not a nested scope's (an expert's ``finish`` hands back, it
    answers nobody), where ``finish`` leads straight to an ``end`` state (elsewhere, in a
    workflow's fix step, say, its answer is not the one the conversation ends with)."""
    if run.scope.parent is not None or run.scope.role == "expert":
        return False
    target = run.workflow.target(position, Outcome.FINISHED)
    return isinstance(target, str) and run.workflow.state(target).kind == StateKind.END


def _priced(
    run: Run, usage: ModelUsage, position: str, role: ModelRole, seconds: float
) -> ModelUsage:
    """``usage`` with the call's run, position, role, latency, price entry and cost."""
    found = priced(run.settings.prices, usage.model, usage)
    return usage.model_copy(
        update={
            "latency_ms": round(seconds * 1000),
            "price_id": None if found is None else found[0].id,
            "cost_micro_usd": None if found is None else found[1],
            "run_id": run.run_id or None,
            "position": position,
            "role": role,
        }
    )
