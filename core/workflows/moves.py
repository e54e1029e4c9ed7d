"""Where an outcome leads, with the conversation at hand: guards, the global error state
and ``max_visits`` caps (docs/architecture.md, "Workflows").

:func:`follow` is the one place a conversation's next state is decided; it reads the
snapshot only (the conditions and the visit counts come from the journal), so a run
restarted anywhere decides the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.vocabulary.entries import JournalRecord, StepEntered, UserText, WorkflowChosen
from core.vocabulary.snapshot import ConversationSnapshot
from core.workflows.conditions import CONDITIONS
from core.workflows.model import Guard, Outcome, Workflow


def visits(journal: Sequence[JournalRecord], state: str) -> int:
    """How many times the conversation entered ``state`` (its ``StepEntered`` entries)
    since its newest request, the start's entry journaled just before the request
    included; read from the end."""
    count = 0
    at_request = False
    for record in reversed(journal):
        entry = record.entry
        if isinstance(entry, StepEntered):
            count += entry.position == state
        elif at_request and not isinstance(entry, WorkflowChosen):
            break  # before the request's own entries
        elif isinstance(entry, UserText) and entry.role == "request":
            at_request = True
    return count


def follow(workflow: Workflow, snap: ConversationSnapshot, outcome: str) -> str:
    """The state ``outcome`` leads to from the conversation's position: the state's own
    transition (a guard asks its condition of ``snap``), else for ``error`` the
    workflow's error state (never from the error state itself), else the position as it
    is. A target entered ``max_visits`` times already takes its ``cap`` transition
    instead, and so on (a state passed once at most)."""
    current = snap.position
    target = workflow.target(current, outcome)
    if target is None:
        error = workflow.workflow.error
        if outcome != Outcome.ERROR or not error or current == error:
            return current
        target = error
    name = _decided(target, snap)
    passed: set[str] = set()
    while name not in passed:
        state = workflow.state(name)
        if not state.max_visits or visits(snap.journal, name) < state.max_visits:
            return name
        passed.add(name)
        capped = state.on.get(Outcome.CAP)
        if capped is None:
            return name
        name = _decided(capped, snap)
    return name


def _decided(target: str | Guard, snap: ConversationSnapshot) -> str:
    if isinstance(target, str):
        return target
    condition = CONDITIONS.get(target.if_)
    return target.then if condition is not None and condition.test(snap) else target.else_
