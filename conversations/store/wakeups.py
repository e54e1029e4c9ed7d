"""Wake-ups: one instance tells another, at once, that something in the store is for it.

With several instances on one database (docs/architecture.md, "Several instances"),
what one receives may be for a run another holds: a stop, a reply in the thread, or
outbox rows whose delivery claim the other holds. The store holds the thing itself (a
stop request, an unjournaled delivery, a pending row); a wake-up only tells the
instance to look now rather than at its next poll. On PostgreSQL it is a
``NOTIFY`` on one channel, heard on a connection that ``LISTEN``\\ s
(:mod:`conversations.store.sql.wakeups`); on SQLite nothing carries it (``carried``
False) and the instances' polls every ``wakeup_poll`` seconds are the only way; in
memory, it reaches the listeners of the same store (tests of several hubs in one
process). A wake-up lost (a reconnect) is found by the next poll: nothing depends on
one arriving.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

__all__ = ["Listener", "Topic", "Unheard", "Wakeup", "Wakeups"]

CHANNEL = "threadbot_wakeups"
"""The PostgreSQL ``NOTIFY`` channel."""


class Topic(StrEnum):
    """What to look at: a stop request aimed at a run held here, a reply for a run held
    here, outbox rows of a conversation whose delivery claim is held here, or a slot
    granted to a run or step waiting here (:mod:`conversations.slots`)."""

    STOP = "stop"
    INBOX = "inbox"
    OUTBOX = "outbox"
    SLOT = "slot"


@dataclass(frozen=True)
class Wakeup:
    """``topic`` of conversation ``conversation_id``, told by instance ``origin``."""

    topic: Topic
    conversation_id: str
    origin: str

    def payload(self) -> str:
        """As sent (JSON, well under PostgreSQL's 8,000-byte ``NOTIFY`` payload)."""
        return json.dumps({"t": self.topic.value, "c": self.conversation_id, "o": self.origin})

    @classmethod
    def parse(cls, payload: str) -> Wakeup | None:
        """A payload :meth:`payload` made; None for anything else (ignored)."""
        try:
            data = json.loads(payload)
            return cls(Topic(data["t"]), str(data["c"]), str(data["o"]))
        except (ValueError, KeyError, TypeError):
            return None


Listener = Callable[[Wakeup], None]
"""Called with each wake-up heard (in the event loop; it must not block)."""


class Wakeups(Protocol):
    """How the instances on one database tell each other (see the module docstring)."""

    @property
    def carried(self) -> bool:
        """Whether a wake-up reaches the other instances (False: polls alone do)."""
        ...

    async def tell(self, wakeup: Wakeup) -> None:
        """Send ``wakeup`` to every instance listening (its sender included)."""
        ...

    async def listen(self, listener: Listener, reconnected: Callable[[], None]) -> None:
        """Hear wake-ups until cancelled, calling ``listener`` with each; a connection
        lost is made again (logged; tried again after 1, 2, 4... seconds, at most 30),
        and ``reconnected`` called then: what was told meanwhile is lost, the caller
        looks at the store."""
        ...


class Unheard:
    """:class:`Wakeups` where nothing carries them (SQLite): the polls find everything."""

    carried = False

    async def tell(self, wakeup: Wakeup) -> None:
        """Nothing to send."""

    async def listen(self, listener: Listener, reconnected: Callable[[], None]) -> None:
        """Nothing to hear: waits until cancelled."""
        await asyncio.Event().wait()


class InProcess:
    """:class:`Wakeups` between the listeners of one store in one process (memory)."""

    carried = True

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    async def tell(self, wakeup: Wakeup) -> None:
        """Call every listener with ``wakeup``, soon (not within this call)."""
        loop = asyncio.get_running_loop()
        for listener in list(self._listeners):
            loop.call_soon(listener, wakeup)

    async def listen(self, listener: Listener, reconnected: Callable[[], None]) -> None:
        """Hear until cancelled."""
        self._listeners.append(listener)
        try:
            await asyncio.Event().wait()
        finally:
            self._listeners.remove(listener)
