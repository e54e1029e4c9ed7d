"""The inbound events a hub is handling: numbered as they come, counted until done.

The number orders a stop against the events before it
(:func:`conversations.queue.arriving`). The count lets a graceful shutdown wait for
the events on their way before the runs stop and the store closes: the adapters stop
receiving first, but an event that came just before is still being recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator

from conversations.queue import arriving

log = logging.getLogger("conversations.hub")


class InFlight:
    """How many events the hub is handling now (:meth:`track` around each)."""

    def __init__(self) -> None:
        self.count = 0
        """Events being handled now."""
        self._none = asyncio.Event()
        self._none.set()

    @contextlib.contextmanager
    def track(self) -> Iterator[None]:
        """Number one event as it comes and count it until it has been handled."""
        self.count += 1
        self._none.clear()
        try:
            with arriving():
                yield
        finally:
            self.count -= 1
            if not self.count:
                self._none.set()

    async def finished(self, grace: float) -> None:
        """Wait until no event is being handled, ``grace`` seconds at most (logged when
        there is one to wait for)."""
        if not self.count:
            return
        log.info("shutting down: %d event(s) still being handled", self.count)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._none.wait(), grace)
