"""Where the bot's words go: log records on stderr, status lines on stdout, as text or JSON.

:func:`configure` installs one handler on the root logger, writing to stderr. With
``log_format = "text"`` each record is one line for a person
(``2026-12-04 10:00:00,123 WARNING conversations.outbox [c-1a2b]: ...``); with
``"json"`` each record is one JSON object on one line, for a log pipeline::

    {"time": "2026-12-04T10:00:00.123000+00:00", "level": "WARNING",
     "logger": "conversations.outbox", "message": "...", "conversation": "c-1a2b"}

``conversation`` is there when the record was written for a conversation
(:mod:`conversations.logcontext`), ``exc_info`` when it carries a traceback. Only these
keys are written: a library's ``extra`` fields, which the redactor does not read, never
reach the line. Every record passes :class:`core.secrets.RedactingFilter` first, so no
token reaches a line in either format.

:func:`announce` writes a status line (``connected to slack``, the addresses the bot
listens on) on stdout: ``threadbot: <what>`` as text, or a JSON object like a record's
(logger ``threadbot``, level ``INFO``) when the logs are JSON, so that a container's
output holds JSON lines only once the settings are read.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, Literal, TextIO

from pythonjsonlogger.json import JsonFormatter

from conversations.logcontext import ConversationFilter
from core.context import now
from core.secrets import RedactingFilter, Redactor

LogFormat = Literal["text", "json"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(conversation)s]: %(message)s"
"""One record as a line of text (``[-]`` outside any conversation)."""

KEYS = ("time", "level", "logger", "message", "conversation", "exc_info", "stack_info")
"""The keys of a JSON line, in order; nothing else is written."""

_format: LogFormat = "text"


class JsonLines(JsonFormatter):
    """A record as one JSON object with :data:`KEYS` (python-json-logger does the encoding:
    https://nhairs.github.io/python-json-logger/latest/quickstart/)."""

    def __init__(self) -> None:
        super().__init__(
            "{levelname}{name}{message}",
            style="{",
            rename_fields={"levelname": "level", "name": "logger"},
            timestamp="time",
            json_ensure_ascii=False,
        )

    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        """Keep :data:`KEYS` only, ``time`` first; no ``conversation`` outside one."""
        if log_data.get("conversation") == "-":
            del log_data["conversation"]
        return {key: log_data[key] for key in KEYS if log_data.get(key) is not None}


def configure(level: str, log_format: LogFormat, redactor: Redactor) -> None:
    """Send every record at ``level`` or above to stderr in ``log_format``, redacted.

    Like :func:`logging.basicConfig`, it does nothing to a root logger that has a handler
    already (a test's capture)."""
    global _format
    _format = log_format
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RedactingFilter(redactor))  # no token in a log line
    handler.addFilter(ConversationFilter())
    handler.setFormatter(JsonLines() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler])


def announce(what: str, *, level: str = "INFO", stream: TextIO | None = None) -> None:
    """Say ``what`` (a status line: a connection made, an address listened on) on stdout,
    or on ``stream`` (stderr for what the process says of its own end)."""
    out = stream or sys.stdout
    if _format == "json":
        line = {"time": now().isoformat(), "level": level, "logger": "threadbot", "message": what}
        print(json.dumps(line, ensure_ascii=False), file=out, flush=True)
    else:
        print(f"threadbot: {what}", file=out, flush=True)
