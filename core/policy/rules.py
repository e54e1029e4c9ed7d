"""The shapes of the tool policy: permissions, rulings, explicit rules and the rules of a layer.

How they are checked together: :mod:`core.policy.policy`. How a rule's patterns
match a call's arguments: :mod:`core.policy.matching`.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    StrictBool,
    ValidationError,
    field_validator,
    model_validator,
)

from core.policy.matching import glob_matches, prefix_matches
from core.tools.command import RunCommand

RUN_COMMAND = RunCommand.spec.name


class Permission(StrEnum):
    """What the policy says about a tool call."""

    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


class Ruling(BaseModel):
    """The outcome of :meth:`core.policy.policy.ToolPolicy.check`.

    ``reason`` is readable, shown to people and the model (e.g. "`rm -rf` deletes
    files recursively: the policy asks first"); ``rule`` names what matched, for
    logs (``control_tool``, ``rules[0] ...``, ``ask_commands 'rm -rf'``,
    ``read_only``, ``mutating``, ``plan_approved``, ``plan_not_approved``,
    ``mutating_tools_off``); a layer's rule is prefixed with the layer's name.
    ``network``: the call may reach the network (granted by the rule that let it
    through; never for a ``deny``).
    """

    model_config = ConfigDict(frozen=True)

    decision: Permission
    reason: str
    rule: str
    network: bool = False


class Rule(BaseModel):
    """An explicit rule: ``tool`` (a name or ``"*"``), optional patterns, a decision.

    ``command_prefix`` applies to the ``command`` argument, ``path_glob`` (fnmatch,
    ``*`` crosses ``/``) to the normalized relative ``path`` argument; a rule with a
    pattern matches only when that argument is a string that matches (both, when
    both are given). A ``deny`` or ``ask`` rule matches generously: the prefix at
    any command start or found structurally (``make deploy`` in ``make -C app
    deploy``, see :mod:`core.policy.commands`), the glob case-insensitively and, for an
    absolute path, on any trailing part of it. An ``allow`` rule matches strictly:
    every command of a chain (``a && b``) starts with the prefix, the glob matches
    the relative path. ``reason`` is shown when the rule matches; empty means a
    generated one.

    A rule names one tool: ``tool = "write_file"`` with a ``path_glob`` does not
    cover ``edit_file`` (give it its own rule, or use ``tool = "*"``, which covers
    every tool with a ``path`` argument). A rule that could never match is refused
    (:class:`ValueError`): a ``command_prefix`` on a tool other than ``run_command``
    or ``"*"``, a ``path_glob`` on ``run_command``, ``network`` on a ``deny``.

    ``network = true`` grants the calls the rule lets through network access (the
    sandbox reads :attr:`Ruling.network`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str
    decision: Permission
    command_prefix: str | None = None
    path_glob: str | None = None
    reason: str = ""
    network: StrictBool = False

    @field_validator("tool", "command_prefix", "path_glob")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty")
        return value

    @model_validator(mode="after")
    def _can_match(self) -> Rule:
        if self.command_prefix is not None and self.tool not in ("*", RUN_COMMAND):
            raise ValueError(
                f'`command_prefix` applies only to `{RUN_COMMAND}` or "*": '
                f"`{self.tool}` has no `command` argument, so this rule could never match"
            )
        if self.path_glob is not None and self.tool == RUN_COMMAND:
            raise ValueError(
                f"`path_glob` never matches `{RUN_COMMAND}` (it has no `path` argument): "
                'use `command_prefix`, or name a file tool or "*"'
            )
        if self.network and self.decision is Permission.DENY:
            raise ValueError("`network = true` grants nothing on a deny rule")
        if self.network and self.tool not in ("*", RUN_COMMAND):
            raise ValueError(f'`network = true` applies only to `{RUN_COMMAND}` or "*"')
        return self

    def matches(self, tool_name: str, arguments: Mapping[str, Any]) -> bool:
        """Whether the rule applies to a call of ``tool_name`` with ``arguments``."""
        if self.tool not in ("*", tool_name):
            return False
        strict = self.decision is Permission.ALLOW
        if self.command_prefix is not None:
            command = arguments.get("command")
            if not isinstance(command, str) or not prefix_matches(
                command, self.command_prefix, strict=strict
            ):
                return False
        if self.path_glob is not None:
            path = arguments.get("path")
            if not isinstance(path, str) or not glob_matches(path, self.path_glob, strict=strict):
                return False
        return True

    def describe(self) -> str:
        """The generated reason, e.g. "the policy denies `run_command` for commands ..."."""
        verb = {
            Permission.ALLOW: "allows",
            Permission.DENY: "denies",
            Permission.ASK: "asks before",
        }
        what = "every tool" if self.tool == "*" else f"`{self.tool}`"
        parts = []
        if self.command_prefix is not None:
            parts.append(f"commands starting with `{self.command_prefix}`")
        if self.path_glob is not None:
            parts.append(f"paths matching `{self.path_glob}`")
        scope = f" for {' and '.join(parts)}" if parts else ""
        return f"the policy {verb[self.decision]} {what}{scope}"

    def label(self) -> str:
        """A compact form for logs: ``run_command command_prefix='make deploy' -> deny``."""
        prefix = "" if self.command_prefix is None else f" command_prefix={self.command_prefix!r}"
        glob = "" if self.path_glob is None else f" path_glob={self.path_glob!r}"
        network = " network" if self.network else ""
        return f"{self.tool}{prefix}{glob}{network} -> {self.decision}"


class RuleLayer(BaseModel):
    """The explicit rules of one settings layer, and the layer's name for reasons and logs
    (``bot settings``, ``slack workspace T0123``, ``slack channel C0456`` ...)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    rules: tuple[Rule, ...] = ()
    ask_commands: tuple[str, ...] = ()
    """Patterns this layer added to the ask list in force (a tightening): they ask before
    any ``allow`` rule, of any layer."""
    mutating_needs_plan: bool = False
    """This layer turned the plan gate on where a wider layer had it off (a tightening):
    a mutating call before the plan is approved is denied, whatever a rule allows."""


def rule_from_table(where: str, table: object, known: frozenset[str] | None) -> Rule:
    """The rule of one ``[[policy.rules]]`` table at the dotted path ``where``.

    ``known``: the tool names a rule may name besides ``"*"`` (None: any). Raises
    :class:`ValueError` starting with ``where`` for a missing ``tool`` or ``decision``, an
    unknown decision or tool, or a rule that could never match (:class:`Rule`).
    """
    if not isinstance(table, Mapping):
        raise ValueError(f"{where} must be a table")
    if "tool" not in table:
        raise ValueError(f'{where}.tool: missing; give a tool name or "*"')
    if "decision" not in table:
        raise ValueError(f"{where}.decision: missing; use allow, deny or ask")
    if table["decision"] not in tuple(Permission):
        raise ValueError(
            f"{where}.decision: unknown decision {table['decision']!r}; use allow, deny or ask"
        )
    tool = table["tool"]
    if known is not None and isinstance(tool, str) and tool.strip() and tool not in known | {"*"}:
        names = ", ".join(sorted(known)) or "none"
        raise ValueError(f"{where}.tool: no tool called {tool!r}; known: {names}")
    try:
        return Rule.model_validate(table)
    except ValidationError as exc:
        raise ValueError(errors_said(exc, where)) from exc


def errors_said(exc: ValidationError, where: str) -> str:
    """A validation error as people read it: ``policy.rules[1].tool: must not be empty; ...``."""
    return "; ".join(_error(where, error["loc"], error["msg"]) for error in exc.errors())


def _error(where: str, loc: tuple[int | str, ...], message: str) -> str:
    """``policy.rules[1].tool: must not be empty``; a whole-table error at ``where``."""
    message = message.removeprefix("Value error, ")
    path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)
    return f"{where}{path}: {message}"
