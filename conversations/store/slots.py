"""Slots in the store: how many runs, model calls and commands go at once, and who is next.

A run asks for a slot of category ``run`` before its work starts, and a model call or
a command of a run for one of ``model`` or ``command`` (docs/architecture.md, "Limits
and priorities"). Each ask is a row (``slots`` in SQL): the conversation, the category,
the keys its limits count by (the process that holds it, the workspace or guild as
``platform:workspace``, the person as ``platform:user id``), the limits themselves
(:class:`Limits`, as the asker's settings had them), its priority, when it was
enqueued, its state (``waiting`` or ``held``), its holder (the instance name, as leases
have it: :mod:`conversations.store.owners`) and an expiry renewed like a lease's. A
row whose holder stopped renewing it (the process died), or whose holder is a gone
process of this host, is dropped, so a dead process's slots free up.

Who is granted is decided in the store, by one pass over the category's rows made
inside the write that changed them (an ask, a release, a look after an expiry), so it
holds across processes: on PostgreSQL the pass takes a transaction-level advisory
lock (:data:`SLOTS_LOCK`), on SQLite the write lock serialises. The rule, the same
for every backend (:func:`decide`): the waiting rows are taken in order, effective
priority first (its priority plus one for each ``aging`` seconds it has waited, so
nothing starves), then the oldest; each is granted when every limit it counts under
has room (counting the rows held, and those granted before it in the pass) and no
row before it was held back under that limit. A row held back under a limit that is
full for it holds back every row behind it that counts under the same key (so a
looser limit of the same key does not pass it); under a limit where it has room it
holds back nobody, so a run waiting for its person's limit never holds up the
others of its workspace. Its ``ahead``: how many runs must end or start before it
does, under the limit that keeps it waiting the longest.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Protocol

__all__ = [
    "SLOTS_LOCK",
    "Category",
    "Decision",
    "Granted",
    "Limits",
    "Passed",
    "Slot",
    "SlotAsk",
    "SlotState",
    "SlotStore",
    "Standing",
    "Standings",
    "decide",
    "effective_priority",
]

SLOTS_LOCK = 0x7468726561647332
"""The PostgreSQL advisory lock key a pass holds for its transaction (a bigint: the
bytes of ``threads2``), so two processes never decide at once."""


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


@dataclass(frozen=True, kw_only=True)
class Slot:
    """One row: an ask, its state, its holder and until when it holds (UTC)."""

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
    granted_at: datetime | None = None

    def keys(self) -> tuple[Key, ...]:
        """The keys this row counts under, whatever its own limits."""
        return (
            ("cluster", ""),
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
    """Where a row stands: held, or waiting with ``ahead`` runs to end or start first."""

    slot_id: int
    held: bool
    ahead: int
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
    new row stands."""

    granted: tuple[Granted, ...] = ()
    standing: Standing | None = None


@dataclass(frozen=True)
class Standings:
    """Where each row asked about stands (rows no longer there are left out), and the
    categories where a pass would change something now (a row past its expiry or of a
    gone holder, or a waiting row that would be granted): the reader asks for one."""

    of: Mapping[int, Standing]
    stale: frozenset[Category] = frozenset()


@dataclass(frozen=True)
class Decision:
    """What a pass decides: rows to drop (expired, or their holder gone), rows to grant,
    and how many runs are ahead of each row left waiting."""

    dropped: tuple[int, ...] = ()
    granted: tuple[int, ...] = ()
    ahead: Mapping[int, int] = field(default_factory=dict)


def effective_priority(slot: Slot, now: datetime, aging: float | None) -> int:
    """``slot``'s priority, plus one for each ``aging`` seconds it has waited (None or 0:
    no aging)."""
    if not aging:
        return slot.priority
    waited = max(0.0, (now - slot.enqueued_at).total_seconds())
    return slot.priority + math.floor(waited / aging)


