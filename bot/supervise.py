"""Supervised background work: a task that fails is logged and restarted with backoff.

Every long-running task of the bot (the deliverer, the sweeper, the lease
renewal, the platform connections) runs under :func:`supervised`. A failure is
logged with its traceback and the task is started again after an exponentially
growing pause; a task that fails more than ``Backoff.limit`` times within
``Backoff.window`` seconds makes :func:`supervised` raise
:class:`bot.errors.GaveUp`, which ends the process with a non-zero exit code and
the reason (a bot that silently stopped delivering would be worse). The shape
follows Erlang/OTP supervisors' restart intensity (``MaxR`` restarts in
``MaxT`` seconds: https://www.erlang.org/doc/system/sup_princ.html).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.errors import GaveUp

log = logging.getLogger(__name__)

Factory = Callable[[], Awaitable[None]]
"""Starts the task afresh: called again for each restart."""


@dataclass(frozen=True, kw_only=True)
class Backoff:
    """How a supervised task is restarted.

    The first restart waits ``first`` seconds, each next one ``factor`` times
    longer, at most ``longest``; a task that had been up for ``window`` seconds
    starts from ``first`` again. More than ``limit`` restarts within ``window``
    seconds give up.
    """

    first: float = 0.5
    factor: float = 2.0
    longest: float = 30.0
    limit: int = 5
    window: float = 300.0


async def supervised(
    name: str,
    factory: Factory,
    backoff: Backoff,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    transient: Callable[[BaseException], bool] = lambda _error: False,
) -> None:
    """Run ``factory()`` until it returns, restarting it after each failure.

    Returns when the task returns; cancellation passes through. Raises
    :class:`GaveUp` (from the last failure) past the restart limit. A failure
    ``transient`` says is an outage outside the bot (the database unreachable:
    :func:`conversations.store.sql.failures.unreachable`) is retried with the same
    growing pause, at most ``longest`` apart, for as long as it lasts, and never counts
    toward the limit: an outage of a minute must not end every instance at once, while
    ``/readyz`` says what is wrong (docs/architecture.md, "Operating threadbot").
    """
    failures: deque[float] = deque()
    delay = backoff.first
    while True:
        started = clock()
        try:
            await factory()
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            now = clock()
            if now - started >= backoff.window:
                delay = backoff.first  # it had been healthy for a while
            if transient(exc):
                log.warning("%s failed: %s; retrying in %.1f s", name, exc, delay)
                await sleep(delay)
                delay = min(delay * backoff.factor, backoff.longest)
                continue
            failures.append(now)
            while failures and now - failures[0] > backoff.window:
                failures.popleft()
            restarts = len(failures) - 1
            if restarts >= backoff.limit:
                log.critical("%s failed again; giving up", name, exc_info=exc)
                raise GaveUp(name, restarts=restarts, window=backoff.window, error=exc) from exc
            log.error("%s failed; restarting it in %.1f s", name, delay, exc_info=exc)
            await sleep(delay)
            delay = min(delay * backoff.factor, backoff.longest)
