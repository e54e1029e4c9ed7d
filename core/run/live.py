"""A run's conversation in memory: loaded once, kept up to date by its own commits.

While a run holds a conversation's lease nobody else runs it, so the run need not
read the conversation back after each step: :class:`LiveJournal` loads it at the
run's first read and, after each commit the store accepted, applies the change to
the snapshot with :func:`core.vocabulary.fold.apply_change` (the function the stores build
their state from). Commits name the position they append after (``after_seq``),
so the store writes no ``SELECT max(seq)`` and refuses a commit computed from a
stale snapshot.

A run is one call of an engine entry point (:meth:`LiveJournal.run`): a run
after a person's answer, or after a crash, starts with an empty cache and loads
from the store. Writes beside a run are few and guarded: a decision on a tool
approval may land while the turn's allowed calls run (from the hub, or another
instance). Such a write shows as a :class:`core.vocabulary.errors.StaleSnapshot` (its
journal entries took our ``seq`` numbers: reload, renumber, commit again, unless
the write gave one of our calls its result already) or a
:class:`core.vocabulary.errors.RequestConflict` (a compare-and-set failed: the cached
snapshot is dropped and the next read loads). Any other failure of a commit,
cancellation included, drops the cached snapshot too, since its outcome is not
known.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

from core.vocabulary.entries import AssistantTurn, ToolResultEntry
from core.vocabulary.errors import RequestConflict, StaleSnapshot
from core.vocabulary.fold import apply_change
from core.vocabulary.journal import Change, Committed, Journal
from core.vocabulary.snapshot import ConversationSnapshot

RETRIES = 3
"""Times a commit is tried again after a :class:`~core.vocabulary.errors.StaleSnapshot`."""


@dataclass
class _Run:
    """What one run keeps: a snapshot per conversation it read, and one commit at a time."""

    snapshots: dict[str, ConversationSnapshot] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


_run: ContextVar[_Run | None] = ContextVar("threadbot_live_run", default=None)


class LiveJournal:
    """:class:`core.vocabulary.journal.Journal` that serves a run's reads from memory.

    Outside :meth:`run` it passes every call to ``journal``. Inside, the first
    :meth:`load` of a conversation reads the store, later ones return the
    snapshot kept up to date by :meth:`commit`. Tasks the run starts (its
    concurrent tool calls) share the run's snapshot; their commits go one at a
    time. ``loads`` counts the loads that reached the store.
    """

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self.loads = 0

    @contextlib.contextmanager
    def run(self) -> Iterator[None]:
        """The extent of one run (an engine entry point); nested calls share the outer run."""
        if _run.get() is not None:
            yield
            return
        state = _Run()
        token = _run.set(state)
        try:
            yield
        finally:
            _run.reset(token)
            state.snapshots.clear()  # a task that copied the run's context keeps nothing

    async def load(self, conversation_id: str) -> ConversationSnapshot:
        """The conversation as the run last committed it; from the store at first."""
        run = _run.get()
        if run is None:
            return await self._load(conversation_id)
        snap = run.snapshots.get(conversation_id)
        if snap is None:
            snap = run.snapshots[conversation_id] = await self._load(conversation_id)
        return snap

    async def commit(
        self, conversation_id: str, change: Change, *, after_seq: int | None = None
    ) -> Committed:
        """Commit ``change`` after the run's newest entry; keep the snapshot up to date.

        Raises what the store raises (:class:`~core.vocabulary.errors.RequestConflict`,
        :class:`~core.vocabulary.errors.LeaseLost`, ...) after dropping the cached snapshot;
        a :class:`~core.vocabulary.errors.StaleSnapshot` is handled here (reload, renumber,
        again) up to :data:`RETRIES` times.
        """
        run = _run.get()
        if run is None:
            return await self._journal.commit(conversation_id, change, after_seq=after_seq)
        async with run.lock:
            snap = run.snapshots.get(conversation_id)
            try:
                for _attempt in range(RETRIES):
                    last = snap.last_seq if snap is not None else after_seq
                    try:
                        committed = await self._journal.commit(
                            conversation_id, change, after_seq=last
                        )
                    except StaleSnapshot:
                        snap = await self._load(conversation_id)
                        _check_results(change, snap)
                        change = renumbered(change, last or 0, snap.last_seq)
                        continue
                    if snap is not None:
                        run.snapshots[conversation_id] = apply_change(snap, change, committed)
                    return committed
            except BaseException:
                run.snapshots.pop(conversation_id, None)  # the outcome is not known here
                raise
            run.snapshots.pop(conversation_id, None)
            raise StaleSnapshot(
                f"conversation {conversation_id}: the journal kept moving under "
                f"{RETRIES} commits in a row"
            )

    async def _load(self, conversation_id: str) -> ConversationSnapshot:
        self.loads += 1
        return await self._journal.load(conversation_id)


def _check_results(change: Change, snap: ConversationSnapshot) -> None:
    """Raise :class:`~core.vocabulary.errors.RequestConflict` when ``change`` gives a call a result
    that the journal already holds: the write beside the run closed it (no call ever
    has two results)."""
    giving = {e.tool_use_id for e in change.entries if isinstance(e, ToolResultEntry)}
    if not giving:
        return
    answered = giving & {
        r.entry.tool_use_id for r in snap.journal if isinstance(r.entry, ToolResultEntry)
    }
    if answered:
        raise RequestConflict(
            f"conversation {snap.id}: {', '.join(sorted(answered))} got a result meanwhile"
        )


def renumbered(change: Change, old_last: int, new_last: int) -> Change:
    """``change`` computed after ``seq`` ``old_last``, to be appended after ``new_last``.

    Only a new model turn refers to its own ``seq`` (its calls' ``turn_seq``); the
    records of calls of that turn move with it. Other records name older turns
    and stay.
    """
    shift = new_last - old_last
    if shift == 0 or not change.tool_calls:
        return change
    turns = {
        old_last + 1 + i
        for i, entry in enumerate(change.entries)
        if isinstance(entry, AssistantTurn)
    }
    if not turns:
        return change
    calls = tuple(
        r.model_copy(update={"turn_seq": r.turn_seq + shift}) if r.turn_seq in turns else r
        for r in change.tool_calls
    )
    return change.model_copy(update={"tool_calls": calls})
