"""A workflow's shape: named states of six kinds, the outcomes that move between them.

A workflow is declared in TOML (docs/architecture.md, "Workflows")::

    [workflow]
    name = "default"
    start = "planning"
    error = "failed"              # the global error state (optional)

    [states.planning]
    kind = "agent"
    role = "planner"
    tools = ["read_only", "propose_plan", "ask_user", "finish"]
    instructions = "..."

    [states.planning.on]
    plan_proposed = "approval"
    finished = "answered"

A state is one of :class:`StateKind`: an ``agent`` loop (a role, a tool allow-list,
instructions, a context strategy, a turn cap), a fixed ``action`` (a command, or a
tool call with arguments from the conversation), a ``human`` step (approve the plan
the model proposed, approve a fixed plan, answer a question, choose from numbered
options), a ``wait`` (a duration, until a time, or for a person), a sub-``workflow``
(inlined when the workflow is loaded: :func:`core.workflows.loading.resolve`) or an
``end``. ``on`` maps each outcome the state may have (:func:`outcomes_of`) to the next
state, or to a guard (:class:`Guard`) that asks a registered condition
(:mod:`core.workflows.conditions`). ``error`` and ``timeout`` are outcomes like any
other; an ``error`` a state does not name goes to the workflow's ``error`` state.
A state with ``max_visits`` takes its ``cap`` outcome when it would be entered once
more than that since the request: every loop has one (:mod:`core.workflows.checks`).
"""

from __future__ import annotations

import re
from datetime import timedelta
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.tools import control
from core.vocabulary.entries import ModelRole, StepEntered


class StateKind(StrEnum):
    """What a state does when the conversation enters it."""

    AGENT = "agent"
    ACTION = "action"
    HUMAN = "human"
    WAIT = "wait"
    WORKFLOW = "workflow"
    END = "end"


class Outcome(StrEnum):
    """The outcomes the engine reports; a ``choose`` step's options are outcomes too, and a
    sub-workflow's are the names of its ``end`` states."""

    PLAN_PROPOSED = "plan_proposed"
    FINISHED = "finished"
    APPROVED = "approved"
    REJECTED = "rejected"
    ANSWERED = "answered"
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    TIMEOUT = "timeout"
    CAP = "cap"
    NEW_MESSAGE = "new_message"


Ask = Literal["plan", "approve", "question", "choose"]
"""What a human step asks: approve the plan the model proposed (``plan``), approve the
fixed plan the state declares (``approve``), answer ``prompt`` (``question``), or pick
one of ``options`` (``choose``)."""

EndStatus = Literal["done", "failed"]

NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
"""A workflow's name: what ``workflow=NAME`` and the settings name it by."""

STATE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")
"""A state's name in a file (a sub-workflow's states, inlined, are ``<state>/<its state>``):
it shows in the thread's notes, the model's step markers and the Mermaid diagram."""

_DURATION = re.compile(r"^\s*(?:(\d+)\s*d)?\s*(?:(\d+)\s*h)?\s*(?:(\d+)\s*m)?\s*(?:(\d+)\s*s)?\s*$")


LONGEST_WAIT = timedelta(days=366)
"""The longest duration a wait or a timeout may have (a year: past it, a date overflows
long before anyone is waiting)."""


def parse_duration(text: str) -> timedelta:
    """``"90m"``, ``"1h30m"``, ``"2d"``, ``"45s"`` as a ``timedelta`` (days, hours, minutes,
    seconds, in that order, each optional). Raises ``ValueError`` for anything else, for
    zero, and past :data:`LONGEST_WAIT`."""
    found = _DURATION.match(text)
    if found is None or not any(found.groups()):
        raise ValueError(f"duration {text!r} is not like 30m, 1h30m, 2d or 45s")
    days, hours, minutes, seconds = (int(part or 0) for part in found.groups())
    try:
        span = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    except OverflowError:
        span = LONGEST_WAIT * 2
    if span <= timedelta(0):
        raise ValueError(f"duration {text!r} is zero")
    if span > LONGEST_WAIT:
        raise ValueError(f"duration {text!r} is longer than a year ({LONGEST_WAIT.days}d)")
    return span


