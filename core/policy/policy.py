"""The tool policy: may this tool call run now, must a person be asked, or is it denied?

A pure check with no side effects: :meth:`ToolPolicy.check` looks at the tool's
name, whether it is read-only, its arguments and whether the plan is approved,
and returns a :class:`Verdict` (``allow``, ``deny`` or ``ask``, a reason people
and the model read, and the rule that matched, for logs). The engine acts on it.

Rule order (first that applies wins):

1. control tools (:data:`core.tools.control.CONTROL_TOOLS`): ``allow``;
2. mutating tools where :attr:`ToolPolicy.mutating_tools` is off: ``deny``;
3. the explicit rules of the settings layers (:attr:`ToolPolicy.layers`, nearest
   first: channel, workspace or guild, bot). In each layer the first rule that
   matches is that layer's word; across layers a ``deny`` from any layer wins,
   then an ``ask`` from any layer (so a lower layer's ``ask`` beats a channel's
   ``allow``), then the nearest layer's ``allow``; but with
   :attr:`ToolPolicy.every_command_asks` (no sandbox) a ``run_command`` that no
   ``deny`` or ``ask`` stops asks a person;
4. ``run_command`` whose command matches an :attr:`ToolPolicy.ask_commands`
   pattern (``rm -rf``, ``git push``, ``curl`` ...): ``ask``;
5. read-only tools: ``allow``;
6. mutating tools: ``allow`` once the plan is approved, ``deny`` before
   (or always ``allow`` when ``mutating_needs_plan`` is off).

A rule may grant the commands it lets through network access (``network =
true``): the winning ``allow`` or ``ask`` rule's grant is :attr:`Verdict.network`.

Command patterns match wherever a command starts: at the beginning, after
``;``, ``&``, ``|``, ``(``, ``{``, a backtick, a quote, a newline or ``-exec``,
and after wrappers such as ``env``, ``xargs``, ``timeout 10``, ``VAR=x`` or
``then``. Quotes and backslashes are also read as the shell joins them
(``'r'm -rf`` is ``rm -rf``). A pattern matches as a text prefix of such a start
and, failing that, structurally, on the command's words (:mod:`core.policy.commands`):
its options anywhere and in any spelling (``rm -rf`` in ``rm -f -r d``,
``rm -vrf d``; ``chmod -R`` in ``chmod 777 -R .``), its further words after any
options (``git push`` in ``git -C . push``). This errs towards asking:
``echo "x; curl"`` and ``echo "rm -rf"`` ask too. It is a guard, not a sandbox:
a script, an alias or ``$CMD`` is not seen through.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
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

from core.policy.matching import asked, glob_matches, prefix_matches
from core.tools.command import RunCommand
from core.tools.control import CONTROL_TOOLS

RUN_COMMAND = RunCommand.spec.name

_ASK_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "deletes files recursively",
        ("rm -rf", "rm -fr", "rm -fR", "rm -r", "rm -R", "rm --recursive"),
    ),
    ("publishes commits to a remote", ("git push",)),
    ("reaches the network", ("curl", "wget")),
    ("runs as root", ("sudo",)),
    ("reaches another machine", ("ssh", "scp")),
    ("writes raw data to files or disks", ("dd ",)),
    ("deletes the files it finds", ("find -delete",)),
    ("formats a file system", ("mkfs",)),
    ("changes permissions of a whole tree", ("chmod -R", "chmod --recursive")),
    ("changes owners of a whole tree", ("chown -R", "chown --recursive")),
    ("publishes a package", ("npm publish",)),
    (
        "installs packages from the network",
        ("pip install", "pip3 install", "python -m pip install", "python3 -m pip install"),
    ),
    ("controls containers on the host", ("docker",)),
    ("changes a cluster", ("kubectl",)),
)
_ASK_WHY = {pattern: why for why, patterns in _ASK_GROUPS for pattern in patterns}

DEFAULT_ASK_COMMANDS: tuple[str, ...] = tuple(_ASK_WHY)
"""Destructive or outward-reaching command patterns that ask by default (as prefixes,
and structurally: see the module docstring)."""


class Decision(StrEnum):
    """What the policy says about a tool call."""

    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


class Verdict(BaseModel):
    """The outcome of :meth:`ToolPolicy.check`.

    ``reason`` is readable, shown to people and the model (e.g. "`rm -rf` deletes
    files recursively: the policy asks first"); ``rule`` names what matched, for
    logs (``control_tool``, ``rules[0] ...``, ``ask_commands 'rm -rf'``,
    ``read_only``, ``mutating``, ``plan_approved``, ``plan_not_approved``,
    ``mutating_tools_off``); a layer's rule is prefixed with the layer's name.
    ``network``: the call may reach the network (granted by the rule that let it
    through; never for a ``deny``).
    """

    model_config = ConfigDict(frozen=True)

    decision: Decision
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
    sandbox reads :attr:`Verdict.network`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str
    decision: Decision
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
        if self.network and self.decision is Decision.DENY:
            raise ValueError("`network = true` grants nothing on a deny rule")
        if self.network and self.tool not in ("*", RUN_COMMAND):
            raise ValueError(f'`network = true` applies only to `{RUN_COMMAND}` or "*"')
        return self

    def matches(self, tool_name: str, arguments: Mapping[str, Any]) -> bool:
        """Whether the rule applies to a call of ``tool_name`` with ``arguments``."""
        if self.tool not in ("*", tool_name):
            return False
        strict = self.decision is Decision.ALLOW
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
        verb = {Decision.ALLOW: "allows", Decision.DENY: "denies", Decision.ASK: "asks before"}
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


class ToolPolicy(BaseModel):
    """Explicit rules, the ask list for ``run_command``, and the plan gate.

    ``rules`` are the bot's own rules; ``layers`` the rules of nearer settings
    layers, nearest first (a channel, then its workspace or guild), checked with
    them (see the module docstring). ``mutating_tools`` off denies every mutating
    tool (the channel's setting). Build it with :func:`default_policy`,
    :meth:`from_toml_table` or :meth:`with_layers`; decide with :meth:`check`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    rules: tuple[Rule, ...] = ()
    layers: tuple[RuleLayer, ...] = ()
    ask_commands: tuple[str, ...] = DEFAULT_ASK_COMMANDS
    mutating_needs_plan: bool = True
    mutating_tools: bool = True
    every_command_asks: bool = False
    """True where commands cannot be sandboxed: every ``run_command`` asks a person."""

    @field_validator("ask_commands")
    @classmethod
    def _no_blank_pattern(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not pattern.strip() for pattern in value):
            raise ValueError("patterns must not be empty")
        return value

    def check(
        self, *, tool_name: str, read_only: bool, arguments: Mapping[str, Any], plan_approved: bool
    ) -> Verdict:
        """The verdict on one call; pure: the same input always gives the same verdict."""
        if tool_name in CONTROL_TOOLS:
            return _verdict(Decision.ALLOW, "control tools are always allowed", "control_tool")
        if not read_only and not self.mutating_tools:
            reason = "mutating tools are off here (the settings' `mutating_tools`)"
            return _verdict(Decision.DENY, reason, "mutating_tools_off")
        explicit = self._explicit(tool_name, arguments)
        if self.every_command_asks and tool_name == RUN_COMMAND:
            if explicit is None or explicit.decision is Decision.ALLOW:
                reason = "commands run without a sandbox here: every command asks first"
                return _verdict(Decision.ASK, reason, "no_sandbox")
        if explicit is not None:
            return explicit
        command = arguments.get("command")
        if tool_name == RUN_COMMAND and isinstance(command, str):
            found = asked(command, self.ask_commands)
            if found is not None:
                pattern, shown = found
                why = _ASK_WHY.get(pattern, "is on the policy's ask list")
                reason = f"`{shown}` {why}: the policy asks first"
                return _verdict(Decision.ASK, reason, f"ask_commands {pattern!r}")
        return self._default(read_only=read_only, plan_approved=plan_approved)

    def _explicit(self, tool_name: str, arguments: Mapping[str, Any]) -> Verdict | None:
        """The verdict of the layers' explicit rules, or None when no rule matches."""
        found: list[Verdict] = []
        bot = RuleLayer(name="bot settings" if self.layers else "", rules=self.rules)
        for layer in (*self.layers, bot):
            for index, rule in enumerate(layer.rules):
                if rule.matches(tool_name, arguments):
                    where = f"{layer.name} " if layer.name else ""
                    label = f"{where}rules[{index}] {rule.label()}"
                    reason = rule.reason or rule.describe()
                    if layer.name:
                        reason = f"{reason} ({layer.name})"
                    network = rule.network and rule.decision is not Decision.DENY
                    found.append(
                        Verdict(decision=rule.decision, reason=reason, rule=label, network=network)
                    )
                    break
        for decision in (Decision.DENY, Decision.ASK, Decision.ALLOW):
            first = next((v for v in found if v.decision is decision), None)
            if first is not None:
                return first
        return None

    def with_layers(
        self, layers: Sequence[RuleLayer], *, mutating_tools: bool = True
    ) -> ToolPolicy:
        """This policy with the rules of nearer ``layers`` (nearest first) checked too."""
        return self.model_copy(update={"layers": tuple(layers), "mutating_tools": mutating_tools})

    def _default(self, *, read_only: bool, plan_approved: bool) -> Verdict:
        if read_only:
            return _verdict(Decision.ALLOW, "read-only tools are allowed", "read_only")
        if not self.mutating_needs_plan:
            return _verdict(Decision.ALLOW, "mutating tools are allowed", "mutating")
        if plan_approved:
            reason = "the plan is approved: mutating tools are allowed"
            return _verdict(Decision.ALLOW, reason, "plan_approved")
        reason = "mutating tools run only after the plan is approved"
        return _verdict(Decision.DENY, reason, "plan_not_approved")

    @classmethod
    def from_toml_table(
        cls,
        data: Mapping[str, Any],
        known_tools: Collection[str] | None = None,
        *,
        where: str = "policy",
    ) -> ToolPolicy:
        """The policy of a settings ``[policy]`` table (pass the inner table).

        Keys: ``rules`` (``[[policy.rules]]`` tables with ``tool``, ``decision``,
        ``command_prefix``?, ``path_glob``?, ``reason``?), ``ask_commands``? (replaces
        the default list), ``mutating_needs_plan``?. ``known_tools``, when given, are
        the names a rule's ``tool`` may take (besides ``"*"``). Raises
        :class:`ValueError` naming the rule for a missing ``tool`` or ``decision``, an
        unknown decision, an unknown tool, a pattern the tool cannot match (see
        :class:`Rule`), an unknown key or a wrong type; the message starts with the
        table's dotted path (``where``, e.g. ``slack.T0123.channels.C0456.policy``).
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"{where} must be a table")
        raw_rules = data.get("rules", [])
        if not isinstance(raw_rules, list | tuple):
            raise ValueError(f"{where}.rules must be an array of tables ([[{where}.rules]])")
        if not isinstance(data.get("ask_commands", []), list | tuple):
            raise ValueError(f"{where}.ask_commands must be a list of strings")
        if {"layers", "mutating_tools", "every_command_asks"} & set(data):
            raise ValueError(f"{where}: use rules, ask_commands or mutating_needs_plan")
        known = None if known_tools is None else frozenset(known_tools)
        rules = tuple(
            _rule_from_table(f"{where}.rules[{index}]", table, known)
            for index, table in enumerate(raw_rules)
        )
        try:
            return cls.model_validate({**data, "rules": rules})
        except ValidationError as exc:
            raise ValueError(_errors(exc, where)) from exc


def default_policy() -> ToolPolicy:
    """The shipped policy: no explicit rules, the default ask list, the plan gate on."""
    return ToolPolicy()


# --- text -------------------------------------------------------------------------


def _verdict(decision: Decision, reason: str, rule: str) -> Verdict:
    return Verdict(decision=decision, reason=reason, rule=rule)


def _rule_from_table(where: str, table: object, known: frozenset[str] | None) -> Rule:
    if not isinstance(table, Mapping):
        raise ValueError(f"{where} must be a table")
    if "tool" not in table:
        raise ValueError(f'{where}.tool: missing; give a tool name or "*"')
    if "decision" not in table:
        raise ValueError(f"{where}.decision: missing; use allow, deny or ask")
    if table["decision"] not in tuple(Decision):
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
        raise ValueError(_errors(exc, where)) from exc


def _errors(exc: ValidationError, where: str) -> str:
    return "; ".join(_error(where, error["loc"], error["msg"]) for error in exc.errors())


def _error(where: str, loc: tuple[int | str, ...], message: str) -> str:
    """``policy.rules[1].tool: must not be empty``; a whole-table error at ``where``."""
    message = message.removeprefix("Value error, ")
    path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)
    return f"{where}{path}: {message}"
