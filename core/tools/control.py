"""Control tools: how the model talks to the workflow rather than the workspace.

``propose_plan`` and ``ask_user`` end the run until a person answers;
``finish`` delivers the answer; ``report_progress`` posts a progress note. The
engine does what they mean (:mod:`core.run.control`, :mod:`core.requests`); ``run``
only validates the input and shapes the result, so the tools fit the same
:class:`core.tools.base.Tool` protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.models.base import ToolSpec
from core.tools.base import ToolContext, ToolOutput
from core.vocabulary.errors import ToolError

PROPOSE_PLAN = "propose_plan"
ASK_USER = "ask_user"
FINISH = "finish"
REPORT_PROGRESS = "report_progress"
CONTROL_TOOLS = frozenset({PROPOSE_PLAN, ASK_USER, FINISH, REPORT_PROGRESS})
WAITING_CONTROL = frozenset({PROPOSE_PLAN, ASK_USER, FINISH})
"""Control tools that end the turn: they wait for a person, or finish the run."""


def _string_list(value: object, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ToolError(f"`{field}` must be a list of non-empty strings")
    return [v.strip() for v in value]


def _text(args: Mapping[str, Any], field: str) -> str:
    value = args.get(field)
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"`{field}` must be a non-empty string")
    return value.strip()


class ControlTool:
    """A control tool: a spec plus input checks; the engine does the rest."""

    read_only = True

    def __init__(self, spec: ToolSpec) -> None:
        self._spec = spec

    @property
    def spec(self) -> ToolSpec:
        """Name, description and input schema."""
        return self._spec

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        """Validate ``args``; raises :class:`ToolError` on a missing or wrong field."""
        name = self._spec.name
        if name == PROPOSE_PLAN:
            steps, _tools = plan_steps(args)
            return ToolOutput(content="", note=f"plan with {len(steps)} steps")
        if name == ASK_USER:
            return ToolOutput(content="", note=_text(args, "question"))
        if name == FINISH:
            return ToolOutput(content="The answer is posted in the thread.", note="finished")
        step = args.get("step")
        return ToolOutput(
            content="Noted.", note=_text(args, "note"), step=step if isinstance(step, str) else None
        )


def plan_steps(args: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """``(steps, tools)`` of a ``propose_plan`` input; raises :class:`ToolError` when malformed."""
    steps = _string_list(args.get("steps"), "steps")
    tools = _string_list(args["tools"], "tools") if args.get("tools") else []
    return steps, tools


def control_tools() -> list[ControlTool]:
    """The four control tools with their specs."""
    return [
        ControlTool(
            ToolSpec(
                name=PROPOSE_PLAN,
                description=(
                    "Propose a plan for the request and wait for a person to approve it. "
                    "Give short, concrete steps and the tools they need. Nothing is "
                    "changed before the plan is approved."
                ),
                input_schema={
                    "type": "object",
                    "properties": {
                        "steps": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                        "tools": {"type": "array", "items": {"type": "string"}},
                    },
                    "required": ["steps"],
                },
            )
        ),
        ControlTool(
            ToolSpec(
                name=ASK_USER,
                description=(
                    "Ask the people in the thread a clarification question and wait for "
                    "the answer. Offer options when there are a few clear choices."
                ),
                input_schema={
                    "type": "object",
                    "properties": {
                        "question": {"type": "string"},
                        "options": {"type": "array", "items": {"type": "string"}},
                    },
                    "required": ["question"],
                },
            )
        ),
        ControlTool(
            ToolSpec(
                name=FINISH,
                description="Deliver the final answer to the thread and end the run.",
                input_schema={
                    "type": "object",
                    "properties": {"answer": {"type": "string"}},
                    "required": ["answer"],
                },
            )
        ),
        ControlTool(
            ToolSpec(
                name=REPORT_PROGRESS,
                description=(
                    "Tell the thread where you are in the plan, e.g. step='step 2 of 3', "
                    "note='reading the session fixture'."
                ),
                input_schema={
                    "type": "object",
                    "properties": {"step": {"type": "string"}, "note": {"type": "string"}},
                    "required": ["note"],
                },
            )
        ),
    ]
