"""Fenced leases in SQL: three columns of ``conversations`` (see :mod:`conversations.store.leases`).

``lease_owner``, ``lease_until`` (UTC) and ``lease_epoch``. Each statement is one
``UPDATE ... WHERE`` that checks and changes the lease at once, so two processes
never both take it: the epoch goes up on every acquisition, and a fenced commit
checks ``lease_owner = :owner AND lease_epoch = :epoch`` in the ``UPDATE`` of the
conversation its transaction makes (``conversations.store.sql.journal``).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, tuple_, update
from sqlalchemy.orm import Session

from conversations.store.records import Lease, LeaseState, as_utc
from conversations.store.schedules import UNBOUND
from conversations.store.schema import ConversationRow, utcnow
from conversations.store.sql.database import Database, changed
from core.vocabulary.lifecycle import Lifecycle


class SqlLeases:
    """:class:`conversations.store.interfaces.LeaseStore` on the ``conversations`` table."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def acquire_lease(
        self,
        conversation_id: str,
        owner: str,
        *,
        ttl: float,
        now: datetime | None = None,
        dead: str | None = None,
    ) -> Lease | None:
        """Take the lease for ``ttl`` seconds with a new epoch (see the interface): one
        statement on its own (:meth:`Database.write_alone`)."""
        now = now or utcnow()
        until = now + timedelta(seconds=ttl)
        stmt = acquire_statement(conversation_id, owner, until=until, now=now, dead=dead)
        return await self._db.write_alone(
            stmt, lambda result: lease_taken(conversation_id, owner, result.one_or_none())
        )

    async def renew_leases(
        self, held: Collection[Lease], *, ttl: float, now: datetime | None = None
    ) -> set[str]:
        """Extend ``held`` (one owner's) by ``ttl`` seconds, epoch unchanged; the ids kept."""
        if not held:
            return set()
        until = (now or utcnow()) + timedelta(seconds=ttl)
        # not queued behind the runs' commits: a renewal that comes late lets it lapse
        return await self._db.write_beside(lambda session: renew(session, held, until=until))

    async def release_lease(self, lease: Lease) -> bool:
        """Give ``lease`` up; False when it was no longer held (taken over meanwhile)."""
        return await self._db.write(lambda session: release(session, lease))

    async def take_lapsed(
        self,
        owner: str,
        *,
        ttl: float,
        limit: int,
        lapsed_for: float = 0.0,
        now: datetime | None = None,
    ) -> list[Lease]:
        """Take the lapsed leases of conversations left ``running`` (see the interface):
        one ``UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED)`` (SQLite has
        no row locks and renders no ``FOR UPDATE``: its write lock serialises takers)."""
        now = now or utcnow()
        lapsed = (
            select(ConversationRow.id)
            .where(
                ConversationRow.lifecycle == Lifecycle.RUNNING.value,
                ConversationRow.lease_owner.is_(None)
                | (ConversationRow.lease_until < now - timedelta(seconds=lapsed_for)),
                ~ConversationRow.thread.startswith(UNBOUND, autoescape=True),  # a fork's, waiting
            )
            .order_by(ConversationRow.updated_at)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        ids: Any = lapsed
        if self._db.engine.dialect.name == "postgresql":
            locked = lapsed.cte("lapsed").prefix_with("MATERIALIZED")  # locked once, then read
            ids = select(locked.c.id)
        stmt = (
            update(ConversationRow)
            .where(ConversationRow.id.in_(ids))
            .values(
                lease_owner=owner,
                lease_until=now + timedelta(seconds=ttl),
                lease_epoch=ConversationRow.lease_epoch + 1,
            )
            .returning(ConversationRow.id, ConversationRow.lease_epoch, ConversationRow.updated_at)
        )
        return await self._db.write_alone(
            stmt,
            lambda result: [_taken(owner, row) for row in result],
        )

    async def lease_owner(self, conversation_id: str) -> str | None:
        """Who holds the conversation's lease now (expired or not), if anyone."""
        stmt = select(ConversationRow.lease_owner).where(ConversationRow.id == conversation_id)
        async with self._db.read() as session:
            return (await session.execute(stmt)).scalar_one_or_none()

    async def lease_state(self, conversation_id: str) -> LeaseState | None:
        """Who holds the conversation's lease, at which epoch, until when (None: unknown id)."""
        stmt = select(
            ConversationRow.lease_owner, ConversationRow.lease_epoch, ConversationRow.lease_until
        ).where(ConversationRow.id == conversation_id)
        async with self._db.read() as session:
            row = (await session.execute(stmt)).one_or_none()
            return None if row is None else LeaseState(row[0], int(row[1] or 0), row[2])


# --- statements (run inside the store's write transactions) ---------------------------


def acquire_statement(
    conversation_id: str,
    owner: str,
    *,
    until: datetime,
    now: datetime,
    dead: str | None,
) -> Any:
    """The ``UPDATE`` that takes the lease if it is free, expired, ``owner``'s own or
    ``dead``'s, bumping the epoch; it returns the epoch and the conversation's last
    change (:func:`lease_taken` reads them)."""
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
        .returning(ConversationRow.lease_epoch, ConversationRow.updated_at)
    )
    return stmt


def _taken(owner: str, row: Any) -> Lease:
    """A lease :meth:`SqlLeases.take_lapsed` took, from a row it returned."""
    return Lease(row[0], owner, int(row[1]), changed_at=as_utc(row[2]))


def lease_taken(conversation_id: str, owner: str, row: Any) -> Lease | None:
    """The lease :func:`acquire_statement` took, from the row it returned (None: not taken)."""
    if row is None:
        return None
    return Lease(conversation_id, owner, int(row[0]), changed_at=as_utc(row[1]))


RENEW_BATCH = 1000
"""Leases renewed per statement: SQLite allows 32,766 parameters per statement
(https://www.sqlite.org/limits.html, "Maximum Number Of Host Parameters")."""


def renew(session: Session, leases: Collection[Lease], *, until: datetime) -> set[str]:
    """Extend ``leases`` (all of one owner) to ``until``; returns the ids still held.

    One ``UPDATE ... WHERE (id, lease_epoch) IN (...)`` per :data:`RENEW_BATCH`
    leases (an ``OR`` per lease grew past SQLite's expression depth of 1,000 with
    a few hundred held).
    """
    if not leases:
        return set()
    owner = next(iter(leases)).owner
    pairs = [(lease.conversation_id, lease.epoch) for lease in leases]
    kept: set[str] = set()
    for start in range(0, len(pairs), RENEW_BATCH):
        stmt = (
            update(ConversationRow)
            .where(
                ConversationRow.lease_owner == owner,
                tuple_(ConversationRow.id, ConversationRow.lease_epoch).in_(
                    pairs[start : start + RENEW_BATCH]
                ),
            )
            .values(lease_until=until)
            .returning(ConversationRow.id)
        )
        kept.update((session.execute(stmt)).scalars())
    return kept


def release(session: Session, lease: Lease) -> bool:
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
    return bool(changed(session.execute(stmt)))
