"""A run's conversation in memory: read at most once, kept up to date by its own commits.

While a run holds a conversation's lease nobody else runs it, so the run need not
read the conversation back after each step: the run loads it at its start
(:class:`core.run.state.Run`) and, after each commit the store accepted,
:func:`commit` applies the change to the run's snapshot with
:func:`core.vocabulary.fold.apply_change` (the function the stores build their
state from). Commits name the position they append after (``after_seq``), so the
store writes no ``SELECT max(seq)`` and refuses a commit computed from a stale
snapshot.

A run after a reply, or after a crash, loads from the store; the first run of a
mention starts from the conversation as it was opened, and the run after a decision
from the snapshot the decision's commit left, when nothing changed since
(:class:`core.run.state.Handover`). Writes
beside a run are few and guarded: a decision on a tool approval may land while the
turn's allowed calls run (from the hub, or another instance). Such a write shows as
a :class:`core.vocabulary.errors.StaleSnapshot` (its journal entries took our
``seq`` numbers: reload, renumber, commit again, unless the write gave one of our
calls its result already) or a :class:`core.vocabulary.errors.RequestConflict` (a
compare-and-set failed: the run's snapshot is dropped, and the code that goes on
after it reads the conversation back with :func:`current`). Any other failure of a
commit, cancellation included, drops the snapshot too, since its outcome is not
known.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Iterator

from core.run.addressed import addressed
from core.run.plan_progress import with_plan_progress
from core.run.state import Gathering, Run
from core.vocabulary.entries import AssistantTurn, StepEntered, ToolResultEntry
from core.vocabulary.errors import RequestConflict, StaleSnapshot
from core.vocabulary.fold import apply_change
from core.vocabulary.journal import Change, Committed, Journal
from core.vocabulary.snapshot import ConversationSnapshot

RETRIES = 3
"""Times a commit is tried again after a :class:`~core.vocabulary.errors.StaleSnapshot`."""


class CountingJournal:
    """A :class:`core.vocabulary.journal.Journal` that counts the loads reaching ``journal``."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self.loads = 0

    async def load(self, conversation_id: str) -> ConversationSnapshot:
        """The conversation, from the store (counted)."""
        self.loads += 1
        return await self._journal.load(conversation_id)

    async def commit(
        self, conversation_id: str, change: Change, *, after_seq: int | None = None
    ) -> Committed:
        """``journal.commit``, as is."""
        return await self._journal.commit(conversation_id, change, after_seq=after_seq)


async def reload(run: Run, journal: Journal) -> ConversationSnapshot:
    """Read the run's conversation from the store again; it is the run's snapshot now."""
    snap = run.snapshot = await journal.load(run.conversation_id)
    return snap


async def current(run: Run, journal: Journal) -> ConversationSnapshot:
    """The run's snapshot, read back from the store if a failed commit dropped it."""
    return run.snapshot if run.snapshot is not None else await reload(run, journal)


async def commit(
    run: Run, journal: Journal, change: Change, *, together: bool = False
) -> Committed:
    """Commit ``change`` after the run's newest entry; fold it into the run's snapshot.

    Commits of one run go one at a time (the turn's concurrent tool calls share it).
    A change that moves a step of the approved plan gets its
    :class:`~core.vocabulary.run_events.PlanProgress` here
    (:func:`core.run.plan_progress.with_plan_progress`, docs/architecture.md, "Plan cards").
    ``together``: while the run gathers the results of calls that run side by side
    (:func:`gathered`), the change waits for the others and they are committed as
    one change (:meth:`Change.then`, in the order they came), each caller getting
    that commit's outcome; otherwise it is committed at once.
    Raises what the store raises (:class:`~core.vocabulary.errors.RequestConflict`,
    :class:`~core.vocabulary.errors.LeaseLost`, ...) after dropping the snapshot; a
    :class:`~core.vocabulary.errors.StaleSnapshot` is handled here (reload, renumber,
    again) up to :data:`RETRIES` times.
    """
    gathering = run.gathering
    if together and gathering is not None:
        return await _joined(run, journal, gathering, change)
    return await _commit(run, journal, change)


