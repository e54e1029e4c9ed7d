"""Leases: one process at a time runs a conversation, and a process that lost it writes nothing.

A lease is an owner (``host:pid`` or the ``THREADBOT_INSTANCE`` name), an expiry
(UTC) and an epoch per conversation, kept by a
:class:`~conversations.store.interfaces.LeaseStore` (in SQL: three columns of
``conversations``, :mod:`conversations.store.sql.leases`). It is taken when the
conversation's worker starts its first job, kept while more jobs of the
conversation are queued (:mod:`conversations.hub._runs`), renewed by one task per
process (:meth:`Leases.keep_renewed`) and released when no job is left, on a stop,
at shutdown, and after a job found it lost (the next job takes it again); this
module is the holder, the same for every backend.

Fencing: the epoch goes up every time the lease is *acquired* (from free, from
an expired holder, from a dead one), never when it is renewed. A job's commits
(:class:`Lease`, found through :func:`current_lease`) are checked in the same
transaction (in SQL by an ``UPDATE ... WHERE lease_owner = :owner AND lease_epoch =
:epoch``): a process that was paused or cut off past the expiry, and whose
conversation another process took over meanwhile, gets
:class:`core.vocabulary.errors.LeaseLost` at its next commit and writes nothing. Only the
commits of a job that holds the lease are fenced; decisions, stops, reminders and
notices stay guarded by their compare-and-set on the request or the lifecycle.
(The pattern: M. Kleppmann, "How to do distributed locking", 2016, fencing tokens.)

A process on the same host takes over the lease of a dead process at once (it
checks the pid); a lease held by another host lapses ``ttl`` seconds after its
last renewal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from conversations.store.owners import taken_unless_alive
from conversations.store.records import Lease, LeaseState
from core.vocabulary.journal import Change
from core.vocabulary.lifecycle import Lifecycle

log = logging.getLogger(__name__)

__all__ = [
    "Holding",
    "Lease",
    "LeaseState",
    "LeaseStore",
    "Leases",
    "current_holding",
    "current_lease",
    "fence_with",
    "releases_with",
]


class LeaseStore(Protocol):
    """Who may run a conversation: fenced leases (:mod:`conversations.store.leases`).

    Taking a lease from free, expired or dead raises its epoch; renewing keeps it.
    A commit of the journal made inside :meth:`conversations.store.leases.Leases.held`
    is refused with :class:`core.vocabulary.errors.LeaseLost` once the epoch moved on.
    """

    async def acquire_lease(
        self,
        conversation_id: str,
        owner: str,
        *,
        ttl: float,
        now: datetime | None = None,
        dead: str | None = None,
    ) -> Lease | None:
        """Take the lease for ``ttl`` seconds from ``now`` (default: the current time),
        with the next epoch, when it is free, expired, already ``owner``'s, or held by
        ``dead`` (an owner the caller knows is gone); None otherwise, or for an
        unknown conversation."""
        ...

    async def renew_leases(
        self, held: Collection[Lease], *, ttl: float, now: datetime | None = None
    ) -> set[str]:
        """Extend ``held`` (all of one owner) to ``ttl`` seconds from ``now``, epochs
        unchanged; returns the ids still held (the others were taken over)."""
        ...

    async def release_lease(self, lease: Lease) -> bool:
        """Give ``lease`` up; False when it no longer held (taken over meanwhile)."""
        ...

    async def lease_owner(self, conversation_id: str) -> str | None:
        """Who holds the conversation's lease now (expired or not), if anyone."""
        ...

    async def lease_state(self, conversation_id: str) -> LeaseState | None:
        """Owner, epoch and expiry of the conversation's lease; None for an unknown id."""
        ...

    async def take_lapsed(
        self,
        owner: str,
        *,
        ttl: float,
        limit: int,
        lapsed_for: float = 0.0,
        now: datetime | None = None,
    ) -> list[Lease]:
        """Take, for ``owner``, the leases of up to ``limit`` conversations left
        ``running`` whose lease lapsed at least ``lapsed_for`` seconds ago, or is held
        by nobody (their holder died or was cut off), each for ``ttl`` seconds with the
        next epoch, oldest change first: one statement, and
        on PostgreSQL rows another instance is taking at the same moment are skipped
        (``FOR UPDATE SKIP LOCKED``), so each is taken once. A conversation still on its
        placeholder thread (a fork waiting for its thread: :mod:`conversations.store.forks`)
        is passed over. The leases taken."""
        ...


@dataclass
class Holding:
    """A lease as the jobs of one worker hold it (:meth:`Leases.held`).

    ``may_release()``: whether the worker has no job queued after the one running; a
    commit that ends the run (its conversation no longer ``running``) then gives
    the lease up in its own ``UPDATE`` (:func:`releases_with`) and sets ``released``,
    so the worker writes no release of its own, and a job that comes after all
    takes the lease again first (:meth:`Leases.again`).

    ``bound``: the conversation's thread as the last commit under this holding found
    it, kept by the store's journal for its own use (on PostgreSQL, a commit in one
    statement: :mod:`conversations.store.sql.one_statement`); ``None`` until then.
    """

    lease: Lease
    may_release: Callable[[], bool] = lambda: False
    released: bool = False
    bound: object | None = None


