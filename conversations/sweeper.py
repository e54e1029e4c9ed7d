"""One sweeper for reminders and expiry of pending requests (DESIGN.md).

It reads the store for requests whose reminder or expiry time has come; no task
sleeps per request. Its clock is a parameter, so tests move time forward and call
:meth:`Sweeper.sweep_once`. A reminder is posted once (compare-and-set on
``reminded_at``); an expiry goes through the conversation's queue like any input.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from conversations.store import Store
from core.engine import Engine

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


class Sweeper:
    """Posts reminders at half a request's lifetime and expires it at the end."""

    def __init__(
        self,
        *,
        store: Store,
        engine: Engine,
        expire: Callable[[str, str], Awaitable[None]],
        clock: Clock = utc_now,
        interval: float = 30.0,
    ) -> None:
        self._store = store
        self._engine = engine
        self._expire = expire
        self._clock = clock
        self._interval = interval

    async def run(self) -> None:
        """Sweep every ``interval`` seconds until cancelled."""
        while True:
            try:
                await self.sweep_once()
            except Exception:
                log.exception("sweeping pending requests failed")
            await asyncio.sleep(self._interval)

    async def sweep_once(self) -> int:
        """Handle every due request now; returns how many were handled."""
        now = self._clock()
        due = await self._store.due_requests(now)
        for request in due:
            if request.expired:
                await self._expire(request.conversation_id, request.request_id)
            elif await self._store.mark_reminded(request.request_id, now):
                await self._engine.remind(request.conversation_id, request.request_id)
        return len(due)