def decide(
    rows: Iterable[Slot],
    *,
    now: datetime,
    aging: float | None,
    gone: Callable[[str], bool] = lambda _holder: False,
) -> Decision:
    """The pass over one category's ``rows`` at ``now`` (see the module docstring).

    ``gone(holder)``: whether a holder is a process known to be gone (its rows are
    dropped before they expire). Pure: the backends apply what it decides."""
    dropped: list[int] = []
    live: list[Slot] = []
    for row in rows:
        if row.until < now or gone(row.holder):
            dropped.append(row.id)
        else:
            live.append(row)
    counts: Counter[Key] = Counter(
        key for row in live if row.state is SlotState.HELD for key in row.keys()
    )
    waiting = sorted(
        (row for row in live if row.state is SlotState.WAITING),
        key=lambda row: (-effective_priority(row, now, aging), row.enqueued_at, row.id),
    )
    blocked: set[Key] = set()
    passed: Counter[Key] = Counter()
    granted: list[int] = []
    ahead: dict[int, int] = {}
    for row in waiting:
        limited = row.limited()
        full = {key for key, most in limited if counts[key] >= most}
        held_back = full | {key for key, _ in limited if key in blocked}
        if not held_back:
            granted.append(row.id)
            counts.update(row.keys())
            continue
        ahead[row.id] = max(
            1,
            *(
                passed[key] + max(0, counts[key] - most + 1)
                for key, most in limited
                if key in held_back
            ),
        )
        blocked |= full
        passed.update(row.keys())
    return Decision(dropped=tuple(dropped), granted=tuple(granted), ahead=ahead)


class SlotStore(Protocol):
    """The slot rows (see the module docstring). ``aging``: seconds of waiting that
    raise a row's priority by one (None: none); ``now`` defaults to the current time."""

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
        renewed, and run the pass of its category, in one write; where it stands
        (granted at once, or how many are ahead) and every row the pass granted."""
        ...

    async def release_slot(
        self, slot_id: int, *, aging: float | None, now: datetime | None = None
    ) -> Passed:
        """Drop the row (held or waiting; nothing when it is gone) and run the pass of its
        category, in one write; the rows the pass granted."""
        ...

    async def grant_slots(
        self, category: Category, *, aging: float | None, now: datetime | None = None
    ) -> Passed:
        """Run the pass of ``category`` alone (rows expired, or of gone holders, dropped);
        the rows it granted."""
        ...

    async def renew_slots(
        self, holder: str, ids: Collection[int], *, ttl: float, now: datetime | None = None
    ) -> set[int]:
        """Extend ``holder``'s rows ``ids`` to ``ttl`` seconds from ``now``; the ids still
        there (the others were dropped: their holder was taken for gone)."""
        ...

    async def slot_standings(
        self, ids: Collection[int], *, aging: float | None, now: datetime | None = None
    ) -> Standings:
        """Where the rows ``ids`` stand, read without writing (see :class:`Standings`)."""
        ...

    async def slots(self, category: Category | None = None) -> list[Slot]:
        """Every row (of ``category``), oldest first: for operators and tests."""
        ...


def standings_of(
    rows: Collection[Slot],
    ids: Collection[int],
    *,
    now: datetime,
    aging: float | None,
    gone: Callable[[str], bool],
) -> Standings:
    """The :class:`Standings` of ``ids`` among ``rows`` (of one or more categories), as a
    pass at ``now`` would see them, without changing anything."""
    wanted = set(ids)
    of: dict[int, Standing] = {}
    stale: set[Category] = set()
    for category in {row.category for row in rows}:
        among = [row for row in rows if row.category is category]
        decision = decide(among, now=now, aging=aging, gone=gone)
        if decision.dropped or decision.granted:
            stale.add(category)
        for row in among:
            if row.id not in wanted or row.id in decision.dropped:
                continue
            held = row.state is SlotState.HELD
            ahead = 0 if held else decision.ahead.get(row.id, 0)
            of[row.id] = Standing(row.id, held, ahead, row.enqueued_at)
    return Standings(of=of, stale=frozenset(stale))


def standing_after(rows: Collection[Slot], slot_id: int, decision: Decision) -> Standing | None:
    """Where ``slot_id`` stands after a pass that decided ``decision`` over ``rows``."""
    for row in rows:
        if row.id == slot_id and row.id not in decision.dropped:
            held = row.state is SlotState.HELD or row.id in decision.granted
            return Standing(
                row.id, held, 0 if held else decision.ahead.get(row.id, 1), row.enqueued_at
            )
    return None
