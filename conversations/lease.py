"""Leases: one process at a time runs a conversation.

A lease is a row lock with an expiry (``conversations.lease_owner`` and
``lease_until``), taken before a job runs and renewed while it runs. The owner is
``host:pid``: a process on the same host takes over the lease of a dead process
at once (it checks the pid), and a lease of another host lapses after ``ttl``
seconds without renewal.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Awaitable, Callable

from conversations.store import Store


class Leases:
    """Holds conversations' leases for one process (``owner``)."""

    def __init__(self, *, store: Store, owner: str, ttl: float) -> None:
        self._store = store
        self._owner = owner
        self._ttl = ttl

    async def hold(self, conversation_id: str, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work`` holding the conversation's lease (one process runs it at a time)."""
        owner, ttl = self._owner, self._ttl
        while True:
            dead = await self.dead_holder(conversation_id)
            if await self._store.acquire_lease(conversation_id, owner, ttl=ttl, dead=dead):
                break
            await asyncio.sleep(min(1.0, ttl / 3))  # another live process runs it
        renew = asyncio.create_task(self._renew(conversation_id, owner, ttl))
        try:
            await work()
        finally:
            renew.cancel()
            await asyncio.shield(self._store.release_lease(conversation_id, owner))

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

    async def _renew(self, conversation_id: str, owner: str, ttl: float) -> None:
        while True:
            await asyncio.sleep(ttl / 3)
            await self._store.acquire_lease(conversation_id, owner, ttl=ttl)
