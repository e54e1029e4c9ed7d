"""Where in a workflow file a problem is, and what is wrong with its shape, in words
(docs/architecture.md, "Workflows").

:func:`line_of` finds the line of a key in a state's table (or the ``[workflow]``
table), through dotted keys and inline tables, passing over multi-line strings; a
problem the checks find (:class:`core.workflows.checks.Problem`) names its state and
key, and is shown at that line. :func:`shape_problems` says pydantic's errors of a
file that is not a workflow's shape (an unknown key, a role that is not one) with
their lines.
"""

from __future__ import annotations

import re

from pydantic import ValidationError
from pydantic_core import ErrorDetails


def _header_of(line: str) -> tuple[str, ...] | None:
    found = re.match(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$", line)
    if found is None:
        return None
    return _dotted(found.group(1))


def _dotted(text: str) -> tuple[str, ...]:
    """A TOML dotted key (``states."fix".on``) as its parts, without their quotes."""
    return tuple(part.strip().strip("\"'") for part in text.split("."))


_KEY = re.compile(
    r"""^\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*=(.*)$"""
)
"""A line that sets a key (``on.finished = "x"``, ``"plan_proposed" = "approval"``): the
key and what follows its ``=``."""


def _places(text: str) -> tuple[dict[tuple[str, ...], int], dict[tuple[str, ...], int]]:
    """Where each table's header is (``("states", "fix")`` -> its line) and where each key
    is set (``("states", "fix", "on", "finished")`` -> its line; a dotted key and each
    table it opens), each first line only; lines inside a multi-line string are text, not
    keys or headers."""
    headers: dict[tuple[str, ...], int] = {}
    keys: dict[tuple[str, ...], int] = {}
    current: tuple[str, ...] = ()
    closing = ""  # the quotes that end the multi-line string this line is in
    for number, line in enumerate(text.splitlines(), start=1):
        if closing:
            if line.count(closing) % 2 == 1:
                closing = ""
            continue
        header = _header_of(line)
        if header is not None:
            current = header
            headers.setdefault(header, number)
            continue
        found = _KEY.match(line)
        if found is None:
            continue
        parts = _dotted(found.group(1))
        for end in range(1, len(parts) + 1):
            keys.setdefault((*current, *parts[:end]), number)
        for quotes in ('"""', "'''"):
            if found.group(2).count(quotes) % 2 == 1:
                closing = quotes
                break
    return headers, keys


def line_of(text: str, state: str | None, key: str | None) -> int:
    """The line in ``text`` of ``key`` (dotted: ``on.finished``, ``context.strategy``) in
    the table of ``state`` (None: ``[workflow]``): where the key is set, else the header
    of the table it names, else where the nearest key or table above it in the path is
    (an inline table's line, say), else the state's header, else a line naming the
    state, else 1."""
    table = ("workflow",) if state is None else ("states", state)
    headers, keys = _places(text)
    parts = _dotted(key) if key else ()
    for end in range(len(parts), 0, -1):
        path = (*table, *parts[:end])
        if path in keys:
            return keys[path]
        if path in headers:
            return headers[path]
    if table in headers:
        return headers[table]
    if table in keys:  # states.fix = { ... } or [states] fix = { ... }
        return keys[table]
    if state is not None:
        for number, line in enumerate(text.splitlines(), start=1):
            if re.search(rf"(?<![A-Za-z0-9_-]){re.escape(state)}(?![A-Za-z0-9_-])", line):
                return number
    return 1


NAME_RULE = (
    "a workflow's name is lowercase letters, digits, - and _ (at most 63), starting with a "
    "letter or a digit"
)
"""Why a ``[workflow]`` ``name`` is refused (:data:`core.workflows.model.NAME`)."""

_TYPES = {
    "missing": "is required",
    "string_type": "must be a string",
    "tuple_type": "must be a list",
    "list_type": "must be a list",
    "dict_type": "must be a table",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "greater_than_equal": "must be 0 or more",
}
"""pydantic's error types (https://docs.pydantic.dev/latest/errors/validation_errors/)
in words."""

_TRANSITION = "a transition names a state, or is { if = CONDITION, then = STATE, else = STATE }"


def shape_problems(text: str, exc: ValidationError) -> list[tuple[int, str]]:
    """Each error of ``exc`` (a file's text, ``text``, that is not a workflow's shape) as
    ``(line, "dotted.key: reason")``; a transition that is neither a state's name nor a
    guard once, with what its guard lacks."""
    errors: dict[tuple[str, ...], list[str]] = {}
    for error in exc.errors(include_url=False):
        loc = tuple(str(part) for part in error["loc"])
        if loc[:1] == ("states",) and len(loc) >= 5 and loc[2] == "on":
            transition, branch = loc[:4], loc[4:]  # the union's branch: str, or Guard and a key
            if branch[:1] == ("Guard",) and len(branch) > 1:
                said = _reason(error, branch[-1])
                if error["type"] in _TYPES:
                    said = f"{'.'.join(branch[1:])} {said}"
                errors.setdefault(transition, [_TRANSITION]).append(said)
            else:
                errors.setdefault(transition, [_TRANSITION])
            continue
        errors.setdefault(loc, []).append(_reason(error, loc[-1] if loc else ""))
    found: list[tuple[int, str]] = []
    for loc, reasons in errors.items():
        state = loc[1] if loc[:1] == ("states",) and len(loc) >= 2 else None
        rest = loc[2:] if state is not None else loc[1:]
        key = ".".join(rest) or None
        where = ".".join(loc) or "the file"
        reason = f"{where}: {reasons[0]}" + "".join(f"; {more}" for more in reasons[1:])
        found.append((line_of(text, state, key), reason))
    return found


def _reason(error: ErrorDetails, name: str) -> str:
    """One pydantic error in words; ``name`` is the key it is about."""
    kind = error["type"]
    if kind in ("literal_error", "enum"):
        expected = (error.get("ctx") or {}).get("expected", "")
        return f"unknown {name} {error.get('input')!r}; known: {expected}"
    if kind == "extra_forbidden":
        return f"{name!r} is not a key a workflow file has here"
    if kind == "string_pattern_mismatch" and name == "name":
        return NAME_RULE
    if kind in _TYPES:
        return _TYPES[kind]
    return str(error["msg"]).removeprefix("Value error, ")
