"""Matching a rule's patterns and the ask list against a call's arguments.

How a command prefix or a path glob matches is described in
:mod:`core.policy.policy` (and structurally in :mod:`core.policy.commands`).
"""

from __future__ import annotations

import posixpath
import shlex
from fnmatch import fnmatchcase

from core.policy.chains import chain_parts, squash
from core.policy.commands import (
    command_starts,
    command_words,
    parse_pattern,
    program_name,
)
from core.policy.summary import shorten


def prefix_matches(command: str, prefix: str, *, strict: bool) -> bool:
    """Strict: every command of the chain starts with ``prefix``. Else: any command start,
    or the prefix found structurally in any simple command."""
    want = _wanted(prefix)
    if strict:
        starts = chain_parts(command)
        return bool(starts) and all(start.startswith(want) for start in starts)
    if any(start.startswith(want) for start in command_starts(command)):
        return True
    return _found(command, (prefix,)) is not None


def asked(command: str, patterns: tuple[str, ...]) -> tuple[str, str] | None:
    """The first ask pattern that matches ``command`` and how it shows in the reason.

    Text prefixes first (``rm -rf`` shows as itself), then structurally (``rm -f -r``
    shows as the words found), so every text match keeps its pattern and reason.
    """
    wanted = tuple(_wanted(pattern) for pattern in patterns)
    starts = [start for start in command_starts(command) if start.startswith(wanted)]
    for pattern, want in zip(patterns, wanted, strict=True):
        if any(start.startswith(want) for start in starts):
            return pattern, pattern.strip()
    return _found(command, patterns)


def _found(command: str, patterns: tuple[str, ...]) -> tuple[str, str] | None:
    """The first pattern found structurally in ``command``, with the words that matched."""
    by_program: dict[str, list[tuple[str, ...]]] = {}
    for words in command_words(command):
        by_program.setdefault(program_name(words[0]), []).append(words)
    for pattern in patterns:
        shape = parse_pattern(pattern)
        if shape is None:
            continue
        for words in by_program.get(shape.program, ()):
            found = shape.find(words)
            if found is not None:
                return pattern, shorten(shlex.join(found).replace("`", "ˋ"), 60)
    return None


def _wanted(prefix: str) -> str:
    """``prefix`` as command starts are written: squashed, a trailing space kept (``dd ``)."""
    return squash(prefix) + (" " if prefix[-1:].isspace() else "")


def glob_matches(path: str, glob: str, *, strict: bool) -> bool:
    """fnmatch ``glob`` on the normalized path (see :class:`Rule` for strict)."""
    normal = posixpath.normpath(path)
    if strict:
        return fnmatchcase(normal, glob)
    parts = normal.lstrip("/").split("/")
    candidates = [normal.lstrip("/")]
    if normal.startswith("/"):
        candidates += ["/".join(parts[i:]) for i in range(1, len(parts))]
    return any(fnmatchcase(c.lower(), glob.lower()) for c in candidates)
