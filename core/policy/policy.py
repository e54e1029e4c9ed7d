"""The tool policy: may this tool call run now, must a person be asked, or is it denied?

A pure check with no side effects: :meth:`ToolPolicy.check` looks at the tool's
name, whether it is read-only, its arguments and whether the plan is approved,
and returns a :class:`Ruling` (``allow``, ``deny`` or ``ask``, a reason people
and the model read, and the rule that matched, for logs). The engine acts on it.

Rule order (first that applies wins). The shipped defaults are the widest layer
(steps 6 and 8, as the bot's settings set them); every layer's ``deny`` and ``ask``
rank above every ``allow``:

1. control tools (:func:`core.tools.control.is_control`): ``allow``;
2. mutating tools where :attr:`ToolPolicy.mutating_tools` is off: ``deny``;
3. a ``deny`` from any layer: the explicit rules of the settings layers
   (:attr:`ToolPolicy.layers`, nearest first: channel, workspace or guild, then the
   bot's :attr:`ToolPolicy.rules`; in each layer the first rule that matches is that
   layer's word), then the plan gate a nearer layer turned on
   (:attr:`RuleLayer.mutating_needs_plan`) for a mutating call before the plan is
   approved;
4. an ``ask`` from any layer: an ``ask`` rule; a pattern a nearer layer added to the
   ask list (:attr:`RuleLayer.ask_commands`); with
   :attr:`ToolPolicy.every_command_asks` (no sandbox), every ``run_command``;
5. the nearest layer's ``allow`` rule. An allow rule is a loosening: it goes before
   the defaults' ask list and plan gate only (steps 6 and 8). The layers handed in
   carry only the allow rules the settings accepted (a workspace's or channel's only
   where a wider layer lets it loosen them);
6. ``run_command`` whose command matches an :attr:`ToolPolicy.ask_commands`
   pattern (``rm -rf``, ``git push``, ``curl`` ...): ``ask``;
7. read-only tools: ``allow``;
8. mutating tools: ``allow`` once the plan is approved, ``deny`` before
   (or always ``allow`` when ``mutating_needs_plan`` is off).

A rule may grant the commands it lets through network access (``network =
true``): the winning ``allow`` or ``ask`` rule's grant is :attr:`Ruling.network`.

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
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from core.policy.matching import asked
from core.policy.rules import (
    RUN_COMMAND,
    Permission,
    Rule,
    RuleLayer,
    Ruling,
    errors_said,
    rule_from_table,
)
from core.tools import control

__all__ = [
    "DEFAULT_ASK_COMMANDS",
    "RUN_COMMAND",
    "Permission",
    "Rule",
    "RuleLayer",
    "Ruling",
    "ToolPolicy",
    "default_policy",
]

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


class ToolPolicy(BaseModel):
    """Explicit rules, the ask list for ``run_command``, and the plan gate.

    ``rules`` are the bot's own rules; ``layers`` the rules of nearer settings
    layers, nearest first (a channel, then its workspace or guild), with the asks
    and plan gate each added, checked with them (see the module docstring).
    ``ask_commands`` and ``mutating_needs_plan`` are the defaults' as the bot's
    settings (or a layer allowed to loosen them) set them. ``mutating_tools`` off
    denies every mutating tool (the channel's setting). Build it with :func:`default_policy`,
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
    ) -> Ruling:
        """The ruling on one call; pure: the same input always gives the same ruling."""
        if control.is_control(tool_name):
            return _ruling(Permission.ALLOW, "control tools are always allowed", "control_tool")
        if not read_only and not self.mutating_tools:
            reason = "mutating tools are off here (the settings' `mutating_tools`)"
            return _ruling(Permission.DENY, reason, "mutating_tools_off")
        explicit = self._explicit(tool_name, arguments)
        if explicit is not None and explicit.decision is Permission.DENY:
            return explicit
        gate = next((layer.name for layer in self.layers if layer.mutating_needs_plan), None)
        if gate is not None and not read_only and not plan_approved:
            reason = f"mutating tools run only after the plan is approved ({gate})"
            return _ruling(Permission.DENY, reason, f"{gate} plan_not_approved")
        if explicit is not None and explicit.decision is Permission.ASK:
            return explicit
        given = arguments.get("command") if tool_name == RUN_COMMAND else None
        command = given if isinstance(given, str) else None
        added = None if command is None else self._added_asks(command)
        if added is not None:
            return added
        if self.every_command_asks and tool_name == RUN_COMMAND:
            reason = "commands run without a sandbox here: every command asks first"
            return _ruling(Permission.ASK, reason, "no_sandbox")
        if explicit is not None:
            return explicit
        listed = None if command is None else _on_ask_list(command, self.ask_commands, "")
        return listed or self._default(read_only=read_only, plan_approved=plan_approved)

    def _added_asks(self, command: str) -> Ruling | None:
        """The ``ask`` of the nearest layer that added a pattern ``command`` matches."""
        for layer in self.layers:
            added = _on_ask_list(command, layer.ask_commands, layer.name)
            if added is not None:
                return added
        return None

    def _explicit(self, tool_name: str, arguments: Mapping[str, Any]) -> Ruling | None:
        """The ruling of the layers' explicit rules, or None when no rule matches."""
        found: list[Ruling] = []
        bot = RuleLayer(name="bot settings" if self.layers else "", rules=self.rules)
        for layer in (*self.layers, bot):
            for index, rule in enumerate(layer.rules):
                if rule.matches(tool_name, arguments):
                    where = f"{layer.name} " if layer.name else ""
                    label = f"{where}rules[{index}] {rule.label()}"
                    reason = rule.reason or rule.describe()
                    if layer.name:
                        reason = f"{reason} ({layer.name})"
                    network = rule.network and rule.decision is not Permission.DENY
                    found.append(
                        Ruling(decision=rule.decision, reason=reason, rule=label, network=network)
                    )
                    break
        for decision in (Permission.DENY, Permission.ASK, Permission.ALLOW):
            first = next((v for v in found if v.decision is decision), None)
            if first is not None:
                return first
        return None

    def with_layers(
        self, layers: Sequence[RuleLayer], *, mutating_tools: bool = True
    ) -> ToolPolicy:
        """This policy with the rules of nearer ``layers`` (nearest first) checked too."""
        return self.model_copy(update={"layers": tuple(layers), "mutating_tools": mutating_tools})

    def _default(self, *, read_only: bool, plan_approved: bool) -> Ruling:
        if read_only:
            return _ruling(Permission.ALLOW, "read-only tools are allowed", "read_only")
        if not self.mutating_needs_plan:
            return _ruling(Permission.ALLOW, "mutating tools are allowed", "mutating")
        if plan_approved:
            reason = "the plan is approved: mutating tools are allowed"
            return _ruling(Permission.ALLOW, reason, "plan_approved")
        reason = "mutating tools run only after the plan is approved"
        return _ruling(Permission.DENY, reason, "plan_not_approved")

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
            rule_from_table(f"{where}.rules[{index}]", table, known)
            for index, table in enumerate(raw_rules)
        )
        try:
            return cls.model_validate({**data, "rules": rules})
        except ValidationError as exc:
            raise ValueError(errors_said(exc, where)) from exc


def default_policy() -> ToolPolicy:
    """The shipped policy: no explicit rules, the default ask list, the plan gate on."""
    return ToolPolicy()


# --- text -------------------------------------------------------------------------


def _ruling(decision: Permission, reason: str, rule: str) -> Ruling:
    return Ruling(decision=decision, reason=reason, rule=rule)


def _on_ask_list(command: str, patterns: tuple[str, ...], layer: str) -> Ruling | None:
    """The ``ask`` of the first of ``patterns`` that ``command`` matches, said with the
    ``layer`` that added it (empty: the list in force), or None."""
    found = asked(command, patterns) if patterns else None
    if found is None:
        return None
    pattern, shown = found
    why = _ASK_WHY.get(pattern, "is on the policy's ask list")
    reason = f"`{shown}` {why}: the policy asks first" + (f" ({layer})" if layer else "")
    return _ruling(Permission.ASK, reason, f"{layer} ask_commands {pattern!r}".lstrip())
