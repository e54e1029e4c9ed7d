"""The ``StopRequests`` interface of the store: stops for a run another instance holds,
and :class:`StopRequest`, one of them as stored.

Taken by the stopper (:mod:`conversations.stopping`); the SQL rules are in
:mod:`conversations.store.sql.stops`. Re-exported by :mod:`conversations.store.interfaces`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol

from core.vocabulary.audit import Means
from core.vocabulary.people import Person


@dataclass(frozen=True)
class StopRequest:
    """An open stop request: its id, the conversation, the holder's lease epoch, who
    asked and how (``means``, for the audit trail), and the run it was aimed at (``run``:
    the ``seq`` of the request that began it,
    :attr:`core.vocabulary.snapshot.ConversationSnapshot.run`; None: whatever runs)."""

    id: int
    conversation_id: str
    lease_epoch: int
    by: Person
    run: int | None = None
    means: Means | None = None


class StopRequests(Protocol):
    """Stops for a run that another instance holds (:mod:`conversations.stopping`)."""

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
        """Ask ``holder``, holding the lease at ``epoch``, to stop ``run`` (the run the
        stop was aimed at; None: whatever runs), as ``by`` asked by ``means``: written only
        while that lease is live, in one step; False when it is not (the caller stops it
        itself)."""
        ...

    async def stop_requests(
        self, conversation_ids: Collection[str], *, orphans: bool = False
    ) -> list[StopRequest]:
        """Open stop requests for ``conversation_ids``, oldest first; with ``orphans``,
        also those of conversations whose lease nobody holds now (free or lapsed)."""
        ...

    async def stop_requests_handled(self, conversation_id: str) -> int:
        """Close the conversation's open stop requests; how many there were."""
        ...