class Guard(BaseModel):
    """A transition decided by a registered condition (:mod:`core.workflows.conditions`):
    ``then`` when ``if`` holds for the conversation, else ``else``."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    if_: str = Field(alias="if")
    then: str
    else_: str = Field(alias="else")

    @property
    def targets(self) -> tuple[str, str]:
        """Both states it may lead to."""
        return (self.then, self.else_)


Target = str | Guard


class State(BaseModel):
    """One state. Fields by kind (the others stay at their defaults; the loader's checks
    say which belong where):

    - every kind: ``description``, ``on`` (outcome -> state or :class:`Guard`),
      ``max_visits`` (entries since the request before the ``cap`` outcome);
    - ``agent``: ``role``, ``tools`` (names, or the groups ``read_only`` and ``all``),
      ``instructions`` (journaled as :class:`core.vocabulary.entries.StepEntered`),
      ``context`` (a context strategy's name; empty: the workflow's), ``cap`` (model
      turns in the state; 0: the ``step_turn_limit`` setting), ``mutating`` (mutating
      tools may run: the plan is approved);
    - ``action``: ``command`` (run with ``run_command``) or ``tool`` with ``args``;
      ``{check_command}`` and ``{request}`` in either are filled in from the settings and
      the conversation;
    - ``human``: ``ask``, ``prompt``, ``options`` (``choose``), ``steps`` and ``tools``
      (``approve``: the fixed plan), ``timeout`` (a duration; empty: the request's
      lifetime);
    - ``wait``: ``duration``, ``until`` (an ISO 8601 time with its offset) or ``person``,
      and ``timeout`` for a person;
    - ``workflow``: ``workflow``, the name of the workflow it runs;
    - ``end``: ``status`` and ``message``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: StateKind = StateKind.AGENT
    description: str = ""
    on: dict[str, Target] = Field(default_factory=dict)
    max_visits: int = Field(default=0, ge=0, le=1000)
    role: ModelRole = "executor"
    tools: tuple[str, ...] = ()
    instructions: str = ""
    context: str = ""
    cap: int = Field(default=0, ge=0)
    mutating: bool = False
    command: str = ""
    tool: str = ""
    args: dict[str, str] = Field(default_factory=dict)
    ask: Ask = "question"
    prompt: str = ""
    options: tuple[str, ...] = ()
    steps: tuple[str, ...] = ()
    timeout: str = ""
    duration: str = ""
    until: str = ""
    person: bool = False
    workflow: str = ""
    status: EndStatus = "done"
    message: str = ""

    @field_validator("timeout", "duration")
    @classmethod
    def _duration(cls, value: str) -> str:
        if value:
            parse_duration(value)
        return value

    @property
    def approves(self) -> bool:
        """Whether a person approves a plan here (the model's or the state's own)."""
        return self.kind is StateKind.HUMAN and self.ask in ("plan", "approve")

    @property
    def allowed_tools(self) -> tuple[str, ...]:
        """The tools a call may name here (admission's allow-list): an agent state's
        ``tools``; an action's own tool (``run_command`` for a command); ``propose_plan``
        and ``ask_user`` where the workflow proposes a fixed plan or asks the people
        itself; none elsewhere."""
        match self.kind:
            case StateKind.AGENT:
                return self.tools
            case StateKind.ACTION:
                return (self.tool or control.RUN_COMMAND,)
            case StateKind.HUMAN:
                return (control.PROPOSE_PLAN if self.ask == "approve" else control.ASK_USER,)
            case StateKind.WAIT:
                return (control.ASK_USER,) if self.person else ()
            case _:
                return ()

    @property
    def changes(self) -> bool:
        """Whether calls here may change things (the policy lets mutating tools run): an
        agent state with ``mutating``, an action (reached only after an approval)."""
        return self.mutating or self.kind is StateKind.ACTION

    @property
    def waits_for_person(self) -> bool:
        """Whether the state waits on a person's word (a human step, a wait for a person)."""
        return self.kind is StateKind.HUMAN or (self.kind is StateKind.WAIT and self.person)