@contextlib.contextmanager
def gathered(run: Run, size: int, order: dict[str, int] | None = None) -> Iterator[None]:
    """Inside the block, the ``together`` commits of the run (the results of ``size``
    read-only calls run side by side) wait until all ``size`` have come, then go as
    one commit, in ``order`` (each call's place by its ``tool_use`` id: the model's
    order; unplaced changes keep the order they came in). Every call of the block
    must commit its result once, or end the block by raising (the others are then
    cancelled by the caller); what was gathered and not committed when the block
    ends is dropped (a read-only call runs again after a crash anyway)."""
    run.gathering = Gathering(size=size, order=dict(order or {}))
    try:
        yield
    finally:
        run.gathering = None


async def _joined(run: Run, journal: Journal, gathering: Gathering, change: Change) -> Committed:
    """:func:`commit` of a ``together`` change while ``gathering``."""
    joined: asyncio.Future[Committed] = asyncio.get_running_loop().create_future()
    gathering.changes.append((change, joined))
    if len(gathering.changes) < gathering.size:
        return await joined
    batch = sorted(gathering.changes, key=lambda c: _place(c[0], gathering.order))
    gathering.changes.clear()
    try:
        merged = functools.reduce(Change.then, [c for c, _ in batch])
        committed = await _commit(run, journal, merged)
    except BaseException as exc:
        for _, future in batch:
            if future is joined or future.done():
                continue
            if isinstance(exc, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(exc)
        raise
    for _, future in batch:
        if future is not joined and not future.done():
            future.set_result(committed)
    return committed


def _place(change: Change, order: dict[str, int]) -> int:
    """Where ``change`` goes in a gathered commit: its first result's call's place."""
    for entry in change.entries:
        if isinstance(entry, ToolResultEntry):
            return order.get(entry.tool_use_id, len(order))
    return len(order)


async def _commit(run: Run, journal: Journal, change: Change) -> Committed:
    """:func:`commit` of one change (see there)."""
    cid = run.conversation_id
    change = addressed(run, change)
    async with run.commits:
        snap = run.snapshot
        if snap is not None:
            change = with_plan_progress(snap, change)
        try:
            for _attempt in range(RETRIES):
                last = snap.last_seq if snap is not None else None
                try:
                    committed = await journal.commit(cid, change, after_seq=last)
                except StaleSnapshot:
                    snap = await journal.load(cid)
                    _check_results(change, snap)
                    change = renumbered(change, last or 0, snap.last_seq)
                    continue
                run.snapshot = None if snap is None else apply_change(snap, change, committed)
                run.committed_at = committed.at
                _entered(run, change)
                if run.watch is not None:
                    run.watch(change)
                return committed
        except BaseException:
            run.snapshot = None  # the outcome is not known here
            raise
        run.snapshot = None
        raise StaleSnapshot(
            f"conversation {cid}: the journal kept moving under {RETRIES} commits in a row"
        )


def _entered(run: Run, change: Change) -> None:
    """A span for each workflow state the committed ``change`` entered
    (:meth:`core.tracing.RunSpan.state_entered`)."""
    for entry in change.entries:
        if isinstance(entry, StepEntered):
            kind = run.workflow.state(entry.position).kind
            run.span.state_entered(run.workflow.name, entry.position, kind)


def _check_results(change: Change, snap: ConversationSnapshot) -> None:
    """Raise :class:`~core.vocabulary.errors.RequestConflict` when ``change`` gives a call a result
    that the journal already holds: the write beside the run closed it (no call ever
    has two results); or when ``change`` ends the conversation and a write beside it
    ended it meanwhile (two stops at once: one is journaled, the other finds nothing to
    stop)."""
    ending = change.status is not None and not change.status.active
    if ending and not snap.status.active:
        raise RequestConflict(f"conversation {snap.id}: it ended meanwhile")
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
