"""The agent's own tools: how the model talks to the workflow rather than the workspace.

``propose_plan`` and ``ask_user`` end the run until a person answers; ``finish``
delivers the answer; ``report_progress`` posts a progress note; ``ask_expert``
consults the expert model once (:mod:`core.run.consultation`), offered only where
an expert is configured (:func:`offered`). Each one's input is a pydantic model
(:class:`ProposePlan`, :class:`AskUser`, :class:`Finish`, :class:`ReportProgress`,
:class:`AskExpert`), tagged by the tool's name and joined in one union,
:data:`ControlCall`; the tools' JSON schemas are generated from them. A call is
parsed once, when its turn is admitted (:func:`parse`, :mod:`core.run.admission`,
which refuses a malformed one there), and the engine does what it means in one
``match`` (:mod:`core.run.control`).

This module is the one place that knows the control tools by name: everything else
reads a tool's kind (:class:`core.models.base.ToolKind`, ``control``) or asks here
(:func:`is_control`, :func:`ends_turn`, :func:`opens_request`, :func:`consults_expert`,
:func:`offered`, and for what a call says of a plan: :func:`proposed_plan`,
:func:`plan_steps`, :func:`progress_step`, :func:`finishes`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, Protocol, TypeVar

from pydantic import BeforeValidator, Field, ValidationInfo
from pydantic.json_schema import SkipJsonSchema

from core.models.base import ToolKind, ToolSpec
from core.tools.base import ToolContext, ToolOutput
from core.tools.inputs import ToolInput
from core.vocabulary.errors import ToolError


def _text(value: object, info: ValidationInfo) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"`{info.field_name}` must be a non-empty string")
    return value.strip()


def _texts(value: object, info: ValidationInfo) -> list[str]:
    """Non-empty strings, stripped; nothing (absent, null, empty) is no strings."""
    if not value:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f"`{info.field_name}` must be a list of non-empty strings")
    return [v.strip() for v in value]


def _steps(value: object, info: ValidationInfo) -> list[str]:
    """The plan's steps, each one line (a run of whitespace, line breaks included, one
    space: a step never prints as more numbered lines than it is)."""
    steps = [" ".join(step.split()) for step in _texts(value, info)]
    if not steps:
        raise ValueError(f"`{info.field_name}` must be a list of non-empty strings")
    return steps


MAX_OPTIONS = 9
"""The most options an ``ask_user`` call may give: one per number reaction (1️⃣-9️⃣), and
a row of buttons each platform can show (docs/architecture.md, "What a person sees")."""


def _options(value: object, info: ValidationInfo) -> list[str]:
    """The options as one-line strings (each run of whitespace, line breaks included,
    one space: a label never spans lines of the numbered list nor of a button), the
    blank ones left out; more than :data:`MAX_OPTIONS` is refused with the reason (the
    model reads it)."""
    if not isinstance(value, list):
        return []
    options = [" ".join(str(o).split()) for o in value if str(o).strip()]
    if len(options) > MAX_OPTIONS:
        raise ValueError(
            f"`{info.field_name}` may hold at most {MAX_OPTIONS} choices, got {len(options)}: "
            f"ask again with {MAX_OPTIONS} or fewer, or ask in words without options"
        )
    return options


Text = Annotated[str, BeforeValidator(_text)]
"""A non-empty string, stripped."""
Texts = Annotated[list[str], BeforeValidator(_texts)]
"""A list of non-empty strings, stripped."""


class _Specified(Protocol):
    @property
    def spec(self) -> ToolSpec: ...


T = TypeVar("T", bound=_Specified)


class ProposePlan(ToolInput):
    """``propose_plan``: the plan's steps, and the tools they need."""

    tool: SkipJsonSchema[Literal["propose_plan"]] = "propose_plan"
    steps: Annotated[list[str], BeforeValidator(_steps)] = Field(min_length=1)
    tools: Texts = Field(default_factory=list)


class AskUser(ToolInput):
    """``ask_user``: a question for the thread, and the options it offers (maybe none, at
    most :data:`MAX_OPTIONS`: more is a malformed call, refused at admission)."""

    tool: SkipJsonSchema[Literal["ask_user"]] = "ask_user"
    question: Text
    options: Annotated[list[str], BeforeValidator(_options)] = Field(
        default_factory=list, max_length=MAX_OPTIONS
    )


