"""The ``Tool`` protocol, what a tool returns, and the ``Toolbox`` that holds them.

A tool receives its input (a JSON object, read into its input model by the tool
itself, :class:`core.tools.inputs.ToolInput`) and a :class:`ToolContext`, and returns
a :class:`ToolOutput`. What a tool is (control, read-only, mutating) is data, its
spec's ``kind`` (:class:`core.models.base.ToolKind`). It raises
:class:`core.vocabulary.errors.ToolError` for anything the model should be told (bad
input, a path outside the workspace, a timeout); the engine turns that into an error
``tool_result``. Cancelling the task that runs a tool
stops it (``run_command`` kills its process group).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from core.models.base import ToolKind, ToolSpec
from core.outputs.base import Gone
from core.secrets import NO_SECRETS, Redactor
from core.vocabulary.tool_records import CommandProcess


@dataclass(frozen=True, kw_only=True)
class ToolContext:
    """Where and how a tool runs.

    ``workspace``: the conversation's directory; file and command tools never reach
    outside it. ``command_timeout``: seconds before ``run_command`` kills the
    command. ``output_limit``: characters of output kept (head and tail).
    """

    workspace: Path
    command_timeout: float = 120.0
    command_cpu_seconds: float | None = None
    """CPU seconds each process of a command may use; None: no cap."""
    command_memory_mb: int | None = None
    """Megabytes a command's processes may use together (its cgroup); None: no cap."""
    command_processes: int | None = None
    """Processes (threads included) a command may run at once (its cgroup); None: no cap.
    The engine passes its settings' caps (on by default); these defaults serve tests."""
    output_limit: int = 16_000
    network: bool = False
    """The call may reach the network (a policy rule granted it); sandboxed commands only."""
    started: Callable[[CommandProcess], Awaitable[None]] | None = None
    """Called by ``run_command`` once its process group runs, before it waits for it:
    the record keeps the group, so a group left behind by a crash is found again."""
    read_limit: int = 16_000
    """Characters of output the model reads at once (a longer result is previewed, and
    ``read_output`` pages by it); ``output_limit`` is what a tool keeps."""
    outputs: Callable[[str], Awaitable[str | Gone | None]] | None = None
    """The conversation's stored large outputs by id (``read_output``): the content,
    :class:`~core.outputs.Gone` (kept once, no longer), or None (unknown); None: none kept."""
    redactor: Redactor = NO_SECRETS
    """The bot's secrets: output a tool streams goes through ``redactor.stream()``
    before it is kept or cut, so a token split across chunks (or by the cut) is
    redacted. The engine redacts every whole result and note again when it commits."""


@dataclass(frozen=True, kw_only=True)
class ToolOutput:
    """What a tool returns: ``content`` for the model, ``note`` for the thread, and the
    step of the plan the note is about (``report_progress``'s ``step``, None for others)."""

    content: str
    note: str
    is_error: bool = False
    step: str | None = None


class Tool(Protocol):
    """One tool: its spec (for the model, and its kind), and how it runs."""

    @property
    def spec(self) -> ToolSpec:
        """Name, description and input JSON Schema, as the model sees them, and kind."""
        ...

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        """Do the work; raise :class:`core.vocabulary.errors.ToolError` for a refusal or failure."""
        ...


class Toolbox:
    """Tools by name, and the groups ``read_only`` (every tool that changes nothing, the
    control tools too, except those that end the turn and move the workflow on:
    :attr:`core.models.base.ToolSpec.ends_turn`, which a state names to offer) and ``all``
    used by workflows.

    Raises ``ValueError`` when two tools share a name.
    """

    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            name = tool.spec.name
            if name in self._tools:
                raise ValueError(f"two tools are called {name!r}")
            self._tools[name] = tool

    def __iter__(self) -> Iterator[Tool]:
        """Every tool, in the order given."""
        return iter(self._tools.values())

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        return self._tools.get(name)

    def kind(self, name: str) -> ToolKind:
        """The kind of the tool ``name`` (an unknown tool counts as read-only)."""
        tool = self._tools.get(name)
        return tool.spec.kind if tool else ToolKind.READ_ONLY

    def read_only(self, name: str) -> bool:
        """Whether running the tool ``name`` changes nothing: a read-only or control tool
        (an unknown tool counts as read-only)."""
        return self.kind(name) is not ToolKind.MUTATING

    def repeatable(self, name: str) -> bool:
        """Whether a failed call of the tool ``name`` may be tried again: a read-only
        tool that says so (:attr:`core.models.base.ToolSpec.repeatable`); never a
        mutating or control tool, nor an unknown one."""
        tool = self._tools.get(name)
        return tool is not None and tool.spec.kind is ToolKind.READ_ONLY and tool.spec.repeatable

    def select(self, names: Iterable[str]) -> list[Tool]:
        """Tools for a workflow position: names, ``read_only`` or ``all``; unknown names
        skipped. ``read_only`` leaves out the tools that end the turn (a chat state that
        names ``finish`` and not ``propose_plan`` proposes no plan)."""
        chosen: dict[str, Tool] = {}
        for name in names:
            if name == "all":
                chosen.update(self._tools)
            elif name == "read_only":
                chosen.update(
                    {
                        n: t
                        for n, t in self._tools.items()
                        if self.read_only(n) and not t.spec.ends_turn
                    }
                )
            elif name in self._tools:
                chosen[name] = self._tools[name]
        return list(chosen.values())
