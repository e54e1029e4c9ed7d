"""One-line summaries of tool calls for people (approval messages, progress notes).

Pure text: :func:`summarize_call` shows what a call does in at most a given number
of characters; :func:`shorten` cuts text with ``…``; :func:`last_lines` keeps the end
of an output.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from core.policy.chains import squash
from core.tools.command import RunCommand

_RUN_COMMAND = RunCommand.spec.name


def summarize_call(tool_name: str, arguments: Mapping[str, Any], limit: int = 80) -> str:
    """A one-line summary of a call for approval messages, at most ``limit`` characters.

    ``run_command`` -> the command in backticks; a tool with a ``path`` ->
    ``write_file notes/a.md``; others -> ``name(key=value, ...)``. Long text is
    shortened with ``…``, line breaks show as ``⏎``. Raises :class:`ValueError` when
    ``limit`` is below 10.
    """
    if limit < 10:
        raise ValueError("limit must be at least 10 characters")
    command = arguments.get("command")
    if tool_name == _RUN_COMMAND and isinstance(command, str):
        # A backtick inside would end the code span: show a look-alike instead.
        return f"`{shorten(_one_line(command).replace('`', 'ˋ'), limit - 2)}`"
    path = arguments.get("path")
    if isinstance(path, str):
        room = max(limit - len(tool_name) - 1, 1)
        return shorten(f"{tool_name} {_shorten_left(_one_line(path), room)}", limit)
    shown = ", ".join(f"{key}={shorten(_one_line(_show(v)), 30)}" for key, v in arguments.items())
    return shorten(f"{tool_name}({shown})", limit)


def _one_line(text: str) -> str:
    return " ⏎ ".join(squash(line) for line in text.strip().splitlines())


def _show(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ending in ``…`` when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def last_lines(text: str, count: int, width: int) -> str:
    """The last ``count`` lines of ``text`` that are not blank, each cut to ``width``
    characters (:func:`shorten`), joined by line breaks."""
    lines = [line.rstrip() for line in text.strip().splitlines() if line.strip()]
    return "\n".join(shorten(line, width) for line in lines[-count:])


def _shorten_left(text: str, limit: int) -> str:
    return text if len(text) <= limit else "…" + text[len(text) - limit + 1 :]