_current: ContextVar[Holding | None] = ContextVar("threadbot_lease", default=None)


def current_lease(conversation_id: str) -> Lease | None:
    """The lease this task's job holds on ``conversation_id``, if this is such a job.

    Set by :meth:`Leases.held` for the task that holds it (the conversation's worker)
    and the tasks it starts (each job); every backend's journal fences the commits
    made under it.
    """
    holding = current_holding(conversation_id)
    return holding.lease if holding is not None else None


def current_holding(conversation_id: str) -> Holding | None:
    """How this task's job holds the lease on ``conversation_id`` (see :class:`Holding`)."""
    holding = _current.get()
    if holding is None or holding.lease.conversation_id != conversation_id:
        return None
    return holding


def fence_with(lease: Lease) -> None:
    """Fence this task's commits of ``lease``'s conversation (and those of the tasks it
    starts from now on) by ``lease``, held by another process: the bot process that
    asked for the run holds and renews it, and a run carried out elsewhere (on a Ray
    actor: docs/architecture.md, "Runners") commits under it as that process's job
    would, getting :class:`core.vocabulary.errors.LeaseLost` once it was taken over.
    Such a commit never gives the lease up (its holder does). For the rest of the
    task's context: call it at the top of a task of its own."""
    _current.set(Holding(lease))


def releases_with(conversation_id: str, change: Change) -> Holding | None:
    """The holding whose lease a commit of ``change`` gives up, if it does: the change
    ends the run (its status is not ``running``) and the worker has nothing queued.

    Call before the commit, in the job's task (the queue is read there); the journal
    sets ``released`` once the commit went through.
    """
    holding = current_holding(conversation_id)
    if holding is None or holding.released or change.status is None:
        return None
    if change.status.lifecycle is Lifecycle.RUNNING or not holding.may_release():
        return None
    return holding


