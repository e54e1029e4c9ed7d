"""What the adapters do with text past a platform's limits, the same way on every platform.

- An edit cannot be split into several messages, so text past the limit is cut at a
  boundary and ends with :data:`TRUNCATED` (:func:`cut_to_fit`).
- A button label past its limit is cut and ends with ``…`` (:func:`cut_label`).
- A long answer that asks for nothing (no buttons, no seeded reactions) goes up as
  a file named after its outbox key (:func:`answer_file_name`), under a message
  holding its first line (:func:`file_summary`): a reader gets one attachment,
  not a wall of messages, and a retry can find the file by its name.

The limits themselves are the platforms' and live in their ``outbound`` modules.
Pure functions; :func:`cut_to_fit` raises ``ValueError`` for a limit below 20 (see
:func:`conversations.textsplit.split_text`).
"""

from __future__ import annotations

from conversations.textsplit import split_text

TRUNCATED = "\n…"
"""Appended to an edit whose text had to be cut."""

ELLIPSIS = "…"

_SUMMARY_LINE = 200
"""Characters of an answer's first line kept in the message that carries its file."""


def cut_to_fit(text: str, limit: int) -> str:
    """``text`` when it fits in one message of ``limit`` characters, else cut to fit.

    "Fits" is :func:`~conversations.textsplit.split_text`'s answer (one chunk); a
    cut text is the first chunk of a split ``len(TRUNCATED)`` shorter, then
    :data:`TRUNCATED`, so it fits too.
    """
    if len(split_text(text, limit)) > 1:
        return split_text(text, limit - len(TRUNCATED))[0] + TRUNCATED
    return text


def cut_label(label: str, limit: int) -> str:
    """``label`` cut to at most ``limit`` characters, the last of them ``…`` when it was cut."""
    return label if len(label) <= limit else label[: limit - 1] + ELLIPSIS


def answer_file_name(key: str) -> str:
    """The name of the file a long answer goes up as: unique per outbox row ``key``."""
    return f"threadbot-answer-{key}.md"


def file_summary(text: str) -> str:
    """The message that carries a long answer's file: its first line (200 characters) and a note."""
    first_line = text.strip().splitlines()[0][:_SUMMARY_LINE] if text.strip() else ""
    return f"{first_line}\n(the whole answer is in the attached file)"
