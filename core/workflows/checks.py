"""What loading checks in a workflow before any conversation runs it
(docs/architecture.md, "Workflows").

:func:`problems` lists, for one workflow, each state that is unknown (a transition's
target, the start, the error state), unreachable from the start, missing a
transition its kind needs or naming an outcome it cannot have, in a loop without a
cap, or naming an unknown role, tool, condition, context strategy or sub-workflow;
fields a kind needs and does not have; and a state that changes things (an agent
state with ``mutating``, an action) reachable from the start without a person's
approval. Each :class:`Problem` names the state and key it is about, so the loader
can point at the file's line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from core.contexts import STRATEGIES
from core.retry import POLICY_NAMES
from core.tools import control
from core.workflows.conditions import CONDITIONS
from core.workflows.model import (
    STATE_NAME,
    Guard,
    Outcome,
    State,
    StateKind,
    Workflow,
    outcomes_of,
)

GROUPS = frozenset({"read_only", "all"})
"""Tool groups an agent state may name beside tools."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong: the ``state`` it is in (None: the ``[workflow]`` table), the
    ``key`` (a field, or ``on.<outcome>``; None: the state's table) and the ``reason``."""

    state: str | None
    key: str | None
    reason: str


@dataclass(frozen=True)
class Known:
    """What a workflow may name besides its own states: ``tools`` (None: not checked,
    as when no toolbox is at hand) and the end states of the other workflows it may run
    as sub-workflows (``workflows``: name -> their ``end`` states' names)."""

    tools: frozenset[str] | None = None
    workflows: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def problems(workflow: Workflow, known: Known = Known()) -> list[Problem]:
    """Everything wrong with ``workflow``, in the order of its states."""
    found: list[Problem] = []
    header = workflow.workflow
    states = workflow.states
    if header.start not in states:
        found.append(Problem(None, "start", f"start state {header.start!r} is not a state"))
    elif states[header.start].kind is StateKind.END:
        found.append(
            Problem(None, "start", f"start state {header.start!r} is an end: nothing would run")
        )
    if header.error and header.error not in states:
        found.append(Problem(None, "error", f"error state {header.error!r} is not a state"))
    if header.context.strategy and header.context.strategy not in STRATEGIES:
        found.append(Problem(None, "context.strategy", _unknown_strategy(header.context.strategy)))
    if header.retry.policy and header.retry.policy not in POLICY_NAMES:
        found.append(
            Problem(
                None,
                "retry.policy",
                f"unknown retry policy {header.retry.policy!r}; known: {', '.join(POLICY_NAMES)}",
            )
        )
    for name, state in states.items():
        if not STATE_NAME.match(name):
            found.append(Problem(name, None, f"state {name!r}: {STATE_NAME_RULE}"))
        found += _state_problems(name, state, states, known)
    found += _plans_without_a_proposal(workflow)
    if header.start in states:
        found += _unreachable(workflow)
        found += _uncapped_loops(workflow)
        found += _unapproved_changes(workflow)
    return found


def _unknown_strategy(name: str) -> str:
    return f"unknown context strategy {name!r}; known: {', '.join(STRATEGIES)}"


def _state_problems(
    name: str, state: State, states: Mapping[str, State], known: Known
) -> list[Problem]:
    found: list[Problem] = []
    required, optional = outcomes_of(state)
    if state.kind is StateKind.WORKFLOW:
        ends = known.workflows.get(state.workflow) if state.workflow else None
        if ends is None:
            names = ", ".join(sorted(known.workflows)) or "none"
            reason = f"unknown workflow {state.workflow!r}; known: {names}"
            found.append(Problem(name, "workflow", reason))
            ends = tuple(state.on)  # checked no further
        required = (*required, *ends)
        if state.max_visits:  # its states replace it when loaded: the cap would be lost
            found.append(
                Problem(
                    name,
                    "max_visits",
                    "a sub-workflow state has no max_visits (its states take its place): "
                    "give it to another state of the loop, or to one inside the sub-workflow",
                )
            )
    for outcome in required:
        if outcome not in state.on:
            found.append(Problem(name, None, f"missing transition for outcome {str(outcome)!r}"))
    allowed = set(required) | set(optional)
    for outcome, target in state.on.items():
        key = f"on.{outcome}"
        if outcome not in allowed:
            found.append(
                Problem(
                    name,
                    key,
                    f"a {state.kind} state has no outcome {outcome!r}; "
                    f"its outcomes: {', '.join(sorted(allowed))}",
                )
            )
        for each in _targets(target):
            if each not in states:
                found.append(Problem(name, key, f"unknown state {each!r}"))
        if isinstance(target, Guard) and target.if_ not in CONDITIONS:
            found.append(
                Problem(
                    name,
                    key,
                    f"unknown condition {target.if_!r}; known: {', '.join(sorted(CONDITIONS))}",
                )
            )
    found += _fields(name, state, known)
    return found


def _fields(name: str, state: State, known: Known) -> list[Problem]:
    found: list[Problem] = []
    match state.kind:
        case StateKind.AGENT:
            if known.tools is not None:
                for tool in state.tools:
                    if tool not in known.tools and tool not in GROUPS:
                        found.append(
                            Problem(name, "tools", _unknown_tool(tool, known.tools | GROUPS))
                        )
            if not state.tools:
                found.append(Problem(name, "tools", "an agent state offers no tools"))
            elif not any(control.finishes(tool) or tool == "all" for tool in state.tools):
                found.append(Problem(name, "tools", "an agent state must offer finish"))
            if state.context and state.context not in STRATEGIES:
                found.append(Problem(name, "context", _unknown_strategy(state.context)))
        case StateKind.ACTION:
            if bool(state.command) == bool(state.tool):
                found.append(Problem(name, None, "an action runs a command or a tool: one of them"))
            elif state.tool and control.is_control(state.tool):
                found.append(
                    Problem(
                        name,
                        "tool",
                        f"{state.tool!r} is the model's own tool, not an action's (a human "
                        "step asks the people, an end answers)",
                    )
                )
            elif state.tool and known.tools is not None and state.tool not in known.tools:
                found.append(Problem(name, "tool", _unknown_tool(state.tool, known.tools)))
        case StateKind.HUMAN:
            if state.ask == "choose" and len(state.options) < 2:
                found.append(Problem(name, "options", "a choice needs two options or more"))
            if state.ask == "choose" and len(state.options) > control.MAX_OPTIONS:
                found.append(
                    Problem(
                        name,
                        "options",
                        f"a choice has at most {control.MAX_OPTIONS} options (a number "
                        "reaction each, 1️⃣-9️⃣)",
                    )
                )
            if state.ask == "choose":
                found += _options(name, state.options)
            if state.ask == "approve" and not state.steps:
                found.append(Problem(name, "steps", "an approval of a fixed plan needs its steps"))
            if state.ask in ("question", "choose") and not state.prompt:
                found.append(Problem(name, "prompt", f"a {state.ask} step needs a prompt"))
        case StateKind.WAIT:
            ways = [bool(state.duration), bool(state.until), state.person]
            if sum(ways) != 1:
                found.append(
                    Problem(name, None, "a wait names one of duration, until or person = true")
                )
            if state.until:
                found += _until(name, state.until)
            if state.person and not (state.prompt or state.description):
                found.append(Problem(name, None, "a wait for a person needs a prompt"))
        case StateKind.WORKFLOW | StateKind.END:
            pass
    return found


STATE_NAME_RULE = (
    "a state's name holds letters, digits, - and _ only (at most 63), starting with a letter "
    "or a digit"
)
"""Why a state's name is refused (:data:`core.workflows.model.STATE_NAME`)."""


def _options(name: str, options: tuple[str, ...]) -> list[Problem]:
    """A choice's options: each an outcome of its own, told apart from the others and from
    the answer's number (:func:`core.run.states.chosen_option`)."""
    found: list[Problem] = []
    outcomes = {str(outcome) for outcome in Outcome}
    seen: set[str] = set()
    for option in options:
        if option.lower() in seen:
            reason = f"option {option!r} is there twice (an answer names it in any case)"
        elif option in outcomes:
            reason = f"option {option!r} is the name of an outcome of its own: call it otherwise"
        elif option.strip().isdigit():
            reason = f"option {option!r} is a number: an answer's number picks an option"
        elif not option.strip():
            reason = "an option is empty"
        else:
            seen.add(option.lower())
            continue
        seen.add(option.lower())
        found.append(Problem(name, "options", reason))
    return found


def _unknown_tool(tool: str, known: frozenset[str]) -> str:
    return f"unknown tool {tool!r}; known: {', '.join(sorted(known))}"


def _until(name: str, text: str) -> list[Problem]:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return [Problem(name, "until", f"until {text!r} is not an ISO 8601 time")]
    if moment.tzinfo is None:
        return [Problem(name, "until", f"until {text!r} has no offset (say +00:00 or Z)")]
    return []


def _targets(target: str | Guard) -> tuple[str, ...]:
    return (target,) if isinstance(target, str) else target.targets


def edges(workflow: Workflow) -> Iterable[tuple[str, str, str]]:
    """Every transition as ``(from, outcome, to)``, a guard's two targets each, the
    global error state from each state that does not name ``error`` itself."""
    error = workflow.workflow.error
    for name, state in workflow.states.items():
        for outcome, target in state.on.items():
            for each in _targets(target):
                yield name, outcome, each
        if error and Outcome.ERROR not in state.on and name != error:
            if state.kind is not StateKind.END:
                yield name, Outcome.ERROR, error


def _reachable(workflow: Workflow, start: str, through: Callable[[str, str], bool]) -> set[str]:
    graph: dict[str, list[str]] = {}
    for source, outcome, target in edges(workflow):
        if through(source, outcome):
            graph.setdefault(source, []).append(target)
    seen = {start}
    todo = [start]
    while todo:
        for target in graph.get(todo.pop(), []):
            if target not in seen and target in workflow.states:
                seen.add(target)
                todo.append(target)
    return seen


def _plans_without_a_proposal(workflow: Workflow) -> list[Problem]:
    """A human step that waits on the model's plan (``ask = "plan"``) entered otherwise
    than by a ``plan_proposed`` transition (or as the start) has no plan to approve."""
    found = []
    for source, outcome, target in edges(workflow):
        state = workflow.states.get(target)
        if state is not None and state.kind is StateKind.HUMAN and state.ask == "plan":
            if outcome != Outcome.PLAN_PROPOSED:
                found.append(
                    Problem(
                        source,
                        f"on.{outcome}",
                        f'{target!r} waits on the model\'s plan (ask = "plan"): only a '
                        'plan_proposed transition leads there (use ask = "approve" with steps '
                        "for a plan of the workflow's own)",
                    )
                )
    start = workflow.states.get(workflow.start)
    if start is not None and start.kind is StateKind.HUMAN and start.ask == "plan":
        found.append(
            Problem(None, "start", 'the start waits on a plan no one proposed (ask = "plan")')
        )
    return found


def _unreachable(workflow: Workflow) -> list[Problem]:
    seen = _reachable(workflow, workflow.start, lambda _s, _o: True)
    return [
        Problem(name, None, f"state {name!r} cannot be reached from the start")
        for name in workflow.states
        if name not in seen
    ]


def _unapproved_changes(workflow: Workflow) -> list[Problem]:
    def before_approval(source: str, outcome: str) -> bool:
        """Every transition but a person's approval (a rejection, a timeout or an error of
        an approval step approves nothing)."""
        return not (workflow.states[source].approves and outcome == Outcome.APPROVED)

    seen = _reachable(workflow, workflow.start, before_approval)
    return [
        Problem(
            name,
            "mutating" if state.kind is StateKind.AGENT else None,
            f"state {name!r} changes things but can be reached without a person's approval "
            "(put a human step that approves a plan before it)",
        )
        for name, state in workflow.states.items()
        if name in seen and _changes(state)
    ]


def _changes(state: State) -> bool:
    return (state.kind is StateKind.AGENT and state.mutating) or state.kind is StateKind.ACTION


def _uncapped_loops(workflow: Workflow) -> list[Problem]:
    """A loop must pass a state with ``max_visits`` or one that waits for a person (whose
    word bounds it); a new message after an end is a person's too."""
    states = workflow.states
    free = {n for n, s in states.items() if not s.max_visits and not s.waits_for_person}
    graph: dict[str, set[str]] = {n: set() for n in free}
    for source, outcome, target in edges(workflow):
        if source in free and target in free and outcome != Outcome.NEW_MESSAGE:
            graph[source].add(target)
    looping = _in_cycles(graph)
    return [
        Problem(
            name,
            "max_visits",
            f"state {name!r} is in a loop without a cap (give a state of the loop max_visits "
            "and a cap transition)",
        )
        for name in states
        if name in looping
    ]


def _in_cycles(graph: Mapping[str, set[str]]) -> set[str]:
    """The nodes from which a path leads back to themselves (workflows are small: a walk
    from each node)."""
    looping: set[str] = set()
    for node in graph:
        seen: set[str] = set()
        todo = list(graph[node])
        while todo:
            current = todo.pop()
            if current == node:
                looping.add(node)
                break
            if current not in seen:
                seen.add(current)
                todo += graph.get(current, ())
    return looping
