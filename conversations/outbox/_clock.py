"""Time for the deliverer: a monotonic ``now()`` and an ``async sleep()``, both injectable.

Every wait of the deliverer (a ``Retry-After``, a backoff, the note interval, the
poll timer) goes through one :class:`Clock`, so a test can run those windows in
scaled or virtual time and assert order, never durations.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Monotonic seconds and a way to wait for some of them to pass."""

    def now(self) -> float:
        """Seconds on a monotonic scale (only differences mean anything)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return once ``seconds`` have passed on this clock (at once for 0 or less)."""
        ...


class MonotonicClock:
    """The real clock: :func:`time.monotonic` and :func:`asyncio.sleep`."""

    def now(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep(seconds)`` (0 for a negative value)."""
        await asyncio.sleep(max(seconds, 0.0))


@dataclass(frozen=True)
class _ReadOnlyClock:
    """A bare ``now`` callable (the older ``clock=`` argument), sleeping in real time."""

    read: Callable[[], float]

    def now(self) -> float:
        return self.read()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0))


def as_clock(clock: Clock | Callable[[], float]) -> Clock:
    """``clock`` itself when it is a :class:`Clock`, else a clock reading the callable."""
    if isinstance(clock, Clock):
        return clock
    return _ReadOnlyClock(clock)


async def wait_for_event(clock: Clock, event: asyncio.Event, seconds: float) -> None:
    """Return when ``event`` is set or ``seconds`` of ``clock`` have passed."""
    if event.is_set():
        return
    waiter = asyncio.ensure_future(event.wait())
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait({waiter, sleeper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (waiter, sleeper):
            task.cancel()
        await asyncio.gather(waiter, sleeper, return_exceptions=True)
