"""Leases: one process at a time runs a conversation, and a process that lost it writes nothing.

A lease is three columns of ``conversations``: ``lease_owner`` (``host:pid`` or
the ``THREADBOT_INSTANCE`` name), ``lease_until`` (UTC) and ``lease_epoch``. It is
taken before a job of the conversation runs, renewed by one task per process
(:meth:`Leases.keep_renewed`) and released when the job ends.

Fencing: the epoch goes up every time the lease is *acquired* (from free, from
an expired holder, from a dead one), never when it is renewed. A job's commits
(:class:`Lease`, found through :func:`current_lease`) are checked in the same
transaction, by an ``UPDATE ... WHERE lease_owner = :owner AND lease_epoch =
:epoch``: a process that was paused or cut off past the expiry, and whose
conversation another process took over meanwhile, gets
:class:`core.errors.LeaseLost` at its next commit and writes nothing. Only the
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
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from sqlalchemy import and_, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from conversations.store.schema import ConversationRow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Lease:
    """A held lease: the conversation, its owner and the epoch it was acquired at."""

    conversation_id: str
    owner: str
    epoch: int


_current: ContextVar[Lease | None] = ContextVar("threadbot_lease", default=None)


def current_lease(conversation_id: str) -> Lease | None:
    """The lease the running job holds on ``conversation_id``, if this is such a job.

    Set by :meth:`Leases.held` for the task that runs the job (and tasks it starts).
    """
    lease = _current.get()
    return lease if lease is not None and lease.conversation_id == conversation_id else None


# --- statements (run inside the store's write transactions) ---------------------------


async def acquire(
    session: AsyncSession,
    conversation_id: str,
    owner: str,
    *,
    until: datetime,
    now: datetime,
    dead: str | None,
) -> Lease | None:
    """Take the lease if it is free, expired, ``owner``'s own or ``dead``'s; bumps the epoch."""
    takeable = (
        ConversationRow.lease_owner.is_(None)
        | (ConversationRow.lease_owner == owner)
        | (ConversationRow.lease_until < now)
    )
    if dead is not None:
        takeable = takeable | (ConversationRow.lease_owner == dead)
    stmt = (
        update(ConversationRow)
        .where(ConversationRow.id == conversation_id, takeable)
        .values(lease_owner=owner, lease_until=until, lease_epoch=ConversationRow.lease_epoch + 1)
        .returning(ConversationRow.lease_epoch)
    )
    epoch = (await session.execute(stmt)).scalar_one_or_none()
    return None if epoch is None else Lease(conversation_id, owner, int(epoch))


async def renew(session: AsyncSession, leases: Collection[Lease], *, until: datetime) -> set[str]:
    """Extend ``leases`` (all of one owner) to ``until``; returns the ids still held."""
    if not leases:
        return set()
    owner = next(iter(leases)).owner
    held = or_(
        *(
            and_(
                ConversationRow.id == lease.conversation_id,
                ConversationRow.lease_epoch == lease.epoch,
            )
            for lease in leases
        )
    )
    stmt = (
        update(ConversationRow)
        .where(ConversationRow.lease_owner == owner, held)
        .values(lease_until=until)
        .returning(ConversationRow.id)
    )
    return set((await session.execute(stmt)).scalars())


async def still_held(session: AsyncSession, lease: Lease, *, now: datetime) -> bool:
    """The fence of a job's commit: True (and ``updated_at`` touched) if ``lease`` holds."""
    stmt = (
        update(ConversationRow)
        .where(
            ConversationRow.id == lease.conversation_id,
            ConversationRow.lease_owner == lease.owner,
            ConversationRow.lease_epoch == lease.epoch,
        )
        .values(updated_at=now)
    )
    result = await session.execute(stmt)
    return bool(getattr(result, "rowcount", 0))


async def release(session: AsyncSession, lease: Lease) -> bool:
    """Give ``lease`` up if it still holds; False when another holder has it now."""
    stmt = (
        update(ConversationRow)
        .where(
            ConversationRow.id == lease.conversation_id,
            ConversationRow.lease_owner == lease.owner,
            ConversationRow.lease_epoch == lease.epoch,
        )
        .values(lease_owner=None, lease_until=None)
    )
    result = await session.execute(stmt)
    return bool(getattr(result, "rowcount", 0))


async def holder(session: AsyncSession, conversation_id: str) -> str | None:
    """Who holds the conversation's lease now (expired or not), if anyone."""
    stmt = select(ConversationRow.lease_owner).where(ConversationRow.id == conversation_id)
    return (await session.execute(stmt)).scalar_one_or_none()


@dataclass(frozen=True)
class LeaseState:
    """Who holds a conversation's lease (``owner`` None: nobody), at which epoch, until when."""

    owner: str | None
    epoch: int
    until: datetime | None

    def live(self, now: datetime) -> bool:
        """Whether someone holds it and it has not lapsed."""
        return self.owner is not None and self.until is not None and _utc(self.until) > now


