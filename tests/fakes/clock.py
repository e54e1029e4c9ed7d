"""Clocks for tests: virtual time that passes when the test says, or real time scaled up.

Both have ``now()`` and ``async sleep(seconds)`` (the deliverer's
:class:`conversations.outbox.Clock`) and are callable for ``now`` (what
``FakeSlackApi(clock=...)`` and ``bot.app.build(clock=...)`` take), so the bot and
the fake platform share one time line::

    clock = VirtualClock()
    async with FakeSlackApi(clock=clock) as api:
        api.rate_limit_window("chat.update", seconds=45)  # 45 virtual seconds
        ...
        await clock.run(deliverer.drain())  # time jumps from one sleeper to the next

Tests assert order, never durations: virtual time only moves forward to the next
sleeper's deadline while the awaited work is not done.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

TICK = 0.005
"""Real seconds the event loop gets between two jumps of virtual time."""


class VirtualClock:
    """Time that stands still until :meth:`advance` or :meth:`run` moves it."""

    def __init__(self, start: float = 1_000.0) -> None:
        self._now = start
        self._order = itertools.count()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []

    def now(self) -> float:
        """Virtual seconds."""
        return self._now

    __call__ = now

    async def sleep(self, seconds: float) -> None:
        """Return once virtual time has passed ``now() + seconds`` (yields once for 0)."""
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        wake: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._order), wake))
        await wake

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` and wake the sleepers whose time has come."""
        self._now += seconds
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, wake = heapq.heappop(self._sleepers)
            if not wake.done():
                wake.set_result(None)

    def next_deadline(self) -> float | None:
        """When the earliest sleeper still waiting wakes, if any."""
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)
        return self._sleepers[0][0] if self._sleepers else None

    async def run(self, work: Awaitable[T], *, within: float = 30.0) -> T:
        """Await ``work`` while jumping time to the next deadline whenever the loop idles.

        Fails with ``TimeoutError`` after ``within`` real seconds.
        """
        task = asyncio.ensure_future(work)
        async with asyncio.timeout(within):
            while not task.done():
                await asyncio.wait({task}, timeout=TICK)
                deadline = self.next_deadline()
                if not task.done() and deadline is not None:
                    self.advance(max(deadline - self._now, 0.0))
        return task.result()

    async def until(self, condition: Callable[[], object], *, within: float = 30.0) -> None:
        """Jump time as :meth:`run` does until ``condition()`` is true (sync or async)."""

        async def met() -> None:
            while True:
                value = condition()
                if asyncio.iscoroutine(value):
                    value = await value
                if value:
                    return
                await asyncio.sleep(TICK)

        await self.run(met(), within=within)


class ScaledClock:
    """Real time, ``factor`` times faster: ``sleep(45)`` takes 1 s at ``factor=45``."""

    def __init__(self, factor: float, start: float = 1_000.0) -> None:
        self.factor = factor
        self._origin = time.monotonic()
        self._start = start

    def now(self) -> float:
        """Scaled seconds since the clock was made, from ``start``."""
        return self._start + (time.monotonic() - self._origin) * self.factor

    __call__ = now

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds / factor`` real seconds."""
        await asyncio.sleep(max(seconds, 0.0) / self.factor)
