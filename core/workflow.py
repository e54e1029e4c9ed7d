"""Workflows as data: named positions, the tools each offers, and transitions.

A workflow is declared in TOML (``core/workflows/default.toml`` is the default
plan -> approve -> execute flow)::

    name = "plan-approve-execute"
    start = "planning"
    [positions.planning]
    instructions = "..."
    tools = ["read_only", "propose_plan", "ask_user", "finish"]
    mutating = false
    role = "planner"
    [positions.planning.on]
    plan_proposed = "approval"

``tools`` names tools, or the groups ``read_only`` and ``all``; ``role`` names whose
model is asked there (``planner``, ``executor``, ``expert``). ``on`` maps a
workflow event (:class:`Transition`) to the next position. An event a position
does not name leaves the position unchanged.
"""

from __future__ import annotations

import tomllib
from enum import StrEnum
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.vocabulary.entries import ModelRole, StepEntered


class Transition(StrEnum):
    """Workflow events the engine reports to the workflow."""

    PLAN_PROPOSED = "plan_proposed"
    PLAN_APPROVED = "plan_approved"
    PLAN_REJECTED = "plan_rejected"
    FINISHED = "finished"
    NEW_MESSAGE = "new_message"


class Position(BaseModel):
    """One place in a workflow: what the model is told when it gets there (journaled as a
    :class:`core.vocabulary.entries.StepEntered`) and which tools it may call there (every request
    offers all tools, so that its prefix stays cached; a call to another is refused)."""

    model_config = ConfigDict(frozen=True)

    description: str = ""
    instructions: str = ""
    tools: tuple[str, ...] = ()
    mutating: bool = False
    """True where the plan is approved and the tool policy lets mutating tools run."""
    role: ModelRole = "executor"
    """Whose model the calls made here ask (:data:`core.vocabulary.entries.ModelRole`):
    ``planner`` while a plan is made, ``executor`` (the default) once it is approved."""
    on: dict[Transition, str] = Field(default_factory=dict)


class Workflow(BaseModel):
    """A named set of positions with a start; raises ``ValueError`` on dangling names."""

    model_config = ConfigDict(frozen=True)

    name: str
    start: str
    positions: dict[str, Position]

    @model_validator(mode="after")
    def _check_names(self) -> Workflow:
        known = set(self.positions)
        if self.start not in known:
            raise ValueError(f"workflow {self.name!r}: start {self.start!r} is not a position")
        for name, position in self.positions.items():
            for event, target in position.on.items():
                if target not in known:
                    raise ValueError(
                        f"workflow {self.name!r}: {name}.on.{event} -> unknown {target!r}"
                    )
        return self

    def position(self, name: str) -> Position:
        """The position called ``name``; ``KeyError`` if the workflow has none."""
        return self.positions[name]

    def entered(self, current: str, new: str, *, first: bool = False) -> tuple[StepEntered, ...]:
        """The journal entry of moving from ``current`` to ``new``: its instructions, when
        the position changes (or ``first``, a conversation's first run) and has any."""
        instructions = self.positions[new].instructions.strip()
        if not instructions or (new == current and not first):
            return ()
        return (StepEntered(position=new, instructions=instructions),)

    def role_at(self, position: str) -> ModelRole:
        """The role whose model is asked at ``position`` (``executor`` at a position the
        workflow does not know)."""
        found = self.positions.get(position)
        return "executor" if found is None else found.role

    def next(self, current: str, event: Transition) -> str:
        """The position after ``event`` at ``current`` (``current`` when not declared)."""
        return self.positions[current].on.get(event, current)

    @classmethod
    def from_toml(cls, text: str) -> Workflow:
        """Parse a workflow declaration; raises ``ValueError`` on bad TOML or shape."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"workflow TOML does not parse: {exc}") from exc
        return cls.model_validate(data)


def default_workflow() -> Workflow:
    """The shipped plan -> approve -> execute workflow."""
    text = resources.files("core.workflows").joinpath("default.toml").read_text("utf-8")
    return Workflow.from_toml(text)