class Finish(ToolInput):
    """``finish``: the final answer, posted in the thread."""

    tool: SkipJsonSchema[Literal["finish"]] = "finish"
    answer: Text


class ReportProgress(ToolInput):
    """``report_progress``: a note for the thread, and the plan step it is about."""

    tool: SkipJsonSchema[Literal["report_progress"]] = "report_progress"
    note: Text
    step: Annotated[str | None, BeforeValidator(lambda v: v if isinstance(v, str) else None)] = None


class AskExpert(ToolInput):
    """``ask_expert``: a question for the expert model, answered once, in prose."""

    tool: SkipJsonSchema[Literal["ask_expert"]] = "ask_expert"
    question: Text


ControlCall = Annotated[
    ProposePlan | AskUser | Finish | ReportProgress | AskExpert, Field(discriminator="tool")
]
"""A control call, parsed; ``tool`` (its tool's name) tells which."""

_INPUTS: dict[str, type[ProposePlan | AskUser | Finish | ReportProgress | AskExpert]] = {
    "propose_plan": ProposePlan,
    "ask_user": AskUser,
    "finish": Finish,
    "report_progress": ReportProgress,
    "ask_expert": AskExpert,
}
PROPOSE_PLAN = "propose_plan"
ASK_USER = "ask_user"
RUN_COMMAND = "run_command"
"""The workspace tool a workflow's ``command`` action calls (:mod:`core.tools.commands`)."""
_ENDS_TURN = frozenset({"propose_plan", "ask_user", "finish"})
_OPENS_REQUEST = frozenset({"propose_plan", "ask_user"})


def is_control(name: str) -> bool:
    """Whether ``name`` is a control tool's."""
    return name in _INPUTS


def ends_turn(name: str) -> bool:
    """Whether a call of ``name`` ends its turn: it waits for a person (``propose_plan``,
    ``ask_user``) or finishes the run (``finish``). Such a call never runs a process nor
    waits for an approval of its own."""
    return name in _ENDS_TURN


def opens_request(name: str) -> bool:
    """Whether a call of ``name`` opens a request a person answers (``propose_plan``,
    ``ask_user``)."""
    return name in _OPENS_REQUEST


def consults_expert(name: str) -> bool:
    """Whether a call of ``name`` consults the expert model (``ask_expert``): done by the
    engine in its place among the turn's calls (:mod:`core.run.consultation`); a
    refused or failed one counts toward the failure streak (:mod:`core.run.escalation`)."""
    return name == "ask_expert"


NO_EXPERT = (
    "There is no expert model here (no expert_model is set, or no consultation is "
    "allowed), so ask_expert is not available. Go on with what you know, or ask the "
    "people with ask_user."
)
"""The result of an ``ask_expert`` call where no expert may be consulted."""


def offered(tools: Iterable[T], *, expert: bool) -> list[T]:
    """``tools`` (each with a ``spec``) as the model is offered them: ``ask_expert`` only
    when ``expert`` (an expert model may be consulted here,
    :attr:`core.run.settings.EngineSettings.consults_expert`). Without an expert the
    tool is not offered at all: a tool that can only say no would cost every request
    its schema and invite calls that fail."""
    return [t for t in tools if expert or not consults_expert(t.spec.name)]


def not_offered(name: str, *, expert: bool) -> str | None:
    """Why a call of ``name`` is refused where it is not offered, when this module knows
    better than "not available at this step": :data:`NO_EXPERT` for ``ask_expert``
    without an expert; None otherwise."""
    return NO_EXPERT if consults_expert(name) and not expert else None


def finishes(name: str) -> bool:
    """Whether a call of ``name`` finishes the run with its answer (``finish``)."""
    return name == "finish"


def proposes_plan(name: str) -> bool:
    """Whether a call of ``name`` proposes a plan (``propose_plan``)."""
    return name == "propose_plan"


def asks_people(name: str) -> bool:
    """Whether a call of ``name`` asks the people a question (``ask_user``)."""
    return name == "ask_user"


def asked_options(name: str, args: Mapping[str, Any]) -> tuple[str, ...]:
    """The options an ``ask_user`` call with the input ``args`` gives, in order; ``()``
    for a call of another tool, one without options or a malformed one."""
    if name != "ask_user":
        return ()
    try:
        call = parse(name, args)
    except ToolError:
        return ()
    return tuple(call.options) if isinstance(call, AskUser) else ()


