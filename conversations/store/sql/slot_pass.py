"""The slots' pass in SQL, and the count of the runs ahead: reads that stop early.

(docs/architecture.md, "Limits and priorities".) A pass of one category, in the
caller's transaction under the slots' lock (:mod:`conversations.store.sql.slots`):

1. the live held rows' counts by key, one ``GROUP BY`` (the held rows are few: at most
   the limits); held rows past their expiry or of a gone holder are deleted first;
2. the waiting rows in queue order (``ORDER BY rank, id`` on the index
   ``ix_slots_queue``), in batches (``LIMIT``), each offered to
   :class:`conversations.store.slot_pass.Granting`: a row past its expiry or of a gone
   holder is dropped, the others granted or held back as
   :func:`conversations.store.slot_pass.decide` would;
3. whenever a row closed a key, one ``EXISTS``: is any row
   left that :meth:`Granting.could_grant` would let through (no cluster limit, or room
   under it and the cluster not closed; no other limit under a closed key)? If none,
   the pass stops: typically the cluster's limit is full, and the ``EXISTS`` finds no
   row without a cluster limit, nor one with a higher limit, on ``ix_slots_cluster``
   (category, state, cluster limit, rank), so a pass reads one batch at most whatever
   the queue's length.

The runs ahead (:func:`aheads`) are counted for the rows asked about only, in one
query: each waiting row's place among the live waiting rows under each key
(``row_number()`` windows) and the live held rows by key.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    FromClause,
    Label,
    Select,
    and_,
    bindparam,
    delete,
    func,
    or_,
    select,
    tuple_,
    update,
)
from sqlalchemy.engine import Row
from sqlalchemy.orm import InstrumentedAttribute, Session

from conversations.store.owners import holder_gone
from conversations.store.records import as_utc
from conversations.store.schema import SlotRow
from conversations.store.slot_pass import Granting, ahead, live
from conversations.store.slots import CLUSTER, Category, Key, Limits, Slot, SlotState

FIRST_BATCH = 8
"""Waiting rows read by a pass's first ``SELECT``; each next one reads twice as many, up
to :data:`MOST_BATCH`."""
MOST_BATCH = 512

_HELD = SlotState.HELD.value
_WAITING = SlotState.WAITING.value
_KINDS = ("process", "workspace", "user")

# The statements of every pass, built once (their parameters bound at each execution).
_OF = SlotRow.category == bindparam("category")
_HELD_COUNTS = (
    select(
        SlotRow.holder, SlotRow.workspace, SlotRow.user_key, func.count(), func.min(SlotRow.until)
    )
    .where(_OF, SlotRow.state == _HELD)
    .group_by(SlotRow.holder, SlotRow.workspace, SlotRow.user_key)
)
_HEAD = (
    select(SlotRow.__table__)
    .where(_OF, SlotRow.state == _WAITING)
    .order_by(SlotRow.rank, SlotRow.id)
    .limit(bindparam("size"))
)
_NEXT = _HEAD.where(
    SlotRow.rank >= bindparam("rank"),
    tuple_(SlotRow.rank, SlotRow.id) > tuple_(bindparam("rank"), bindparam("id")),
)


def _open_rows(cluster: ColumnElement[bool]) -> Select[int]:
    """A waiting row under ``cluster`` not under a closed key (the keys of each kind in
    its expanding parameter), nor among ``taken``."""
    return (
        select(SlotRow.id)
        .where(_OF, SlotRow.state == _WAITING, cluster)
        .where(
            or_(
                SlotRow.process_limit.is_(None),
                SlotRow.holder.not_in(bindparam("process", expanding=True)),
            ),
            or_(
                SlotRow.workspace_limit.is_(None),
                SlotRow.workspace.not_in(bindparam("workspace", expanding=True)),
            ),
            or_(
                SlotRow.user_limit.is_(None),
                SlotRow.user_key.not_in(bindparam("user", expanding=True)),
            ),
            SlotRow.id.not_in(bindparam("taken", expanding=True)),
        )
        .limit(1)
    )


_UNLIMITED = _open_rows(SlotRow.cluster_limit.is_(None))
_ROOM = _open_rows(SlotRow.cluster_limit > bindparam("cluster_count"))
_GRANT = (
    update(SlotRow)
    .where(SlotRow.id.in_(bindparam("ids", expanding=True)))
    .values(state=_HELD, granted_at=bindparam("now"))
)


class Gone:
    """:func:`conversations.store.owners.holder_gone`, asked once per holder."""

    def __init__(self) -> None:
        self._known: dict[str, bool] = {}

    def __call__(self, holder: str) -> bool:
        if holder not in self._known:
            self._known[holder] = holder_gone(holder)
        return self._known[holder]


@dataclass
class Outcome:
    """What a pass did: the rows it granted (held now) and the ids it dropped."""

    granted: list[Slot] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)


def run_pass(
    session: Session, category: Category, now: datetime, *, sweep: bool = False
) -> Outcome:
    """The pass of ``category`` at ``now`` (see the module docstring), its decision
    written; ``sweep``: first drop every row of the category past its expiry or of a gone
    holder, waiting ones too (a pass alone, after a look found one)."""
    gone = Gone()
    outcome = Outcome()
    of = SlotRow.category == category.value
    if sweep:
        holders = (
            session.connection().execute(select(SlotRow.holder).where(of).distinct()).scalars()
        )
        outcome.dropped += _deleted(session, of, now, [h for h in holders if gone(h)])
    counts = _held_counts(session, category, now, gone)
    if counts is None:
        dead = [h for h in _held_holders(session, category) if gone(h)]
        outcome.dropped += _deleted(session, and_(of, SlotRow.state == _HELD), now, dead)
        counts = _held_counts(session, category, now, gone)
        assert counts is not None  # under the lock, nothing else writes meanwhile
    granting = Granting(counts)
    outcome.dropped += _scan(session, category, now, granting, gone, stop_at_grant=False)
    if outcome.dropped:
        session.connection().execute(delete(SlotRow).where(SlotRow.id.in_(outcome.dropped)))
    if granting.granted:
        ids = [row.id for row in granting.granted]
        session.connection().execute(_GRANT, {"ids": ids, "now": now})
    outcome.granted = granting.granted
    return outcome


def stale(session: Session, category: Category, now: datetime, gone: Gone) -> bool:
    """Whether a pass of ``category`` would change something now (a row past its expiry
    or of a gone holder, or a waiting row it would grant), read without writing."""
    of = SlotRow.category == category.value
    expired = select(SlotRow.id).where(of, SlotRow.until < now).limit(1)
    if session.connection().execute(expired).first() is not None:
        return True
    holders = session.connection().execute(select(SlotRow.holder).where(of).distinct()).scalars()
    if any(gone(h) for h in holders):
        return True
    counts = _held_counts(session, category, now, gone)
    assert counts is not None  # no row expired nor of a gone holder
    granting = Granting(counts)
    _scan(session, category, now, granting, gone, stop_at_grant=True)
    return bool(granting.granted)


def aheads(
    session: Session,
    categories: Collection[str],
    ids: Collection[int],
    now: datetime,
    dead: Collection[str],
) -> dict[int, int]:
    """The runs ahead of each waiting row ``ids`` (:func:`conversations.store.slot_pass.ahead`)
    among the live rows of ``categories`` (``dead``: the gone holders), in one query."""
    alive: list[ColumnElement[bool]] = [
        SlotRow.category.in_(list(categories)),
        SlotRow.until >= now,
    ]
    if dead:
        alive.append(SlotRow.holder.not_in(list(dead)))
    order = (SlotRow.rank, SlotRow.id)

    def before(partition: InstrumentedAttribute[str] | None, label: str) -> Label[int]:
        by = [SlotRow.category] if partition is None else [SlotRow.category, partition]
        return (func.row_number().over(partition_by=by, order_by=order) - 1).label(label)

    queue = (
        select(
            SlotRow.id,
            SlotRow.category,
            SlotRow.holder,
            SlotRow.workspace,
            SlotRow.user_key,
            SlotRow.cluster_limit,
            SlotRow.process_limit,
            SlotRow.workspace_limit,
            SlotRow.user_limit,
            before(None, "before_cluster"),
            before(SlotRow.holder, "before_process"),
            before(SlotRow.workspace, "before_workspace"),
            before(SlotRow.user_key, "before_user"),
        )
        .where(*alive, SlotRow.state == _WAITING)
        .subquery()
    )
    held = (
        select(SlotRow.category, SlotRow.holder, SlotRow.workspace, SlotRow.user_key)
        .where(*alive, SlotRow.state == _HELD)
        .subquery()
    )
    joined: FromClause = queue
    counts: list[ColumnElement[int]] = []
    for name in (None, "holder", "workspace", "user_key"):
        columns = [held.c.category] if name is None else [held.c.category, held.c[name]]
        counted = select(*columns, func.count().label("n")).group_by(*columns).subquery()
        on = [counted.c.category == queue.c.category]
        if name is not None:
            on.append(counted.c[name] == queue.c[name])
        joined = joined.outerjoin(counted, and_(*on))
        counts.append(func.coalesce(counted.c.n, 0))
    stmt = select(queue, *counts).select_from(joined).where(queue.c.id.in_(list(ids)))
    found: dict[int, int] = {}
    for row in session.connection().execute(stmt):
        slot_id, _category, holder, workspace, user, *limits_before_held = row
        limits, before_n, held_n = (
            limits_before_held[0:4],
            limits_before_held[4:8],
            limits_before_held[8:12],
        )
        keys: list[Key] = [CLUSTER, ("process", holder), ("workspace", workspace), ("user", user)]
        limited = [(key, most) for key, most in zip(keys, limits, strict=True) if most is not None]
        found[int(slot_id)] = ahead(
            limited, dict(zip(keys, held_n, strict=True)), dict(zip(keys, before_n, strict=True))
        )
    return found


def _scan(
    session: Session,
    category: Category,
    now: datetime,
    granting: Granting,
    gone: Gone,
    *,
    stop_at_grant: bool,
) -> list[int]:
    """Offer the waiting rows to ``granting`` in queue order until no row left could be
    granted (or, with ``stop_at_grant``, until one is); the ids of the rows read that a
    pass drops."""
    dropped: list[int] = []
    connection = session.connection()
    size = FIRST_BATCH
    params: dict[str, object] = {"category": category.value, "size": size}
    stmt = _HEAD
    while True:
        batch = [slot_of(row) for row in connection.execute(stmt, params)]
        for row in batch:
            if not live(row, now, gone):
                dropped.append(row.id)
                continue
            closed = granting.offer(row)
            if stop_at_grant and granting.granted:
                return dropped
            if closed:
                taken = [*dropped, *(granted.id for granted in granting.granted)]
                if not _could_grant_any(session, category, granting, taken):
                    return dropped
        if len(batch) < size:
            return dropped
        size = min(2 * size, MOST_BATCH)
        stmt = _NEXT
        params = {
            "category": category.value,
            "size": size,
            "rank": batch[-1].rank,
            "id": batch[-1].id,
        }


def _could_grant_any(
    session: Session, category: Category, granting: Granting, taken: Collection[int]
) -> bool:
    """Whether a waiting row not yet offered could still be granted
    (:meth:`Granting.could_grant`, as far as SQL tells it cheaply: the cluster's count
    and every closed key). ``taken``: the rows read that were granted or dropped (still
    waiting in the table); a row read and held back is left out by the closed keys
    already (it was held back under one). Two reads at most, each a range of
    ``ix_slots_cluster``: the rows with no cluster limit, then (the cluster not closed)
    those with room under it."""
    params: dict[str, object] = {
        kind: [value for key, value in granting.blocked if key == kind] for kind in _KINDS
    }
    params |= {"category": category.value, "taken": list(taken)}
    connection = session.connection()
    if connection.execute(_UNLIMITED, params).first() is not None:
        return True
    if CLUSTER in granting.blocked:
        return False
    params["cluster_count"] = granting.cluster_count
    return connection.execute(_ROOM, params).first() is not None


def _held_counts(
    session: Session, category: Category, now: datetime, gone: Gone
) -> Counter[Key] | None:
    """The held rows of ``category`` counted by key, or None when one is past its expiry
    or of a gone holder (to be dropped first)."""
    counts: Counter[Key] = Counter()
    found = session.connection().execute(_HELD_COUNTS, {"category": category.value})
    for holder, workspace, user, n, soonest in found:
        until = as_utc(soonest)
        if until is None or until < now or gone(holder):
            return None
        for key in (CLUSTER, ("process", holder), ("workspace", workspace), ("user", user)):
            counts[key] += n
    return counts


def _held_holders(session: Session, category: Category) -> Iterable[str]:
    stmt = select(SlotRow.holder).where(SlotRow.category == category.value, SlotRow.state == _HELD)
    return session.connection().execute(stmt.distinct()).scalars()


def _deleted(
    session: Session, where: ColumnElement[bool], now: datetime, dead: Collection[str]
) -> list[int]:
    """Delete the rows ``where`` past their expiry or of a ``dead`` holder; their ids."""
    lapsed: ColumnElement[bool] = SlotRow.until < now
    if dead:
        lapsed = or_(lapsed, SlotRow.holder.in_(list(dead)))
    stmt = delete(SlotRow).where(where, lapsed).returning(SlotRow.id)
    return [int(i) for i in session.connection().execute(stmt).scalars()]


def slot_of(row: SlotRow | Row[Any]) -> Slot:
    """A row of ``slots`` (ORM or Core, its columns by name) as a :class:`Slot`."""
    enqueued, until = as_utc(row.enqueued_at), as_utc(row.until)
    assert enqueued is not None and until is not None
    return Slot(
        id=row.id,
        conversation_id=row.conversation_id,
        category=Category(row.category),
        state=SlotState(row.state),
        holder=row.holder,
        workspace=row.workspace,
        user=row.user_key,
        priority=row.priority,
        limits=Limits(
            cluster=row.cluster_limit,
            process=row.process_limit,
            workspace=row.workspace_limit,
            user=row.user_limit,
        ),
        enqueued_at=enqueued,
        until=until,
        rank=row.rank,
        granted_at=as_utc(row.granted_at),
    )
