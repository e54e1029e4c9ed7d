"""Slots in the store: how many runs, model calls and commands go at once, and who is next.

A run asks for a slot of category ``run`` before its work starts, and a model call or
a command of a run for one of ``model`` or ``command`` (docs/architecture.md, "Limits
and priorities"). Each ask is a row (``slots`` in SQL): the conversation, the category,
the keys its limits count by (the process that holds it, the workspace or guild as
``platform:workspace``, the person as ``platform:user id``), the limits themselves
(:class:`Limits`, as the asker's settings had them), its priority, when it was
enqueued and its rank in the queue (:func:`rank_of`), its state (``waiting`` or
``held``), its holder (the instance name, as leases have it:
:mod:`conversations.store.owners`) and an expiry renewed like a lease's. A row whose
holder stopped renewing it (the process died), or whose holder is a gone process of
this host, is dropped, so a dead process's slots free up.

Who is granted is decided in the store, by one pass over the category's rows made
inside the write that changed them (an ask, a release, a look after an expiry), so it
holds across processes: on PostgreSQL the pass takes a transaction-level advisory
lock (:data:`SLOTS_LOCK`), on SQLite the write lock serialises. The rule, the same
for every backend (:func:`conversations.store.slot_pass.decide`): the waiting rows
are taken in queue order, effective priority first (its priority plus ``waited /
aging``: it rises with the wait, so nothing starves), then the oldest; each is granted
when every limit it counts under has room (counting the rows held, and those granted
before it in the pass) and no row before it was held back under that limit. A row
held back under a limit that is full for it holds back every row behind it that
counts under the same key (so a looser limit of the same key does not pass it); under
a limit where it has room it holds back nobody, so a run waiting for its person's
limit never holds up the others of its workspace.

The queue order is fixed when a row is asked: ordering by ``priority + waited /
aging`` (descending, at any one time) is ordering by ``enqueued - priority * aging``
(ascending), so each row keeps that rank in an indexed column and a pass reads the
waiting rows in rank order only as far as a grant is still possible
(:class:`conversations.store.slot_pass.Granting`). How many runs are ahead of a
waiting row is counted only when its holder looks (:meth:`SlotStore.slot_standings`),
never in a pass.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

__all__ = [
    "CLUSTER",
    "NO_AGING_WEIGHT",
    "SLOTS_LOCK",
    "Category",
    "Granted",
    "Key",
    "Limits",
    "Passed",
    "Slot",
    "SlotAsk",
    "SlotState",
    "SlotStore",
    "Standing",
    "Standings",
    "rank_of",
]

SLOTS_LOCK = 0x7468726561647332
"""The PostgreSQL advisory lock key a pass holds for its transaction (a bigint: the
bytes of ``threads2``), so two processes never decide at once."""

NO_AGING_WEIGHT = 1e12
"""Seconds one step of priority weighs in a rank without aging: more than any wait
(about 31,700 years), so the priority decides and the wait only orders within one."""


class Category(StrEnum):
    """What a slot is for: a whole run, or one step of a run."""

    RUN = "run"
    MODEL = "model"
    COMMAND = "command"


class SlotState(StrEnum):
    """A row's state: waiting for its slot, or holding it."""

    WAITING = "waiting"
    HELD = "held"


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Slots of one category held at once, counted by each key (None: no limit there):
    in every process sharing the database (``cluster``), in the holder's process
    (``process``), in the workspace or guild (``workspace``), by the person (``user``)."""

    cluster: int | None = None
    process: int | None = None
    workspace: int | None = None
    user: int | None = None

    @property
    def any(self) -> bool:
        """Whether any limit is set."""
        return any(v is not None for v in (self.cluster, self.process, self.workspace, self.user))


@dataclass(frozen=True, kw_only=True)
class SlotAsk:
    """What a run or a step asks for: a slot of ``category`` for ``conversation_id``,
    under ``limits``, counted by ``workspace`` (``platform:workspace``) and ``user``
    (``platform:user id``), at ``priority`` (higher goes first)."""

    conversation_id: str
    category: Category = Category.RUN
    limits: Limits
    workspace: str = ""
    user: str = ""
    priority: int = 0


Key = tuple[str, str]
"""What a limit counts by: ``("cluster", "")``, ``("process", holder)``,
``("workspace", "slack:T1")`` or ``("user", "slack:U1")``."""

CLUSTER: Key = ("cluster", "")
"""The key every row counts under."""


def rank_of(priority: int, enqueued_at: datetime, aging: float | None) -> float:
    """A waiting row's place in the queue: smaller goes first (equal ranks: the lower id).

    With ``aging`` (seconds of waiting worth one step of priority), a row's effective
    priority at time ``t`` is ``priority + (t - enqueued) / aging``; ordering by it
    (descending) is, at every ``t``, ordering by ``enqueued - priority * aging``
    (ascending: multiply by ``aging`` and subtract ``t``), so the rank is fixed when the
    row is asked. Without aging (None or 0) the priority decides:
    ``enqueued - priority * NO_AGING_WEIGHT``. ``enqueued`` in seconds since the epoch.
    """
    seconds = enqueued_at.timestamp()
    return seconds - priority * (aging or NO_AGING_WEIGHT)


@dataclass(frozen=True, kw_only=True)
class Slot:
    """One row: an ask, its state, its holder, its rank (:func:`rank_of`) and until when
    it holds (UTC)."""

    id: int
    conversation_id: str
    category: Category
    state: SlotState
    holder: str
    workspace: str
    user: str
    priority: int
    limits: Limits
    enqueued_at: datetime
    until: datetime
    rank: float
    granted_at: datetime | None = None

    def keys(self) -> tuple[Key, ...]:
        """The keys this row counts under, whatever its own limits."""
        return (
            CLUSTER,
            ("process", self.holder),
            ("workspace", self.workspace),
            ("user", self.user),
        )

    def limited(self) -> list[tuple[Key, int]]:
        """The keys this row's own limits count by, with each limit."""
        limits = (self.limits.cluster, self.limits.process, self.limits.workspace, self.limits.user)
        return [
            (key, most) for key, most in zip(self.keys(), limits, strict=True) if most is not None
        ]