class Leases:
    """The leases one process (``owner``) holds, renewed together by one task.

    ``ttl``: seconds a lease lasts without renewal; :meth:`keep_renewed` renews
    every held lease each third of it, in one statement.
    """

    def __init__(self, *, store: LeaseStore, owner: str, ttl: float) -> None:
        self._store = store
        self.owner = owner
        self.ttl = ttl
        self._held: dict[str, Holding] = {}
        self._opened: dict[str, Lease] = {}
        """Leases of conversations this process opened leased, until their worker holds them."""
        self._beside: list[Callable[[], Awaitable[object]]] = []
        self._taking: dict[str, asyncio.Event] = {}
        """Conversations a holder of this process takes or holds, each with the event set
        when it lets go: one holder at a time here (see :meth:`_enter`)."""

    @property
    def held_ids(self) -> frozenset[str]:
        """Ids of the conversations whose lease this process holds now."""
        return frozenset(self._held)

    @contextlib.asynccontextmanager
    async def held(
        self, conversation_id: str, *, may_release: Callable[[], bool] | None = None
    ) -> AsyncIterator[Lease]:
        """Hold the conversation's lease for the block; waits while a live process has it
        (or while the store cannot be written: :meth:`_acquire`).

        Commits made inside the block (and in tasks it starts) are fenced by the
        lease. The lease is released at the end, unless another holder has it by then,
        or a commit that ended the run gave it up already (``may_release``: see
        :class:`Holding`; without it, never).
        """
        await self._enter(conversation_id)
        try:
            lease = self._opened.pop(conversation_id, None) or await self._acquire(conversation_id)
            holding = Holding(lease, may_release or (lambda: False))
            self._held[conversation_id] = holding
            token = _current.set(holding)
            try:
                yield lease
            finally:
                _current.reset(token)
                self._held.pop(conversation_id, None)
                if not holding.released:
                    await asyncio.shield(self._store.release_lease(holding.lease))
        finally:
            self._leave(conversation_id)

    async def _enter(self, conversation_id: str) -> None:
        """Wait while another holder of this process (a worker, a stop) takes or holds the
        conversation's lease, then be its one holder here. The store treats this
        process's own lease as takeable (a restart under the same instance name takes
        it back), so two holders here would each take it from the other, each fencing
        out the other's commits."""
        while (taken := self._taking.get(conversation_id)) is not None:
            await taken.wait()
        self._taking[conversation_id] = asyncio.Event()

    def _leave(self, conversation_id: str) -> None:
        """Let the next holder of this process in (see :meth:`_enter`)."""
        left = self._taking.pop(conversation_id, None)
        if left is not None:
            left.set()

    async def again(self, conversation_id: str) -> None:
        """Before a job: take the lease again if the job before gave it up with the
        commit that ended its run (see :class:`Holding`); waits like :meth:`held`."""
        holding = current_holding(conversation_id)
        if holding is None or not holding.released:
            return
        holding.lease = await self._acquire(conversation_id)
        holding.released = False

    def opened(self, lease: Lease) -> None:
        """Hold ``lease``, which the conversation was created with (``open_conversation``
        given this process as the owner): the conversation's worker takes it as it is
        (:meth:`held`) instead of acquiring it in a write of its own. Renewed from then on."""
        self._opened[lease.conversation_id] = lease
        self._held[lease.conversation_id] = Holding(lease)

    async def take_now(self, conversation_id: str) -> Lease | None:
        """Take the conversation's lease if it is free, lapsed, this process's or a gone
        process's of this host (:meth:`_try_acquire`); None, without waiting, when another
        live process holds it. Hold what it returns with :meth:`taken_over`."""
        return await self._try_acquire(conversation_id)

    def taken_over(self, lease: Lease) -> None:
        """Hold ``lease``, taken over from a lapsed holder (``LeaseStore.take_lapsed``), as
        :meth:`opened` does; unless a holder of this process is taking or holding the
        conversation already: it takes the lease itself (its own, to the store)."""
        if lease.conversation_id not in self._taking:
            self.opened(lease)

    @contextlib.asynccontextmanager
    async def held_now(self, conversation_id: str) -> AsyncIterator[Lease | None]:
        """Like :meth:`held`, without waiting: yields None when a live process has it, or
        another holder of this process takes or holds it."""
        if conversation_id in self._taking:
            yield None
            return
        self._taking[conversation_id] = asyncio.Event()
        try:
            lease = await self._try_acquire(conversation_id)
            if lease is None:
                yield None
                return
            self._held[conversation_id] = Holding(lease)
            token = _current.set(self._held[conversation_id])
            try:
                yield lease
            finally:
                _current.reset(token)
                self._held.pop(conversation_id, None)
                await asyncio.shield(self._store.release_lease(lease))
        finally:
            self._leave(conversation_id)

    async def hold(self, conversation_id: str, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work`` holding the conversation's lease (see :meth:`held`)."""
        async with self.held(conversation_id):
            await work()

    async def renew_all(self) -> set[str]:
        """Renew every held lease at once; returns the ids found lost (taken over).

        A lease let go while the renewal waited its turn at the writer (its run's
        last commit gave it up, or its worker ended) is not lost: only one this
        process still holds as it was is."""
        leases = [h.lease for h in self._held.values() if not h.released]
        kept = await self._store.renew_leases(leases, ttl=self.ttl)
        lost = {
            lease.conversation_id
            for lease in leases
            if lease.conversation_id not in kept and self._still_held(lease)
        }
        for conversation_id in lost:
            log.warning(
                "lost the lease of conversation %s: another process took it over; "
                "its run here ends at its next commit",
                conversation_id,
            )
        return lost

    def _still_held(self, lease: Lease) -> bool:
        holding = self._held.get(lease.conversation_id)
        return holding is not None and not holding.released and holding.lease == lease

    def renew_beside(self, renew: Callable[[], Awaitable[object]]) -> None:
        """Call ``renew`` after each renewal of the leases (the process's slots,
        :mod:`conversations.slots`, are renewed with them, by the same task)."""
        self._beside.append(renew)

    async def keep_renewed(self) -> None:
        """Renew the held leases every third of ``ttl`` until cancelled (a supervised task),
        and what :meth:`renew_beside` added."""
        while True:
            await asyncio.sleep(self.ttl / 3)
            await self.renew_all()
            for renew in self._beside:
                await renew()

    async def _acquire(self, conversation_id: str) -> Lease:
        """Take the lease, waiting while a live process holds it, and while the store
        cannot be written (logged; tried again after 1, 2, 4... seconds, at most 60):
        the conversation's next input waits for it, it is not dropped."""
        failures = 0
        while True:
            try:
                lease = await self._try_acquire(conversation_id)
            except Exception as exc:
                wait = min(2.0**failures, 60.0)
                failures += 1
                log.error(
                    "could not take the lease of conversation %s (%s); trying again in %g s",
                    conversation_id,
                    exc,
                    wait,
                    exc_info=exc,
                )
                await asyncio.sleep(wait)
                continue
            if lease is not None:
                return lease
            await asyncio.sleep(min(1.0, self.ttl / 3))  # another live process runs it

    async def _try_acquire(self, conversation_id: str) -> Lease | None:
        """Take the lease if it is free, expired or this process's; failing that, if its
        holder is a dead process of this host. One write in the usual case (no read of
        the holder first)."""
        return await taken_unless_alive(
            lambda dead: self._store.acquire_lease(
                conversation_id, self.owner, ttl=self.ttl, dead=dead
            ),
            lambda: self._store.lease_owner(conversation_id),
        )

    async def state(self, conversation_id: str) -> LeaseState | None:
        """Who holds the conversation's lease now, at which epoch, until when (None:
        no such conversation); this process or another."""
        return await self._store.lease_state(conversation_id)
