"""Owners of leases and delivery claims: whether one is gone, and taking from one that is.

An owner is a process's instance name: ``host:pid`` by default
(:func:`conversations.hub.default_instance`), or ``THREADBOT_INSTANCE``. For a
``host:pid`` of this host, whether the process still exists can be checked at once
(:func:`holder_gone`); for another host or an instance name, only the expiry of what
it holds tells. :func:`taken_unless_alive` is the one way a run's lease
(:mod:`conversations.store.leases`) and a delivery claim
(:mod:`conversations.outbox._claims`) are taken: free, lapsed or one's own at once,
from a gone process of this host too.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["holder_gone", "taken_unless_alive"]

T = TypeVar("T")


async def taken_unless_alive(
    take: Callable[[str | None], Awaitable[T | None]],
    holder: Callable[[], Awaitable[str | None]],
) -> T | None:
    """Take something held by one process at a time (a run's lease, a delivery claim):
    ``take(None)`` takes it if it is free, lapsed or already the caller's; failing that,
    if its ``holder()`` is a process of this host that no longer exists
    (:func:`holder_gone`), ``take(holder)`` takes it from that dead process. One write
    in the usual case (no read of the holder first); None when a live process holds it."""
    taken = await take(None)
    if taken is not None:
        return taken
    owner = await holder()
    if owner is None or not holder_gone(owner):
        return None
    return await take(owner)


def holder_gone(owner: str) -> bool:
    """Whether ``owner`` (``host:pid``) is a process of this host that no longer exists.

    False for a live process, for another host and for an instance name
    (``THREADBOT_INSTANCE``): only the expiry of its lease tells that it is gone.
    """
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
