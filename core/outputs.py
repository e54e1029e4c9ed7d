"""Large tool outputs: the model reads a head-and-tail preview and an id, and pages on.

The store / retrieve / preview strategy for large tool outputs (docs/architecture.md,
"Tools and the sandbox"). A tool output longer than the run's ``output_limit`` is
stored whole (:meth:`OutputCache.store`, an id back); the tool result the model
reads is :func:`preview_text`: its head and its tail with a line between that
names the id, the length and how to read on; the ``read_output`` tool
(:mod:`core.tools.outputs`) returns any page of it by offset. The preview is what
is journaled, so a resume sends the same context; the whole output stays where
the strategy keeps it:

- :class:`PersistentOutputs`: in the store, through :class:`OutputStore` (kept as
  long as the journal; a restart reads it back). The in-memory and no-cache
  strategies come later, beside it.

Lengths are in characters (Python ``str`` length).
"""

from __future__ import annotations

from typing import Protocol

from core.context import random_id

OUTPUT_ID_PREFIX = "out_"
"""Ids of stored outputs start with it (``out_3f9a1c2b7d4e``)."""


class OutputStore(Protocol):
    """Where :class:`PersistentOutputs` keeps whole outputs (the store implements it)."""

    async def put_output(self, conversation_id: str, output_id: str, content: str) -> None:
        """Keep ``content`` under ``output_id`` for ``conversation_id`` (ids are new)."""
        ...

    async def get_output(self, conversation_id: str, output_id: str) -> str | None:
        """The content kept under ``output_id`` for that conversation, or None."""
        ...


class OutputCache(Protocol):
    """A cache strategy for large tool outputs: store, retrieve, preview."""

    async def store(self, conversation_id: str, content: str) -> str:
        """Keep ``content`` whole; its new id."""
        ...

    async def retrieve(self, conversation_id: str, output_id: str) -> str | None:
        """The whole content of ``output_id`` in that conversation, or None (unknown id,
        another conversation's, or gone)."""
        ...

    async def preview(self, conversation_id: str, content: str, limit: int) -> tuple[str, str]:
        """``(summary, id)``: ``content`` stored, and its preview of at most about
        ``limit`` characters (:func:`preview_text`)."""
        ...


class PersistentOutputs:
    """The persistent strategy: whole outputs in the store, ids ``out_`` + 12 hex digits."""

    def __init__(self, store: OutputStore) -> None:
        self._store = store

    async def store(self, conversation_id: str, content: str) -> str:
        """Keep ``content``; its new id."""
        output_id = OUTPUT_ID_PREFIX + random_id(12)
        await self._store.put_output(conversation_id, output_id, content)
        return output_id

    async def retrieve(self, conversation_id: str, output_id: str) -> str | None:
        """The content of ``output_id``, or None."""
        return await self._store.get_output(conversation_id, output_id)

    async def preview(self, conversation_id: str, content: str, limit: int) -> tuple[str, str]:
        """Store ``content`` and give its preview and id."""
        output_id = await self.store(conversation_id, content)
        return preview_text(content, output_id, limit), output_id


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
