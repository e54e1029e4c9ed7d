"""Reading workflow files: parsed, checked, sub-workflows inlined, each problem with its
file and line (docs/architecture.md, "Workflows").

:func:`load_library` reads the shipped workflows (``core/workflows/shipped/``) and the
``*.toml`` files of a folder beside them into a :class:`WorkflowLibrary`; it raises
:class:`WorkflowErrors` with every problem found (:class:`WorkflowFileError`: the
file, the line, the reason), which the bot prints before it exits 2 at start, and
``threadbot workflows check`` prints without starting. A sub-workflow state is
replaced by the states of the workflow it runs, named ``<state>/<its state>``, whose
``end`` states lead on along the state's own transitions (:func:`resolve`): what a
conversation journals and runs has no sub-workflow left in it.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from pydantic import ValidationError

from core.workflows.checks import Known, Problem, problems
from core.workflows.lines import line_of, shape_problems
from core.workflows.model import Guard, Outcome, State, StateKind, Target, Workflow

NOTHING_KNOWN = Known()
"""No tool names to check against."""

SHIPPED = ("default", "chat", "validate-fix")
"""The workflows that come with threadbot, by name (``core/workflows/shipped/<name>.toml``)."""


@dataclass(frozen=True)
class WorkflowFileError:
    """One problem in one file: ``path`` (as given), ``line`` (1-based; 0: the file as a
    whole) and ``reason``. ``str()`` is ``path:line: reason``."""

    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.reason}"


class WorkflowErrors(ValueError):
    """Workflow files that do not load; ``errors`` holds each problem, in file order."""

    def __init__(self, errors: Iterable[WorkflowFileError]) -> None:
        self.errors = tuple(errors)
        super().__init__("\n".join(str(e) for e in self.errors))


@dataclass(frozen=True)
class Source:
    """A workflow file's text and where it came from (``path``: shown in errors)."""

    path: str
    text: str


def parse(source: Source) -> Workflow:
    """One file as a :class:`Workflow`, unchecked beyond its shape; raises
    :class:`WorkflowErrors` for TOML that does not parse or a shape that is not a
    workflow's (an unknown key, a role that is not one, a duration that does not read)."""
    try:
        data = tomllib.loads(source.text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"line (\d+)", str(exc))
        line = int(found.group(1)) if found else 0
        raise WorkflowErrors(
            [WorkflowFileError(source.path, line, f"TOML does not parse: {exc}")]
        ) from exc
    try:
        return Workflow.model_validate(data)
    except ValidationError as exc:
        raise WorkflowErrors(_shape_errors(source, exc)) from exc


def _shape_errors(source: Source, exc: ValidationError) -> list[WorkflowFileError]:
    return [
        WorkflowFileError(source.path, line, reason)
        for line, reason in shape_problems(source.text, exc)
    ]


def ends_of(workflow: Workflow) -> tuple[str, ...]:
    """The names of ``workflow``'s ``end`` states: the outcomes a state that runs it has."""
    return tuple(n for n, s in workflow.states.items() if s.kind is StateKind.END)


def check(source: Source, workflow: Workflow, known: Known) -> list[WorkflowFileError]:
    """:func:`core.workflows.checks.problems` of ``workflow`` with their lines in ``source``."""
    return [_located(source, problem) for problem in problems(workflow, known)]


def _located(source: Source, problem: Problem) -> WorkflowFileError:
    line = line_of(source.text, problem.state, problem.key)
    return WorkflowFileError(source.path, line, problem.reason)


class RunsItself(ValueError):
    """A workflow that runs itself through sub-workflows: ``path`` names each workflow on
    the way, the first and last alike."""

    def __init__(self, path: tuple[str, ...]) -> None:
        self.path = path
        super().__init__(f"workflow {' -> '.join(path)} runs itself")


def resolve(workflow: Workflow, others: Mapping[str, Workflow]) -> Workflow:
    """``workflow`` with each sub-workflow state replaced by the sub-workflow's states
    (see the module docstring), in the state's place; ``others`` are the workflows by
    name. An inner state that names no ``error`` transition takes the sub-workflow's
    error state, else the sub-workflow state's own ``error`` transition (else the
    workflow's error state, as any state). A guard inside that leads to an ``end`` state
    whose transition outside is a guard too takes that guard's ``else``. Raises
    :class:`RunsItself` for a workflow that runs itself, through any number of others."""
    return _resolve(workflow, others, (workflow.name,))


def _resolve(workflow: Workflow, others: Mapping[str, Workflow], path: tuple[str, ...]) -> Workflow:
    subs: dict[str, Workflow] = {}
    for name, state in workflow.states.items():
        if state.kind is StateKind.WORKFLOW:
            if state.workflow in path:
                raise RunsItself((*path, state.workflow))
            subs[name] = _resolve(others[state.workflow], others, (*path, state.workflow))

    def enter(target: str) -> str:
        """A state of ``workflow`` as resolved: a sub-workflow state's is its start's."""
        sub = subs.get(target)
        return target if sub is None else f"{target}/{sub.start}"

    states: dict[str, State] = {}
    for name, state in workflow.states.items():
        sub = subs.get(name)
        if sub is None:
            on = {outcome: _retarget(t, enter) for outcome, t in state.on.items()}
            states[name] = state.model_copy(update={"on": on})
        else:
            states.update(_inlined(name, state, sub, enter))
    header = workflow.workflow
    update = {"start": enter(header.start), "error": header.error and enter(header.error)}
    return Workflow(workflow=header.model_copy(update=update), states=states)


