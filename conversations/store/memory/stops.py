"""Stop requests in memory (see :mod:`conversations.store.sql.stops` for the rules)."""

from __future__ import annotations

from collections.abc import Collection

from conversations.store.memory._tables import StopEntry, Tables, checkpoint
from conversations.store.stops import StopRequest
from core.vocabulary.audit import Means
from core.vocabulary.people import Person


class MemoryStopRequests:
    """:class:`conversations.store.interfaces.StopRequests` in memory."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    async def request_stop(
        self,
        conversation_id: str,
        *,
        holder: str,
        epoch: int,
        by: Person,
        run: int | None = None,
        means: Means | None = None,
    ) -> bool:
        """Ask ``holder`` to stop ``run`` (as ``by`` asked, by ``means``), if it still holds
        the lease at ``epoch`` unexpired; False otherwise."""
        await checkpoint()
        now = self._t.clock()
        found = self._t.conversations.get(conversation_id)
        if (
            found is None
            or (found.lease_owner, found.lease_epoch) != (holder, epoch)
            or found.lease_until is None
            or found.lease_until <= now
        ):
            return False
        self._t.last_stop_id += 1
        self._t.stops.append(
            StopEntry(self._t.last_stop_id, conversation_id, epoch, by, now, run=run, means=means)
        )
        return True

    async def stop_requests(
        self, conversation_ids: Collection[str], *, orphans: bool = False
    ) -> list[StopRequest]:
        """Open stop requests for ``conversation_ids``; with ``orphans``, also those of
        conversations whose lease nobody holds now."""
        await checkpoint()
        now = self._t.clock()
        wanted = set(conversation_ids)
        found = [s for s in self._t.stops if s.handled_at is None and s.conversation_id in wanted]
        if orphans:
            for stop in self._t.stops:
                held = self._t.conversations.get(stop.conversation_id)
                unheld = held is not None and (
                    held.lease_owner is None
                    or (held.lease_until is not None and held.lease_until <= now)
                )
                if stop.handled_at is None and unheld and stop not in found:
                    found.append(stop)
        return [
            StopRequest(s.id, s.conversation_id, s.lease_epoch, s.by, s.run, s.means) for s in found
        ]

    async def stop_requests_handled(self, conversation_id: str) -> int:
        """Close the conversation's open stop requests; how many there were."""
        await checkpoint()
        now, count = self._t.clock(), 0
        for stop in self._t.stops:
            if stop.conversation_id == conversation_id and stop.handled_at is None:
                stop.handled_at, count = now, count + 1
        return count
