"""Fenced leases in memory: an owner, an expiry and an epoch on each conversation."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta

from conversations.store.memory._tables import Conversation, Tables, checkpoint
from conversations.store.records import Lease, LeaseState
from conversations.store.schedules import awaits_thread
from core.vocabulary.lifecycle import Lifecycle


class MemoryLeases:
    """:class:`conversations.store.interfaces.LeaseStore` in memory."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    async def acquire_lease(
        self,
        conversation_id: str,
        owner: str,
        *,
        ttl: float,
        now: datetime | None = None,
        dead: str | None = None,
    ) -> Lease | None:
        """Take the lease for ``ttl`` seconds with a new epoch when it is free, expired,
        ``owner``'s or ``dead``'s; None otherwise."""
        await checkpoint()
        now = now or self._t.clock()
        found = self._t.conversations.get(conversation_id)
        if found is None or not _takeable(found, owner, now, dead):
            return None
        found.lease_owner, found.lease_until = owner, now + timedelta(seconds=ttl)
        found.lease_epoch += 1
        return Lease(conversation_id, owner, found.lease_epoch, changed_at=found.updated_at)

    async def renew_leases(
        self, held: Collection[Lease], *, ttl: float, now: datetime | None = None
    ) -> set[str]:
        """Extend ``held`` (one owner's) by ``ttl`` seconds, epoch unchanged; the ids kept."""
        await checkpoint()
        if not held:
            return set()
        owner = next(iter(held)).owner
        until = (now or self._t.clock()) + timedelta(seconds=ttl)
        kept: set[str] = set()
        for lease in held:
            found = self._t.conversations.get(lease.conversation_id)
            if found is not None and (found.lease_owner, found.lease_epoch) == (owner, lease.epoch):
                found.lease_until = until
                kept.add(found.id)
        return kept

    async def release_lease(self, lease: Lease) -> bool:
        """Give ``lease`` up; False when it was no longer held."""
        await checkpoint()
        found = self._t.conversations.get(lease.conversation_id)
        if found is None or (found.lease_owner, found.lease_epoch) != (lease.owner, lease.epoch):
            return False
        found.lease_owner = found.lease_until = None
        return True

    async def take_lapsed(
        self,
        owner: str,
        *,
        ttl: float,
        limit: int,
        lapsed_for: float = 0.0,
        now: datetime | None = None,
    ) -> list[Lease]:
        """Take the lapsed leases of conversations left ``running`` (see the interface)."""
        await checkpoint()
        now = now or self._t.clock()
        lapsed_at = now - timedelta(seconds=lapsed_for)
        lapsed = sorted(
            (
                c
                for c in self._t.conversations.values()
                if c.status.lifecycle is Lifecycle.RUNNING
                and not awaits_thread(c.binding)
                and (
                    c.lease_owner is None
                    or (c.lease_until is not None and c.lease_until < lapsed_at)
                )
            ),
            key=lambda c: c.updated_at,
        )[:limit]
        for found in lapsed:
            found.lease_owner, found.lease_until = owner, now + timedelta(seconds=ttl)
            found.lease_epoch += 1
        return [Lease(c.id, owner, c.lease_epoch, changed_at=c.updated_at) for c in lapsed]

    async def lease_owner(self, conversation_id: str) -> str | None:
        """Who holds the conversation's lease now (expired or not), if anyone."""
        await checkpoint()
        found = self._t.conversations.get(conversation_id)
        return found.lease_owner if found else None

    async def lease_state(self, conversation_id: str) -> LeaseState | None:
        """Who holds the conversation's lease, at which epoch, until when (None: unknown id)."""
        await checkpoint()
        found = self._t.conversations.get(conversation_id)
        if found is None:
            return None
        return LeaseState(found.lease_owner, found.lease_epoch, found.lease_until)


def _takeable(found: Conversation, owner: str, now: datetime, dead: str | None) -> bool:
    holder, until = found.lease_owner, found.lease_until
    expired = until is not None and until < now
    return holder is None or holder == owner or expired or (dead is not None and holder == dead)
