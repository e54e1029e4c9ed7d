"""A tool call's output, paged: the whole of a large output from the output store, as the
agent's ``read_output`` pages it (:mod:`core.tools.outputs`), else the result as journaled.

A result longer than the run's output limit holds only the output's head and tail and
the id the whole is kept under (:mod:`core.outputs`); :func:`output_page` reads that id
from the result and the whole from the store (docs/architecture.md, "The run
inspector"). Lengths and offsets are in characters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from conversations.inspect.results import output_named
from conversations.store.interfaces import Store
from core.vocabulary.entries import AssistantTurn, ToolResultEntry
from core.vocabulary.errors import ConversationNotFound

PAGE = 20_000
"""Characters of one page."""


@dataclass(frozen=True)
class OutputPage:
    """Characters ``offset`` to ``end`` of ``total`` of call ``call_id``'s output (tool
    ``name``): of the whole output kept as ``output_id`` (``whole`` True), or of the result
    as journaled (``whole`` False: the result names no kept output, or the store no longer
    has it). ``next_offset`` / ``previous_offset``: the pages around (None: none)."""

    conversation_id: str
    call_id: str
    name: str
    output_id: str | None
    whole: bool
    text: str
    offset: int
    end: int
    total: int

    @property
    def next_offset(self) -> int | None:
        """Where the next page starts; None at the end."""
        return self.end if self.end < self.total else None

    @property
    def previous_offset(self) -> int | None:
        """Where the page before starts; None on the first."""
        return max(self.offset - PAGE, 0) if self.offset > 0 else None


async def output_page(
    store: Store,
    conversation_id: str,
    call_id: str,
    offset: int = 0,
    redact: Callable[[str], str] = str,
) -> OutputPage | None:
    """The page of call ``call_id``'s output that starts at ``offset`` (held within the
    output: below 0 is 0, past the end is the end); None when the conversation or its
    call's result is not in the store. The output is paged after ``redact`` (a secret is
    never cut in two by a page's end), so offsets count its redacted characters."""
    try:
        snap = await store.journal.load(conversation_id)
    except ConversationNotFound:
        return None
    result = next(
        (
            r.entry
            for r in snap.journal
            if isinstance(r.entry, ToolResultEntry) and r.entry.tool_use_id == call_id
        ),
        None,
    )
    if result is None:
        return None
    name = next(
        (
            call.name
            for r in snap.journal
            if isinstance(r.entry, AssistantTurn)
            for call in r.entry.tool_calls
            if call.id == call_id
        ),
        "?",
    )
    output_id = output_named(result.content)
    kept = (
        await store.outputs.get_output(conversation_id, output_id)
        if output_id is not None
        else None
    )
    content = redact(kept if kept is not None else result.content)
    start = min(max(offset, 0), len(content))
    end = min(start + PAGE, len(content))
    return OutputPage(
        conversation_id=conversation_id,
        call_id=call_id,
        name=name,
        output_id=output_id,
        whole=kept is not None,
        text=content[start:end],
        offset=start,
        end=end,
        total=len(content),
    )
