"""Delivery claims in memory: an owner, an expiry and an epoch on each conversation
(:mod:`conversations.store.claims`)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta

from conversations.store.claims import Claim
from conversations.store.memory._tables import Tables, checkpoint


class MemoryClaims:
    """:class:`conversations.store.claims.DeliveryClaims` in memory."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    async def claim_delivery(
        self,
        conversation_id: str,
        owner: str,
        *,
        ttl: float,
        now: datetime | None = None,
        dead: str | None = None,
    ) -> Claim | None:
        """Take the claim for ``ttl`` seconds with a new epoch when it is free, lapsed,
        ``owner``'s or ``dead``'s; None otherwise."""
        await checkpoint()
        now = now or self._t.clock()
        found = self._t.conversations.get(conversation_id)
        if found is None:
            return None
        holder, until = found.delivery_owner, found.delivery_until
        if holder not in (None, owner, dead) and until is not None and until >= now:
            return None
        found.delivery_owner, found.delivery_until = owner, now + timedelta(seconds=ttl)
        found.delivery_epoch += 1
        return Claim(conversation_id, owner, found.delivery_epoch, holder not in (None, owner))

    async def release_claims(self, held: Collection[Claim]) -> None:
        """Give ``held`` up; those taken over meanwhile are left alone."""
        await checkpoint()
        for claim in held:
            found = self._t.conversations.get(claim.conversation_id)
            if found is not None and (found.delivery_owner, found.delivery_epoch) == (
                claim.owner,
                claim.epoch,
            ):
                found.delivery_owner = found.delivery_until = None

    async def claim_owner(self, conversation_id: str) -> str | None:
        """Who holds the conversation's delivery claim now (lapsed or not), if anyone."""
        await checkpoint()
        found = self._t.conversations.get(conversation_id)
        return found.delivery_owner if found else None
