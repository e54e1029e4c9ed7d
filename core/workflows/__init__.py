"""Workflows as data: TOML state machines, checked when loaded (docs/architecture.md,
"Workflows").

Modules::

    model.py        Workflow, State (agent, action, human, wait, workflow, end), Outcome
    checks.py       what loading checks: states, transitions, loops and their caps, names
    loading.py      files -> WorkflowLibrary, each problem with its file and line;
                    sub-workflows inlined
    lines.py        the line of a key in a file; shape errors in words
    conditions.py   the Python conditions a transition's guard may name
    render.py       a workflow as text and as a Mermaid state diagram (workflows show)
    shipped/        default.toml, chat.toml, validate-fix.toml
"""

from core.workflows.loading import (
    SHIPPED,
    WorkflowErrors,
    WorkflowFileError,
    WorkflowLibrary,
    default_workflow,
    load_library,
)
from core.workflows.model import Outcome, State, StateKind, Workflow

__all__ = [
    "SHIPPED",
    "Outcome",
    "State",
    "StateKind",
    "Workflow",
    "WorkflowErrors",
    "WorkflowFileError",
    "WorkflowLibrary",
    "default_workflow",
    "load_library",
]