def outcomes_of(state: State) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(required, optional)`` outcomes of ``state``: the transitions it must name, and
    those it may (``error``, ``timeout`` where it can time out, ``cap`` with
    ``max_visits``, which is then required). A sub-workflow's come from its ``end``
    states and are known only once it is resolved: none here."""
    required: list[str] = []
    optional: list[str] = [Outcome.ERROR]
    match state.kind:
        case StateKind.AGENT:
            required.append(Outcome.FINISHED)
            if any(control.proposes_plan(tool) for tool in state.tools):
                required.append(Outcome.PLAN_PROPOSED)
            if any(control.asks_people(tool) or tool == "all" for tool in state.tools):
                optional.append(Outcome.TIMEOUT)
        case StateKind.ACTION:
            required += [Outcome.PASSED, Outcome.FAILED]
        case StateKind.HUMAN:
            if state.ask in ("plan", "approve"):
                required += [Outcome.APPROVED, Outcome.REJECTED]
            elif state.ask == "question":
                required.append(Outcome.ANSWERED)
            else:
                required += list(state.options)
            optional.append(Outcome.TIMEOUT)
        case StateKind.WAIT:
            if state.person:
                required.append(Outcome.ANSWERED)
                optional.append(Outcome.TIMEOUT)
            else:
                required.append(Outcome.TIMEOUT)
        case StateKind.END:
            optional = [Outcome.NEW_MESSAGE]
        case StateKind.WORKFLOW:
            pass
    if state.max_visits:
        required.append(Outcome.CAP)
    return tuple(required), tuple(optional)


class ContextTable(BaseModel):
    """``[workflow.context]``: the context strategy of its agent states (empty: the
    ``context_strategy`` setting's) and the turns compaction keeps whole (0: the setting's)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    strategy: str = ""
    keep_turns: int = Field(default=0, ge=0)


class CacheTable(BaseModel):
    """``[workflow.cache]``: the cache of large tool outputs (empty: the ``output_cache``
    setting's)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["", "persistent", "in_memory", "none"] = ""


class RetryTable(BaseModel):
    """``[workflow.retry]``: the retry policy of tool calls safe to repeat (empty: the
    ``tool_retry`` setting's) and its attempts (0: the setting's)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: str = ""
    attempts: int = Field(default=0, ge=0)


class Header(BaseModel):
    """``[workflow]``: its name, what it is for, its start, its global error state, its
    strategies and its ``priority`` (added to the channel's when its runs queue for a
    slot, higher first: docs/architecture.md, "Limits and priorities")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=NAME.pattern)
    description: str = ""
    start: str
    error: str = ""
    priority: int = Field(default=0, ge=-1_000, le=1_000)
    context: ContextTable = Field(default_factory=ContextTable)
    cache: CacheTable = Field(default_factory=CacheTable)
    retry: RetryTable = Field(default_factory=RetryTable)


class Workflow(BaseModel):
    """A workflow: its header and its states. Made by
    :func:`core.workflows.loading.parse` (checked, sub-workflows inlined); a
    conversation keeps the one it started with, journaled
    (:class:`core.vocabulary.entries.WorkflowChosen`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workflow: Header
    states: dict[str, State]

    @property
    def name(self) -> str:
        """The workflow's name."""
        return self.workflow.name

    @property
    def start(self) -> str:
        """The state a request starts in."""
        return self.workflow.start

    def state(self, name: str) -> State:
        """The state called ``name``; an ``end`` state when the workflow has none by that
        name (a conversation's position from before workflows had states, say)."""
        found = self.states.get(name)
        return found if found is not None else State(kind=StateKind.END)

    def entered(self, current: str, new: str, *, first: bool = False) -> tuple[StepEntered, ...]:
        """The journal entry of moving from ``current`` to ``new``: one each time the state
        changes (or ``first``, a conversation's first run), with the new state's
        instructions (empty where it has none: the model reads nothing then)."""
        if new == current and not first:
            return ()
        return (StepEntered(position=new, instructions=self.state(new).instructions.strip()),)

    def role_at(self, position: str) -> ModelRole:
        """The role whose model is asked at ``position``."""
        return self.state(position).role

    def target(self, current: str, outcome: str) -> Target | None:
        """Where ``outcome`` at ``current`` leads (None: the state does not name it)."""
        return self.state(current).on.get(outcome)