@dataclass(frozen=True)
class Standing:
    """Where a row stands: held, or waiting with ``ahead`` runs to end first (None: not
    counted, as in the answer to an ask; the holder's looks count)."""

    slot_id: int
    held: bool
    ahead: int | None
    enqueued_at: datetime


@dataclass(frozen=True)
class Granted:
    """A row a pass granted: its holder is told (a wake-up)."""

    slot_id: int
    conversation_id: str
    holder: str


@dataclass(frozen=True)
class Passed:
    """What a write that ran a pass did: the rows it granted, and (for an ask) where the
    new row stands (None: dropped at once, its holder taken for gone)."""

    granted: tuple[Granted, ...] = ()
    standing: Standing | None = None


@dataclass(frozen=True)
class Standings:
    """Where each row asked about stands (rows no longer there are left out), and the
    categories where a pass would change something now (a row past its expiry or of a
    gone holder, or a waiting row that would be granted): the reader asks for one."""

    of: Mapping[int, Standing]
    stale: frozenset[Category] = frozenset()


class SlotStore(Protocol):
    """The slot rows (see the module docstring); ``now`` defaults to the current time."""

    async def ask_slot(
        self,
        ask: SlotAsk,
        *,
        holder: str,
        ttl: float,
        aging: float | None,
        now: datetime | None = None,
    ) -> Passed:
        """Add a waiting row for ``ask``, held by ``holder`` for ``ttl`` seconds unless
        renewed, ranked with ``aging`` (seconds of waiting worth one step of priority;
        None: none; :func:`rank_of`), and run the pass of its category, in one write;
        where it stands (granted at once, or waiting: not counted) and every row the pass
        granted. Raises ``ValueError`` for an ask with no limit."""
        ...

    async def release_slot(self, slot_id: int, *, now: datetime | None = None) -> Passed:
        """Drop the row (held or waiting; nothing when it is gone) and run the pass of its
        category, in one write; the rows the pass granted."""
        ...

    async def grant_slots(self, category: Category, *, now: datetime | None = None) -> Passed:
        """Run the pass of ``category`` alone, every row past its expiry or of a gone
        holder dropped first; the rows it granted."""
        ...

    async def renew_slots(
        self, holder: str, ids: Collection[int], *, ttl: float, now: datetime | None = None
    ) -> set[int]:
        """Extend ``holder``'s rows ``ids`` to ``ttl`` seconds from ``now``; the ids still
        there (the others were dropped: their holder was taken for gone)."""
        ...

    async def slot_standings(
        self, ids: Collection[int], *, counted: Collection[int] = (), now: datetime | None = None
    ) -> Standings:
        """Where the rows ``ids`` stand, read without writing (see :class:`Standings`); the
        runs ahead are counted for the waiting rows among ``counted`` (in one read: the
        others' ``ahead`` is None)."""
        ...

    async def slots(self, category: Category | None = None) -> list[Slot]:
        """Every row (of ``category``), oldest first: for operators and tests."""
        ...
