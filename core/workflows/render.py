"""A workflow as people read it: text (``threadbot workflows show``) and a Mermaid state
diagram (``--mermaid``) (docs/architecture.md, "Workflows").

:func:`describe` lists the states in the workflow's order, each with its kind, what it
does, its transitions (``outcome -> state``; a guard as ``outcome -> if COND then A
else B``) and its cap, then the conditions a guard may name. :func:`mermaid` draws
the same transitions as a ``stateDiagram-v2`` (https://mermaid.js.org/syntax/stateDiagram.html):
``[*] --> start``, ``a --> b: outcome``, a guard through a ``<<choice>>`` state, each
``end`` state ``--> [*]``, and the global error state's transitions (one from every
state that names no ``error`` of its own) said once, in a note beside it. Both are
pure: the same workflow gives the same text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from core.workflows.conditions import CONDITIONS, Condition
from core.workflows.model import Guard, Outcome, State, StateKind, Target, Workflow

_ASKS = {
    "plan": "plan (a person approves the plan the model proposes)",
    "approve": "approve (a person approves the plan below)",
    "question": "question (a person answers)",
    "choose": "choose (a person picks one of the options)",
}


def describe(workflow: Workflow, conditions: Mapping[str, Condition] = CONDITIONS) -> str:
    """``workflow`` as text: its header, then each state in order (see the module
    docstring), then ``conditions`` (by default every registered one) by name with its
    one-line doc. Ends with a newline."""
    header = workflow.workflow
    lines = [f"workflow {header.name}" + (f": {header.description}" if header.description else "")]
    lines.append(f"starts at: {header.start}")
    if header.error:
        lines.append(
            f"error state: {header.error} (where a state's error has no transition of its own)"
        )
    strategies = [
        ("context strategy", header.context.strategy),
        ("turns kept whole", str(header.context.keep_turns or "")),
        ("output cache", header.cache.kind),
        ("retry policy", header.retry.policy),
        ("retry attempts", str(header.retry.attempts or "")),
    ]
    lines += [f"{what}: {value}" for what, value in strategies if value]
    for name, state in workflow.states.items():
        lines.append("")
        lines.append(
            f"{name} ({state.kind})" + (f": {state.description}" if state.description else "")
        )
        lines += [f"  {line}".rstrip() for line in _does(state)]
        if state.max_visits:
            lines.append(f"  max_visits: {state.max_visits} (entered once more: cap)")
        lines += [f"  {outcome} -> {_target(target)}" for outcome, target in state.on.items()]
    lines.append("")
    lines.append("conditions a guard may name:")
    lines += [f"  {name}: {conditions[name].doc}" for name in sorted(conditions)] or ["  none"]
    return "\n".join(lines) + "\n"


def _does(state: State) -> list[str]:
    """What ``state`` does, by its kind, one line each."""
    match state.kind:
        case StateKind.AGENT:
            lines = [f"role: {state.role}", f"tools: {', '.join(state.tools)}"]
            first = state.instructions.strip().splitlines()[:1]
            if first:
                lines.append(f"instructions: {first[0].strip()}")
            if state.context:
                lines.append(f"context strategy: {state.context}")
            lines.append(f"turn cap: {state.cap}" if state.cap else "turn cap: step_turn_limit")
            if state.mutating:
                lines.append("mutating: yes (the plan is approved)")
            return lines
        case StateKind.ACTION:
            if state.command:
                return [f"command: {state.command}"]
            args = ", ".join(f"{key}={value!r}" for key, value in state.args.items())
            return [f"tool: {state.tool}({args})"]
        case StateKind.HUMAN:
            lines = [f"asks: {_ASKS[state.ask]}"]
            if state.prompt:
                lines.append(f"prompt: {state.prompt}")
            lines += [f"option {n}: {option}" for n, option in enumerate(state.options, start=1)]
            lines += [f"step {n}: {step}" for n, step in enumerate(state.steps, start=1)]
            if state.ask == "approve" and state.tools:
                lines.append(f"tools: {', '.join(state.tools)}")
            lines.append(f"timeout: {state.timeout or 'request_ttl'}")
            return lines
        case StateKind.WAIT:
            if state.person:
                return ["waits for: a person", f"timeout: {state.timeout or 'request_ttl'}"]
            if state.until:
                return [f"waits until: {state.until}"]
            return [f"waits for: {state.duration}"]
        case StateKind.WORKFLOW:
            return [f"runs workflow: {state.workflow}"]
        case StateKind.END:
            lines = [f"status: {state.status}"]
            message = state.message.strip().splitlines()
            if message:
                lines.append(f"message: {message[0]}")
                lines += [f"         {line}" for line in message[1:]]
            return lines


def _target(target: Target) -> str:
    if isinstance(target, Guard):
        return f"if {target.if_} then {target.then} else {target.else_}"
    return target


_RESERVED = frozenset(
    {"end", "state", "note", "direction", "class", "classDef", "style", "click", "as", "of"}
)
"""Words Mermaid's state diagrams read as their own: never a state's id."""


def mermaid(workflow: Workflow) -> str:
    """``workflow`` as a Mermaid ``stateDiagram-v2`` (see the module docstring), one
    statement a line, indented by four spaces; ends with a newline. A state whose name
    is not a plain id (``lint/check``, ``end``) is drawn under an id of its own with its
    name as its label."""
    ids = _ids(workflow)
    error = workflow.workflow.error
    lines = ["stateDiagram-v2"]
    for name, state in workflow.states.items():
        if ids[name] != name:
            lines.append(f'state "{_label(name)}" as {ids[name]}')
        lines.append(f"{ids[name]}: {state.kind}")
    lines.append(f"[*] --> {ids[workflow.start]}")
    taken = set(ids.values())
    for name, state in workflow.states.items():
        for outcome, target in state.on.items():
            if isinstance(target, str):
                lines.append(f"{ids[name]} --> {_id_of(ids, target)}: {_label(outcome)}")
                continue
            choice = _fresh(f"{ids[name]}_{_plain(outcome)}", taken)
            lines.append(f"state {choice} <<choice>>")
            lines.append(f"{ids[name]} --> {choice}: {_label(outcome)}")
            lines.append(f"{choice} --> {_id_of(ids, target.then)}: if {_label(target.if_)}")
            lines.append(f"{choice} --> {_id_of(ids, target.else_)}: else")
        if state.kind is StateKind.END:
            lines.append(f"{ids[name]} --> [*]")
    if error and error in ids:
        lines.append(
            f"note left of {ids[error]} : {Outcome.ERROR} from any state that names none leads here"
        )
    return "\n".join([lines[0], *(f"    {line}" for line in lines[1:])]) + "\n"


def _ids(workflow: Workflow) -> dict[str, str]:
    """Each state's Mermaid id: its name where that is a plain id, else a plain one made
    from it, none taken twice."""
    ids: dict[str, str] = {}
    taken: set[str] = set()
    plain = [n for n in workflow.states if _plain(n) == n and n not in _RESERVED]
    taken.update(plain)
    for name in workflow.states:
        if name in plain:
            ids[name] = name
        else:
            ids[name] = _fresh(_plain(name), taken)
    return ids


def _id_of(ids: Mapping[str, str], name: str) -> str:
    return ids.get(name, _plain(name))


def _plain(name: str) -> str:
    """``name`` with each character that is not a letter, a digit or ``_`` as ``_``."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name) or "_"


def _fresh(want: str, taken: set[str]) -> str:
    """``want``, or ``want_2``, ``want_3``... the first not taken nor reserved; taken now."""
    found, n = want, 1
    while found in taken or found in _RESERVED:
        n += 1
        found = f"{want}_{n}"
    taken.add(found)
    return found


_ESCAPES = {"#": "#35;", ";": "#59;", '"': "#quot;", ":": "#58;"}


def _label(text: str) -> str:
    """``text`` as a Mermaid label: on one line, its ``#``, ``;``, ``"`` and ``:`` as
    Mermaid's entity codes (https://mermaid.js.org/syntax/flowchart.html#entity-codes-to-escape-characters)."""
    return "".join(_ESCAPES.get(c, c) for c in " ".join(text.split()))
