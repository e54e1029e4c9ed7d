"""``threadbot workflows check`` and ``threadbot workflows show`` (see :mod:`bot.cli`).

``check FILE...`` loads the shipped workflows and the files given, as the bot loads its
``workflows_folder`` at start, and starts nothing: every problem is printed on stderr
as ``file:line: reason`` (exit 2), else ``FILE: ok (workflow NAME, N states)`` for each
file (exit 0). A file's sub-workflow may be a shipped one or another file given. Tool
names are checked against the bot's own tools (the control tools and the workspace
tools, :func:`bot.engines.default_toolbox`, which are built without the settings).
``show NAME`` prints one of the bot's workflows (the shipped ones and the
``workflows_folder``'s, sub-workflows inlined) as text, or as a Mermaid diagram with
``--mermaid`` (:mod:`core.workflows.render`); an unknown name is an error (exit 2)
listing the known ones (docs/architecture.md, "Workflows").
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from bot.engines import default_toolbox
from bot.settings import Settings
from core.workflows import render
from core.workflows.checks import Known
from core.workflows.loading import (
    Source,
    WorkflowErrors,
    WorkflowFileError,
    load,
    parse,
    shipped_sources,
)


def bot_tools() -> frozenset[str]:
    """The names of the tools the bot offers (the control tools among them)."""
    return frozenset(tool.spec.name for tool in default_toolbox())


def workflow_errors_said(exc: WorkflowErrors) -> str:
    """Workflow files that do not load, as the bot says it before it exits 2: a heading,
    then each problem on its own indented line, ``file:line: reason``."""
    return "\n".join(["threadbot: bad workflow files:", *(f"  {error}" for error in exc.errors)])


def check_files(files: Sequence[Path]) -> int:
    """``threadbot workflows check FILE...``: 0 when every file loads, else 2 after each
    problem on stderr (see the module docstring)."""
    errors: list[WorkflowFileError] = []
    given: list[Source] = []
    for path in dict.fromkeys(files):
        try:
            given.append(Source(str(path), path.read_text("utf-8")))
        except OSError as exc:
            errors.append(WorkflowFileError(str(path), 0, f"cannot read: {_said(exc)}"))
        except UnicodeDecodeError:
            errors.append(WorkflowFileError(str(path), 0, "cannot read: it is not UTF-8 text"))
    try:
        load([*shipped_sources(), *given], Known(tools=bot_tools()))
    except WorkflowErrors as exc:
        errors += exc.errors
    if errors:
        for error in errors:
            print(error, file=sys.stderr)
        return 2
    for source in given:
        workflow = parse(source)
        states = len(workflow.states)
        print(f"{source.path}: ok (workflow {workflow.name}, {states} state{'s' * (states != 1)})")
    return 0


def show_workflow(settings: Settings, name: str, *, mermaid: bool = False) -> int:
    """``threadbot workflows show NAME [--mermaid]``: 0 after printing the workflow, 2
    after saying why it cannot be (a file that does not load, an unknown name)."""
    try:
        library = settings.workflow_library(bot_tools())
    except WorkflowErrors as exc:
        print(workflow_errors_said(exc), file=sys.stderr)
        return 2
    if name not in library:
        print(
            f"threadbot workflows show: no workflow called {name!r}; "
            f"known: {', '.join(library.names)}",
            file=sys.stderr,
        )
        return 2
    workflow = library[name]
    print(render.mermaid(workflow) if mermaid else render.describe(workflow), end="")
    return 0


def _said(error: OSError) -> str:
    """An error reading a file, in words: ``no such file or directory``."""
    return (error.strerror or str(error)).lower()
