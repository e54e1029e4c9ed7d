"""Build the model's message history from the journal.

The Messages API requires that every assistant ``tool_use`` is answered by exactly
one ``tool_result`` in the very next user message, before any other block of that
message (https://docs.anthropic.com/en/docs/build-with-claude/tool-use). The
journal may hold results far from their call (a plan approved a day later) and
people's notes in between, so the builder places each result right after its
call and moves people's words behind the results. A call with no result at all
(never expected after a stop or resume, which close every call) gets an error
result so that a request is never malformed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.journal import AssistantTurn, JournalRecord, ToolResultEntry, UserText
from core.models.base import Message

_ROLE_LABEL = {
    "request": "",
    "answer": " (answer)",
    "feedback": " (plan feedback)",
    "note": " (note while you work)",
}


def user_text_block(entry: UserText) -> dict[str, Any]:
    """A person's words as a text block that names the speaker."""
    return {"type": "text", "text": f"{entry.author.name}{_ROLE_LABEL[entry.role]}: {entry.text}"}


def build_messages(journal: Sequence[JournalRecord]) -> list[Message]:
    """Messages API history for ``journal``: alternating roles, results first.

    Returns a list of ``{"role", "content"}`` dicts; the first is a user message
    whenever the journal starts with a person's words.
    """
    results: dict[str, ToolResultEntry] = {}
    for record in journal:
        if isinstance(record.entry, ToolResultEntry):
            results.setdefault(record.entry.tool_use_id, record.entry)

    messages: list[Message] = []
    pending: list[dict[str, Any]] = []

    def flush() -> None:
        if pending:
            messages.append({"role": "user", "content": list(pending)})
            pending.clear()

    for record in journal:
        entry = record.entry
        if isinstance(entry, UserText):
            pending.append(user_text_block(entry))
        elif isinstance(entry, AssistantTurn):
            flush()
            messages.append({"role": "assistant", "content": _assistant_content(entry)})
            pending.extend(
                _result_block(call.id, results.get(call.id)) for call in entry.tool_calls
            )
    flush()
    return messages


def _assistant_content(turn: AssistantTurn) -> list[dict[str, Any]]:
    if turn.content:
        return [dict(block) for block in turn.content]
    content: list[dict[str, Any]] = []
    if turn.text:
        content.append({"type": "text", "text": turn.text})
    content.extend(
        {"type": "tool_use", "id": c.id, "name": c.name, "input": c.input} for c in turn.tool_calls
    )
    return content or [{"type": "text", "text": "(no reply)"}]


def _result_block(tool_use_id: str, result: ToolResultEntry | None) -> dict[str, Any]:
    if result is None:
        return {
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            "content": "No result was recorded for this call; check before relying on it.",
            "is_error": True,
        }
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "content": result.content or "(no output)",
    }
    if result.is_error:
        block["is_error"] = True
    return block