async def state(session: AsyncSession, conversation_id: str) -> LeaseState | None:
    """The conversation's lease as it is now; None for an unknown conversation."""
    stmt = select(
        ConversationRow.lease_owner, ConversationRow.lease_epoch, ConversationRow.lease_until
    ).where(ConversationRow.id == conversation_id)
    row = (await session.execute(stmt)).one_or_none()
    return None if row is None else LeaseState(row[0], int(row[1] or 0), row[2])


def _utc(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes for what was stored as UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


# --- the holder of one process's leases ----------------------------------------------


class LeaseStore(Protocol):
    """What :class:`Leases` needs of the store (``conversations.store.Store`` has it)."""

    async def acquire_lease(
        self, conversation_id: str, owner: str, *, ttl: float, dead: str | None = None
    ) -> Lease | None:
        """Take the lease (see :func:`acquire`); None while another live holder has it."""
        ...

    async def renew_leases(self, leases: Collection[Lease], *, ttl: float) -> set[str]:
        """Extend ``leases`` by ``ttl`` seconds; the ids still held."""
        ...

    async def release_lease(self, lease: Lease) -> bool:
        """Give ``lease`` up (see :func:`release`)."""
        ...

    async def lease_owner(self, conversation_id: str) -> str | None:
        """The holder of the conversation's lease, if any."""
        ...


class Leases:
    """The leases one process (``owner``) holds, renewed together by one task.

    ``ttl``: seconds a lease lasts without renewal; :meth:`keep_renewed` renews
    every held lease each third of it, in one statement.
    """

    def __init__(self, *, store: LeaseStore, owner: str, ttl: float) -> None:
        self._store = store
        self.owner = owner
        self.ttl = ttl
        self._held: dict[str, Lease] = {}

    @property
    def held_ids(self) -> frozenset[str]:
        """Ids of the conversations whose lease this process holds now."""
        return frozenset(self._held)

    @contextlib.asynccontextmanager
    async def held(self, conversation_id: str) -> AsyncIterator[Lease]:
        """Hold the conversation's lease for the block; waits while a live process has it.

        Commits made inside the block (and in tasks it starts) are fenced by the
        lease. The lease is released at the end, unless another holder has it by then.
        """
        lease = await self._acquire(conversation_id)
        self._held[conversation_id] = lease
        token = _current.set(lease)
        try:
            yield lease
        finally:
            _current.reset(token)
            self._held.pop(conversation_id, None)
            await asyncio.shield(self._store.release_lease(lease))

    @contextlib.asynccontextmanager
    async def held_now(self, conversation_id: str) -> AsyncIterator[Lease | None]:
        """Like :meth:`held`, without waiting: yields None when a live process has it."""
        dead = await self.dead_holder(conversation_id)
        lease = await self._store.acquire_lease(
            conversation_id, self.owner, ttl=self.ttl, dead=dead
        )
        if lease is None:
            yield None
            return
        self._held[conversation_id] = lease
        token = _current.set(lease)
        try:
            yield lease
        finally:
            _current.reset(token)
            self._held.pop(conversation_id, None)
            await asyncio.shield(self._store.release_lease(lease))

    async def hold(self, conversation_id: str, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work`` holding the conversation's lease (see :meth:`held`)."""
        async with self.held(conversation_id):
            await work()

    async def renew_all(self) -> set[str]:
        """Renew every held lease at once; returns the ids found lost (taken over)."""
        leases = list(self._held.values())
        kept = await self._store.renew_leases(leases, ttl=self.ttl)
        lost = {lease.conversation_id for lease in leases} - kept
        for conversation_id in lost:
            log.warning(
                "lost the lease of conversation %s: another process took it over; "
                "its run here ends at its next commit",
                conversation_id,
            )
        return lost

    async def keep_renewed(self) -> None:
        """Renew the held leases every third of ``ttl`` until cancelled (a supervised task)."""
        while True:
            await asyncio.sleep(self.ttl / 3)
            await self.renew_all()

    async def _acquire(self, conversation_id: str) -> Lease:
        while True:
            dead = await self.dead_holder(conversation_id)
            lease = await self._store.acquire_lease(
                conversation_id, self.owner, ttl=self.ttl, dead=dead
            )
            if lease is not None:
                return lease
            await asyncio.sleep(min(1.0, self.ttl / 3))  # another live process runs it

    async def dead_holder(self, conversation_id: str) -> str | None:
        """The lease holder if it is a process of this host that no longer exists."""
        holder = await self._store.lease_owner(conversation_id)
        host, _, pid = (holder or "").rpartition(":")
        if host != socket.gethostname() or not pid.isdigit():
            return None
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return holder
        except PermissionError:
            return None
        return None
