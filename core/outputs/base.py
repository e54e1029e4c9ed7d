"""The cache protocol for large tool outputs, its "gone" answer, and the preview text.

A tool output longer than the run's ``output_limit`` is stored whole by the
conversation's cache strategy (:class:`OutputCache`, an id back) and the model
reads :func:`preview_text`: its head and its tail with a line between that names
the id (docs/architecture.md, "Tools and the sandbox"). The preview is what is
journaled, so the journal names every id a conversation was given (:func:`named_in`):
that is how a strategy that may lose an output (an in-memory one, after a
restart) tells "gone" from "never issued" without keeping anything durable.

Lengths are in characters (Python ``str`` length).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from core.context import random_id
from core.vocabulary.entries import JournalRecord, ToolResultEntry

OUTPUT_ID_PREFIX = "out_"
"""Ids of stored outputs start with it (``out_3f9a1c2b7d4e``)."""


def new_output_id() -> str:
    """A new output id: :data:`OUTPUT_ID_PREFIX` and 12 random hex digits."""
    return OUTPUT_ID_PREFIX + random_id(12)


@dataclass(frozen=True)
class Gone:
    """An output this conversation was given an id for that is no longer kept.

    ``reason`` says why, as a clause the model reads after "gone: " (``it was kept
    in memory for 3600 s and has expired``). Not an error: the model may run the
    call that made it again.
    """

    reason: str


class OutputStore(Protocol):
    """Where :class:`core.outputs.PersistentOutputs` keeps whole outputs (the store
    implements it)."""

    async def put_output(self, conversation_id: str, output_id: str, content: str) -> None:
        """Keep ``content`` under ``output_id`` for ``conversation_id`` (ids are new)."""
        ...

    async def get_output(self, conversation_id: str, output_id: str) -> str | None:
        """The content kept under ``output_id`` for that conversation, or None."""
        ...


class OutputCache(Protocol):
    """A cache strategy for large tool outputs: store, retrieve, preview.

    The strategies (:mod:`core.outputs`): persistent (the store), in memory (with a
    time to live), and none (no object: ``None`` where a cache is expected, the
    tool cutting its output to head and tail with no id).
    """

    async def store(self, conversation_id: str, content: str) -> str:
        """Keep ``content`` whole; its new id."""
        ...

    async def retrieve(self, conversation_id: str, output_id: str) -> str | Gone | None:
        """The whole content of ``output_id`` in that conversation; :class:`Gone` when
        this strategy knows it kept it once and no longer does; None when it does not
        know the id (another conversation's, never issued, or lost with no trace)."""
        ...

    async def preview(self, conversation_id: str, content: str, limit: int) -> tuple[str, str]:
        """``(summary, id)``: ``content`` stored, and its preview of at most about
        ``limit`` characters (:func:`preview_text`)."""
        ...

    def lost(self, conversation_id: str, output_id: str) -> Gone | None:
        """What to tell of an id the conversation's journal names (:func:`named_in`)
        that :meth:`retrieve` did not know: :class:`Gone` with why, or None to answer
        as for an unknown id."""
        ...


async def look_up(
    cache: OutputCache,
    conversation_id: str,
    output_id: str,
    journal: Callable[[], Awaitable[Sequence[JournalRecord]]],
) -> str | Gone | None:
    """``output_id``'s content, :class:`Gone`, or None (unknown): :meth:`OutputCache.retrieve`,
    and for an id it does not know that the conversation's journal names (read with
    ``journal()``, only then), :meth:`OutputCache.lost`."""
    found = await cache.retrieve(conversation_id, output_id)
    if found is None and named_in(await journal(), output_id):
        return cache.lost(conversation_id, output_id)
    return found


def named_in(journal: Sequence[JournalRecord], output_id: str) -> bool:
    """``output_id`` was given to this conversation: a tool result of ``journal`` holds
    the preview line that names it (``The whole output is out_... (``)."""
    line = f"The whole output is {output_id} ("
    return any(
        isinstance(record.entry, ToolResultEntry) and line in record.entry.content
        for record in reversed(journal)
    )


NOTE_ROOM = 300
"""Characters kept for the line between head and tail."""


def preview_text(content: str, output_id: str, limit: int) -> str:
    """The head and the tail of ``content`` (``limit`` characters with the line between,
    give or take the line's length), the line naming ``output_id``, the total length
    and the offset to read on from::

        <head>
        [... 41,300 characters cut. The whole output is out_3f9a1c2b7d4e (50,000
        characters): read_output(id="out_3f9a1c2b7d4e", offset=4350) reads on here.]
        <tail>
    """
    keep = max(limit - NOTE_ROOM, 2)
    head, tail = content[: keep // 2], content[len(content) - keep // 2 :]
    cut = len(content) - len(head) - len(tail)
    note = (
        f"[... {cut:,} characters cut. The whole output is {output_id} ({len(content):,} "
        f'characters): read_output(id="{output_id}", offset={len(head)}) reads on here.]'
    )
    return f"{head}\n{note}\n{tail}"
