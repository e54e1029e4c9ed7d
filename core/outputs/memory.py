"""The in-memory cache strategy: whole outputs in this process, each for a time to live.

Nothing durable: an entry lives in a dict of this process, ``ttl_seconds`` after it
was stored by the clock it is given (the run context's, :mod:`core.context`), and a
restart loses them all (docs/architecture.md, "Tools and the sandbox"). Neither is
an error for the model: ``read_output`` answers that the output is gone and why.

How it knows an id was issued:

- expired, in this process: it keeps the ids and store times of the entries it
  dropped (a few dozen bytes each, for the process's life), so an expired id is
  :class:`~core.outputs.base.Gone` ("expired") from :meth:`InMemoryOutputs.retrieve`;
- lost to a restart: the new process knows nothing of it, but the conversation's
  journal names it (the previews journaled as tool results,
  :func:`core.outputs.base.named_in`), and :meth:`InMemoryOutputs.lost` says it
  is gone because the bot restarted.

An id neither knows is unknown: ``read_output``'s error, as for the other strategies.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from core.outputs.base import Gone, new_output_id, preview_text

Key = tuple[str, str]
"""``(conversation_id, output_id)``."""


class InMemoryOutputs:
    """Whole outputs in this process's memory, each ``ttl_seconds`` after it was stored.

    ``clock``: the current time (timezone-aware UTC; the run context's clock, a
    :class:`core.context.ManualClock` in tests). An entry is expired once
    ``clock() - stored_at >= ttl_seconds``; its content is dropped when it is next
    read or at the next :meth:`store`. Raises ``ValueError`` for a ``ttl_seconds`` not
    above 0.
    """

    def __init__(self, ttl_seconds: float, clock: Callable[[], datetime]) -> None:
        if not ttl_seconds > 0:
            raise ValueError("an in-memory output cache needs a time to live above 0 seconds")
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._entries: dict[Key, tuple[str, datetime]] = {}
        self._expired: dict[Key, datetime] = {}

    @property
    def entries(self) -> dict[Key, str]:
        """The contents kept now, by ``(conversation_id, output_id)`` (expired ones too
        until they are dropped)."""
        return {key: content for key, (content, _) in self._entries.items()}

    async def store(self, conversation_id: str, content: str) -> str:
        """Keep ``content`` from now; its new id. Drops the expired entries first."""
        self._drop_expired()
        output_id = new_output_id()
        self._entries[(conversation_id, output_id)] = (content, self._clock())
        return output_id

    async def retrieve(self, conversation_id: str, output_id: str) -> str | Gone | None:
        """The content of ``output_id``; :class:`Gone` once it expired; None when this
        process never kept it (never issued, another conversation's, or lost to a
        restart: :meth:`lost` answers that)."""
        key = (conversation_id, output_id)
        found = self._entries.get(key)
        if found is not None and not self._is_expired(found[1]):
            return found[0]
        if found is not None:
            del self._entries[key]
            self._expired[key] = found[1]
        if key in self._expired:
            return Gone(f"it was kept in memory for {self.ttl_seconds:g} s and has expired")
        return None

    async def preview(self, conversation_id: str, content: str, limit: int) -> tuple[str, str]:
        """Store ``content`` and give its preview and id."""
        output_id = await self.store(conversation_id, content)
        return preview_text(content, output_id, limit), output_id

    def lost(self, conversation_id: str, output_id: str) -> Gone:
        """Gone: an id the journal names that this process never kept was kept by an
        earlier process (memory does not outlive a restart)."""
        return Gone("it was kept in memory only, and the bot has restarted since")

    def _is_expired(self, stored_at: datetime) -> bool:
        return (self._clock() - stored_at).total_seconds() >= self.ttl_seconds

    def _drop_expired(self) -> None:
        for key, (_, stored_at) in list(self._entries.items()):
            if self._is_expired(stored_at):
                del self._entries[key]
                self._expired[key] = stored_at
