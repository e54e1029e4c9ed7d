"""This process's commits, told at once to whoever follows the conversation.

The engine's journal is wrapped (:meth:`Commits.journal`): after each commit it makes,
the followers of that conversation in this process are woken, so an open inspector
page shows the commit without waiting for its poll. A commit made by another process
(another instance, a run host) is not told here: the followers' polls find it
(:mod:`conversations.inspect.follow`; docs/architecture.md, "The run inspector").
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from core.vocabulary.journal import Change, Committed, Journal
from core.vocabulary.snapshot import ConversationSnapshot


class Commits:
    """Who waits, in this process, for a commit of which conversation."""

    def __init__(self) -> None:
        self._waiting: dict[str, set[asyncio.Event]] = {}

    def journal(self, inner: Journal) -> Journal:
        """``inner``, telling this object of each commit it made."""
        return _Telling(inner, self)

    def told(self, conversation_id: str) -> None:
        """A commit of ``conversation_id`` went through: wake its followers."""
        for event in self._waiting.get(conversation_id, ()):
            event.set()

    @contextmanager
    def watching(self, conversation_id: str) -> Iterator[asyncio.Event]:
        """An event set at each commit of ``conversation_id`` while the block runs (the
        follower clears it before it reads)."""
        event = asyncio.Event()
        self._waiting.setdefault(conversation_id, set()).add(event)
        try:
            yield event
        finally:
            waiting = self._waiting[conversation_id]
            waiting.discard(event)
            if not waiting:
                del self._waiting[conversation_id]

    @property
    def followed(self) -> int:
        """How many followers wait now (for tests and a shutdown's check)."""
        return sum(len(events) for events in self._waiting.values())


class _Telling:
    """A :class:`core.vocabulary.journal.Journal` that tells :class:`Commits` of its commits."""

    def __init__(self, inner: Journal, commits: Commits) -> None:
        self._inner = inner
        self._commits = commits

    async def load(self, conversation_id: str) -> ConversationSnapshot:
        """The inner journal's."""
        return await self._inner.load(conversation_id)

    async def commit(
        self, conversation_id: str, change: Change, *, after_seq: int | None = None
    ) -> Committed:
        """The inner journal's commit; once it went through, the followers are woken."""
        committed = await self._inner.commit(conversation_id, change, after_seq=after_seq)
        self._commits.told(conversation_id)
        return committed
