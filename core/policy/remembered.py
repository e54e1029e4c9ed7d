"""What a remembered approval covers: the pattern a wider approval offers, and its matches.

A person who allows a call for the run or always in the channel allows a
:class:`~core.vocabulary.approvals.CallPattern` (docs/architecture.md, "Approval
scopes"):

- a command (``run_command``) whose one command starts with two plain words, a program
  and its first argument (``git push origin main``, ``make test -k login``, ``pip install
  requests``), offers those two words as a prefix: ``git push``, ``make test``;
- anything else offers the call's exact arguments: a chain (``a && b``), a command whose
  second word is an option, a path, a variable or quoted (``rm -rf build``, ``curl -s
  URL``), one that starts with a wrapper (``sudo``, ``env``, ``xargs`` ...), and every
  other tool.

A prefix covers a command line only when every command of its chain, read as the shell
quotes it (:func:`core.policy.chains.chain_parts`), is the prefix or starts with it and
a space: ``git push`` covers ``git push -f origin`` and not ``git pushy`` nor ``git push
&& rm -rf /``. Exact arguments cover a call with the same arguments (compared as JSON
with sorted keys). Matching is pure and strict, like an ``allow`` rule's: what cannot be
read is not covered, and the person is asked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from core.policy.chains import chain_parts
from core.policy.commands import program_name
from core.policy.rules import RUN_COMMAND
from core.vocabulary.approvals import CallPattern, RememberedRule

_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
"""A plain word: a program's name or a subcommand, with no path, option, variable,
glob or quote in it."""
_WRAPPERS = frozenset(
    "then do else elif if while until time nohup exec command builtin env xargs nice "
    "ionice stdbuf timeout watch setsid unbuffer strace chroot doas sudo su runuser eval "
    "sh bash dash zsh ksh fish busybox".split()
)
"""Programs that run another command given as their arguments: never a prefix's first
word (``sudo rm`` would cover every ``sudo rm -rf``)."""


def pattern_for(tool_name: str, arguments: Mapping[str, Any]) -> CallPattern:
    """The pattern a wider approval of this call remembers (see the module docstring)."""
    command = arguments.get("command") if tool_name == RUN_COMMAND else None
    if isinstance(command, str):
        parts = chain_parts(command)
        words = parts[0].split(" ") if len(parts) == 1 else []
        if (
            len(words) >= 2
            and all(_PLAIN.fullmatch(word) for word in words[:2])
            and program_name(words[0]) not in _WRAPPERS
        ):
            return CallPattern(tool=tool_name, command_prefix=" ".join(words[:2]))
    return CallPattern(tool=tool_name, arguments=dict(arguments))


def covers(pattern: CallPattern, tool_name: str, arguments: Mapping[str, Any]) -> bool:
    """Whether a call of ``tool_name`` with ``arguments`` is one ``pattern`` covers."""
    if pattern.tool != tool_name:
        return False
    if pattern.arguments is not None:
        return _normal(pattern.arguments) == _normal(arguments)
    command = arguments.get("command")
    prefix = pattern.command_prefix
    if not isinstance(command, str) or prefix is None:
        return False
    parts = chain_parts(command)
    return bool(parts) and all(part == prefix or part.startswith(prefix + " ") for part in parts)


Ruled = TypeVar("Ruled", RememberedRule, CallPattern)


def first_covering(
    rules: Iterable[Ruled], tool_name: str, arguments: Mapping[str, Any]
) -> Ruled | None:
    """The first of ``rules`` (remembered rules or bare patterns) that covers the call."""
    for rule in rules:
        pattern = rule.pattern if isinstance(rule, RememberedRule) else rule
        if covers(pattern, tool_name, arguments):
            return rule
    return None


def _normal(arguments: Mapping[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)
