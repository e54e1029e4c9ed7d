"""What an operator asks the store: is the database there, and how much is waiting.

The operations address (:mod:`bot.ops`) answers ``/readyz`` with :meth:`StoreHealth.problem`
and fills the gauges of ``/metrics`` from :meth:`StoreHealth.levels`
(docs/architecture.md, "Operating threadbot"). The levels are the whole database's,
the same in every instance that shares it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class Levels:
    """How much is in flight in the database at one moment.

    ``inbox``: deliveries recorded and not yet handled; ``outbox``: rows pending
    delivery; ``oldest_outbox``: seconds the oldest pending row has waited (0 when
    none); ``waiting``: conversations waiting for a person; ``running``: conversations
    a run holds (in any instance).
    """

    inbox: int
    outbox: int
    oldest_outbox: float
    waiting: int
    running: int


class StoreHealth(Protocol):
    """Reachability and levels of the database (for ``/readyz`` and ``/metrics``)."""

    async def problem(self) -> str | None:
        """None when the database answers and its schema is at the revision this code
        knows as newest; else what is wrong, in a few words (``cannot reach the
        database: ...``, ``the schema is at 0010, not 0011: run threadbot db upgrade``).
        Never raises for a database that is down."""
        ...

    async def levels(self, now: datetime) -> Levels:
        """The levels at ``now`` (timezone-aware UTC). Raises the database's error when
        it cannot be read."""
        ...
