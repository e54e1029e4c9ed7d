"""The pass over one category's slot rows: who is granted, and how many runs are ahead.

(docs/architecture.md, "Limits and priorities"; the rows: :mod:`conversations.store.slots`.)

- :func:`decide` is the rule, stated over every row at once: the reference, which the
  in-memory store runs as it is.
- :class:`Granting` is the same rule fed the waiting rows one at a time in queue order,
  and says which further rows could still be granted (:meth:`Granting.could_grant`):
  once no row left to read could, the pass stops, so the SQL store reads the held rows'
  counts and the head of the queue only, not every waiting row
  (``tests/test_slot_pass.py`` checks on random rows that it grants what :func:`decide`
  grants).
- :func:`ahead` and :func:`ahead_of` count the runs ahead of a waiting row, when its
  holder looks (the SQL store counts with one windowed query, the same numbers).

Pure: the backends read and write what these decide.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from conversations.store.slots import CLUSTER, Key, Slot, SlotState

__all__ = ["Decision", "Granting", "ahead", "ahead_of", "decide", "live", "queue_order"]


@dataclass(frozen=True)
class Decision:
    """What a pass decides: rows to drop (expired, or their holder gone) and rows to grant."""

    dropped: tuple[int, ...] = ()
    granted: tuple[int, ...] = ()


def queue_order(row: Slot) -> tuple[float, int]:
    """The queue order of waiting rows: rank (:func:`conversations.store.slots.rank_of`),
    then the lower id."""
    return (row.rank, row.id)


def live(row: Slot, now: datetime, gone: Callable[[str], bool]) -> bool:
    """Whether a pass at ``now`` keeps ``row``: not past its expiry, its holder not gone."""
    return row.until >= now and not gone(row.holder)


def decide(
    rows: Iterable[Slot],
    *,
    now: datetime,
    gone: Callable[[str], bool] = lambda _holder: False,
) -> Decision:
    """The pass over one category's ``rows`` at ``now`` (see
    :mod:`conversations.store.slots`): every row read, the waiting ones sorted.

    ``gone(holder)``: whether a holder is a process known to be gone (its rows are
    dropped before they expire)."""
    dropped: list[int] = []
    kept: list[Slot] = []
    for row in rows:
        if live(row, now, gone):
            kept.append(row)
        else:
            dropped.append(row.id)
    counts: Counter[Key] = Counter(
        key for row in kept if row.state is SlotState.HELD for key in row.keys()
    )
    waiting = sorted((row for row in kept if row.state is SlotState.WAITING), key=queue_order)
    blocked: set[Key] = set()
    granted: list[int] = []
    for row in waiting:
        limited = row.limited()
        full = {key for key, most in limited if counts[key] >= most}
        held_back = full | {key for key, _ in limited if key in blocked}
        if not held_back:
            granted.append(row.id)
            counts.update(row.keys())
            continue
        blocked |= full
    return Decision(dropped=tuple(dropped), granted=tuple(granted))


class Granting:
    """:func:`decide`'s loop over the waiting rows, fed one row at a time in queue order
    (:func:`queue_order`), from the counts of the live held rows by key (``held``).

    After each row, :meth:`could_grant` tells whether a row not yet offered could still
    be granted: every key it is limited under not closed (:attr:`blocked`: some row
    before it was held back there, full) and with room now. Keys only close and counts
    only grow as rows are offered, so a row it turns down now is never granted in this
    pass: once no row left to read passes it, the pass may stop (the rows left hold back
    nobody that matters, since nobody is left to grant)."""

    def __init__(self, held: Mapping[Key, int]) -> None:
        self.counts: Counter[Key] = Counter(held)
        self.blocked: set[Key] = set()
        self.granted: list[Slot] = []

    def offer(self, row: Slot) -> bool:
        """Grant ``row`` if it may go now; whether a key closed (:attr:`blocked` grew)."""
        limited = row.limited()
        full = {key for key, most in limited if self.counts[key] >= most}
        held_back = full | {key for key, _ in limited if key in self.blocked}
        if not held_back:
            self.granted.append(row)
            self.counts.update(row.keys())
            return False
        closing = full - self.blocked
        self.blocked |= full
        return bool(closing)

    def could_grant(self, row: Slot) -> bool:
        """Whether ``row``, offered later in this pass, could be granted (necessary, not
        sufficient: rows between may close its keys or fill them)."""
        return all(
            key not in self.blocked and self.counts[key] < most for key, most in row.limited()
        )

    @property
    def cluster_count(self) -> int:
        """Rows held or granted in the whole category."""
        return self.counts[CLUSTER]


def ahead(
    limited: Iterable[tuple[Key, int]], held: Mapping[Key, int], before: Mapping[Key, int]
) -> int:
    """The runs that must end before a waiting row can start: under each limit ``most``
    it counts under, with ``held[key]`` rows holding and ``before[key]`` waiting ahead of
    it in the queue under that key, ``held + before - most + 1`` (each one ahead starts
    first, and then a place must be free); the most of these, and at least 1."""
    counts = (held.get(key, 0) + before.get(key, 0) - most + 1 for key, most in limited)
    return max(1, max(counts, default=1))


def ahead_of(
    rows: Collection[Slot],
    ids: Collection[int],
    *,
    now: datetime,
    gone: Callable[[str], bool],
) -> dict[int, int]:
    """:func:`ahead` of each waiting row of ``ids`` among ``rows`` (one or more
    categories), counting the live rows only (:func:`live`)."""
    wanted = set(ids)
    kept = [row for row in rows if live(row, now, gone)]
    found: dict[int, int] = {}
    for category in {row.category for row in kept}:
        among = [row for row in kept if row.category is category]
        held: Counter[Key] = Counter(
            key for row in among if row.state is SlotState.HELD for key in row.keys()
        )
        before: Counter[Key] = Counter()
        for row in sorted((r for r in among if r.state is SlotState.WAITING), key=queue_order):
            if row.id in wanted:
                found[row.id] = ahead(row.limited(), held, before)
            before.update(row.keys())
    return found