def proposed_plan(name: str, args: Mapping[str, Any]) -> ProposePlan | None:
    """The plan a ``propose_plan`` call with the input ``args`` proposes (its steps and
    tools); None for a call of another tool or a malformed one (refused at admission)."""
    if name != "propose_plan":
        return None
    try:
        call = parse(name, args)
    except ToolError:
        return None
    return call if isinstance(call, ProposePlan) else None


def plan_steps(name: str, args: Mapping[str, Any]) -> list[str] | None:
    """The steps of a ``propose_plan`` call with the input ``args``; None for a call of
    another tool or a malformed one (refused at admission)."""
    proposed = proposed_plan(name, args)
    return None if proposed is None else proposed.steps


def progress_step(name: str, args: Mapping[str, Any]) -> str | None:
    """The ``step`` a ``report_progress`` call with the input ``args`` names; None for a
    call of another tool, a malformed one, or one that names no step."""
    if name != "report_progress":
        return None
    try:
        call = parse(name, args)
    except ToolError:
        return None
    return call.step if isinstance(call, ReportProgress) else None


_NUMBER = re.compile(r"\d+")


def step_number(step: str) -> int | None:
    """The plan step (from 1) a ``report_progress`` ``step`` names: its first whole number
    ("step 2 of 3" and "2" are 2); None when it has none."""
    found = _NUMBER.search(step)
    return int(found.group()) if found else None


def parse(name: str, args: Mapping[str, Any]) -> ControlCall:
    """The control call of the tool ``name`` with the input ``args``.

    Raises :class:`ToolError` naming the field when the input is malformed, and
    ``ValueError`` when ``name`` is no control tool (:func:`is_control`).
    """
    try:
        model = _INPUTS[name]
    except KeyError:
        raise ValueError(f"{name!r} is not a control tool") from None
    return model.parse(args)


class ControlTool:
    """A control tool: its spec (generated from its input model); the engine does the rest.

    Only ``report_progress`` runs as a tool would (its output is the note); the calls
    that end a turn are done by the engine (:mod:`core.run.control`), never run, and so
    is ``ask_expert`` (:mod:`core.run.consultation`).
    """

    def __init__(self, spec: ToolSpec) -> None:
        self._spec = spec

    @property
    def spec(self) -> ToolSpec:
        """Name, description, input schema and kind (``control``)."""
        return self._spec

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        """The note of a ``report_progress`` call; raises :class:`ToolError` when malformed
        or for a call the engine does (one that ends its turn)."""
        call = parse(self._spec.name, args)
        if not isinstance(call, ReportProgress):
            raise ToolError(f"{self._spec.name} is done by the engine, not run")
        return ToolOutput(content="Noted.", note=call.note, step=call.step)


def _spec(model: type[ToolInput], name: str, description: str) -> ControlTool:
    return ControlTool(
        ToolSpec(
            name=name,
            description=description,
            input_schema=model.json_schema(),
            kind=ToolKind.CONTROL,
            ends_turn=ends_turn(name),
        )
    )


def control_tools() -> list[ControlTool]:
    """The five control tools with their specs (``ask_expert`` last: the tools before it
    are sent as they were before it came, where no expert offers it)."""
    return [
        _spec(
            ProposePlan,
            "propose_plan",
            "Propose a plan for the request and wait for a person to approve it. "
            "Give short, concrete steps and the tools they need. Nothing is "
            "changed before the plan is approved.",
        ),
        _spec(
            AskUser,
            "ask_user",
            "Ask the people in the thread a clarification question and wait for "
            "the answer. Offer options (at most 9, short) when there are a few clear "
            "choices: people pick one with a button or a number, or answer in words.",
        ),
        _spec(Finish, "finish", "Deliver the final answer to the thread and end the run."),
        _spec(
            ReportProgress,
            "report_progress",
            "Tell the thread where you are in the plan, e.g. step='step 2 of 3', "
            "note='reading the session fixture'.",
        ),
        _spec(
            AskExpert,
            "ask_expert",
            "Ask a stronger expert model one question when you are stuck or unsure: it "
            "reads this conversation up to your turn and answers in prose (it runs "
            "nothing). Make the question self-contained: what you tried, what happened, "
            "what you need to know. Consultations per conversation are limited.",
        ),
    ]