def _inlined(
    name: str, state: State, sub: Workflow, enter: Callable[[str], str]
) -> dict[str, State]:
    """The states of ``sub`` (resolved) that ``state``, called ``name``, runs, each as
    ``<name>/<its name>``; its ``end`` states lead along ``state``'s transition of their
    name (through ``enter``, for a sub-workflow state beside ``state``)."""

    def leave(inner: str) -> Target:
        if sub.states[inner].kind is StateKind.END:
            return _retarget(state.on[inner], enter)
        return f"{name}/{inner}"

    def plain(inner: str) -> str:
        target = leave(inner)
        return target if isinstance(target, str) else target.else_

    error = sub.workflow.error
    fallback: Target | None = None
    if error:
        fallback = leave(error)
    elif Outcome.ERROR in state.on:
        fallback = _retarget(state.on[Outcome.ERROR], enter)
    states: dict[str, State] = {}
    for inner, inner_state in sub.states.items():
        if inner_state.kind is StateKind.END:
            continue
        on: dict[str, Target] = {
            outcome: leave(t) if isinstance(t, str) else _retarget(t, plain)
            for outcome, t in inner_state.on.items()
        }
        if fallback is not None and Outcome.ERROR not in on and inner != error:
            on[Outcome.ERROR] = fallback
        states[f"{name}/{inner}"] = inner_state.model_copy(update={"on": on})
    return states


def _retarget(target: Target, move: Callable[[str], str]) -> Target:
    if isinstance(target, Guard):
        return target.model_copy(update={"then": move(target.then), "else_": move(target.else_)})
    return move(target)


@dataclass(frozen=True)
class WorkflowLibrary:
    """The workflows a bot may run, by name, each checked and resolved; ``paths`` says
    which file each came from (``shipped:<name>`` for the shipped ones)."""

    workflows: Mapping[str, Workflow] = field(default_factory=dict)
    paths: Mapping[str, str] = field(default_factory=dict)

    def __contains__(self, name: object) -> bool:
        return name in self.workflows

    def __getitem__(self, name: str) -> Workflow:
        return self.workflows[name]

    @property
    def names(self) -> tuple[str, ...]:
        """Every workflow's name, the shipped ones first."""
        return tuple(self.workflows)


def shipped_sources() -> list[Source]:
    """The shipped workflow files."""
    folder = resources.files("core.workflows").joinpath("shipped")
    return [
        Source(f"shipped:{name}", folder.joinpath(f"{name}.toml").read_text("utf-8"))
        for name in SHIPPED
    ]


def folder_sources(folder: Path) -> list[Source]:
    """The ``*.toml`` files of ``folder``, by name, leaving out hidden ones (an editor's
    lock file, ``.#name.toml``) and what is not a file; raises :class:`WorkflowErrors`
    when it is not a folder or a file does not read as UTF-8."""
    if not folder.is_dir():
        raise WorkflowErrors([WorkflowFileError(str(folder), 0, "is not a folder")])
    sources = []
    for path in sorted(folder.glob("*.toml")):
        if path.name.startswith(".") or not path.is_file():
            continue
        try:
            sources.append(Source(str(path), path.read_text("utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            raise WorkflowErrors([WorkflowFileError(str(path), 0, f"cannot read: {exc}")]) from exc
    return sources


def load(sources: Iterable[Source], known: Known = NOTHING_KNOWN) -> WorkflowLibrary:
    """Parse, check and resolve ``sources``; raises :class:`WorkflowErrors` with every
    problem of every file (a name two files give is one too). ``known.tools``: the tool
    names a state may name (None: not checked)."""
    errors: list[WorkflowFileError] = []
    parsed: dict[str, tuple[Source, Workflow]] = {}
    for source in sources:
        try:
            workflow = parse(source)
        except WorkflowErrors as exc:
            errors += exc.errors
            continue
        if workflow.name in parsed:
            first = parsed[workflow.name][0].path
            errors.append(
                WorkflowFileError(
                    source.path,
                    line_of(source.text, None, "name"),
                    f"workflow name {workflow.name!r} is taken (by {first})",
                )
            )
            continue
        parsed[workflow.name] = (source, workflow)
    ends = {name: ends_of(workflow) for name, (_s, workflow) in parsed.items()}
    known = Known(tools=known.tools, workflows=ends)
    for source, workflow in parsed.values():
        errors += check(source, workflow, known)
    resolved: dict[str, Workflow] = {}
    if not errors:
        others = {name: workflow for name, (_s, workflow) in parsed.items()}
        for name, (source, workflow) in parsed.items():
            try:
                resolved[name] = resolve(workflow, others)
            except RunsItself as exc:
                runs = next(n for n, s in workflow.states.items() if s.workflow == exc.path[1])
                line = line_of(source.text, runs, "workflow")
                errors.append(WorkflowFileError(source.path, line, str(exc)))
    if errors:
        raise WorkflowErrors(errors)
    return WorkflowLibrary(
        workflows=resolved, paths={name: source.path for name, (source, _w) in parsed.items()}
    )


def load_library(folder: Path | None = None, known: Known = NOTHING_KNOWN) -> WorkflowLibrary:
    """The shipped workflows and, with ``folder``, its ``*.toml`` files (see :func:`load`)."""
    sources = shipped_sources()
    if folder is not None:
        sources += folder_sources(folder)
    return load(sources, known)


@functools.cache
def shipped_library() -> WorkflowLibrary:
    """The shipped workflows, loaded once per process."""
    return load(shipped_sources())


def default_workflow() -> Workflow:
    """The shipped ``default`` workflow (plan -> approve -> execute -> answer)."""
    return shipped_library()["default"]
