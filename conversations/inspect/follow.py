"""A conversation's timeline followed as it grows: what a reader has not seen yet, in order.

A :class:`Follow` reads the store, never the run: so it follows a run held by this
process and one held by another instance alike. It reads the timeline again when a
commit of this process is told (:class:`conversations.inspect.commits.Commits`) and,
every ``poll`` seconds, when the conversation's ``changed_at`` moved (one small read:
every commit moves it, whichever process made it), and at least every ``refresh``
seconds anyway. Each read yields the items the reader has not seen (those after
``after``, the newest ``seq`` it has) and those that changed since it saw them (an item
not :attr:`~conversations.inspect.items.Item.settled`: a call now done), oldest first,
and the header when it changed (docs/architecture.md, "The run inspector").

The reader stops it with :meth:`Follow.stop` (a server shutting down) or by leaving the
iteration; nothing runs after either.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from datetime import datetime

from conversations.inspect import timeline
from conversations.inspect.commits import Commits
from conversations.inspect.items import Header, Item
from conversations.store.interfaces import Store


@dataclass(frozen=True)
class Seen:
    """What one read found new: ``items`` to show (new ones, and changed ones to show again
    in their place), oldest first, and the ``header`` when it changed (else None).
    ``ended``: the conversation is no longer in the store."""

    items: tuple[Item, ...] = ()
    header: Header | None = None
    ended: bool = False

    def __bool__(self) -> bool:
        return bool(self.items) or self.header is not None or self.ended


class Follow:
    """Follows ``conversation_id``'s timeline in ``store`` for a reader that has every item
    up to ``after`` (0: none), as they stood when it read them, and no header.

    ``commits``: this process's commits (None: the polls alone). ``poll``: seconds between
    looks at ``changed_at``; ``refresh``: seconds after which the timeline is read again
    though nothing seemed to move; ``redact``: see :func:`conversations.inspect.timeline.build`.
    """

    def __init__(
        self,
        store: Store,
        conversation_id: str,
        *,
        after: int = 0,
        commits: Commits | None = None,
        poll: float = 1.0,
        refresh: float = 30.0,
        redact: Callable[[str], str] = str,
    ) -> None:
        self._store = store
        self._id = conversation_id
        self._after = after
        self._commits = commits or Commits()
        self._poll = poll
        self._refresh = refresh
        self._redact = redact
        self._shown: dict[int, Item] = {}
        self._header: Header | None = None
        self._stamp: tuple[str, datetime | None] | None = None
        self._stopped = False
        self._told: asyncio.Event | None = None

    @property
    def last_seq(self) -> int:
        """The newest ``seq`` the reader has."""
        return self._after

    def stop(self) -> None:
        """End :meth:`updates` at its next wait (at once if it waits now)."""
        self._stopped = True
        if self._told is not None:
            self._told.set()

    async def updates(self) -> AsyncGenerator[Seen, None]:
        """What is new, read after read (the first read at once): an empty :class:`Seen`
        after a wait that found nothing, so the reader may check its connection. Ends
        when stopped, or after a :class:`Seen` with ``ended``."""
        with self._commits.watching(self._id) as told:
            self._told = told
            last_read = time.monotonic()
            first = True
            while not self._stopped:
                if first or told.is_set() or await self._moved(last_read):
                    told.clear()
                    last_read = time.monotonic()
                    seen = await self.read(first=first)
                    first = False
                    yield seen
                    if seen.ended:
                        return
                else:
                    yield Seen()
                await self._wait(told)

    async def read(self, *, first: bool = False) -> Seen:
        """Read the timeline now and take what is new (see :class:`Seen`). ``first``: the
        reader's items up to ``after`` that were not settled are shown again too."""
        found = await timeline.read(self._store, self._id, self._redact)
        if found is None:
            return Seen(ended=True)
        self._stamp = found.stamp
        new: list[Item] = []
        for item in found.items:
            before = self._shown.get(item.seq)
            if item.seq > self._after or (before is not None and before != item):
                new.append(item)
            elif first and item.seq <= self._after and not item.settled:
                new.append(item)
            self._shown[item.seq] = item
        self._after = max(self._after, found.header.last_seq)
        header = found.header if found.header != self._header else None
        self._header = found.header
        return Seen(items=tuple(new), header=header)

    async def _moved(self, last_read: float) -> bool:
        """Whether the conversation's stamp (status, ``changed_at``) moved since the last
        look, or ``refresh`` seconds passed since the last read."""
        info = await self._store.threads.find(self._id)
        stamp = timeline.stamp_of(info)
        return stamp != self._stamp or time.monotonic() - last_read >= self._refresh

    async def _wait(self, told: asyncio.Event) -> None:
        """Until a commit is told, the reader stops it, or ``poll`` seconds pass."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._poll):
                await told.wait()
