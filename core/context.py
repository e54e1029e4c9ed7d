"""The run context: where threadbot gets the time and new ids.

Decision code never reads the wall clock or draws a random id itself: it asks a
:class:`RunContext` (a clock and an id source), which tests replace with a
:class:`ManualClock` and :class:`CountingIds`, so a decision made twice from the
same journal comes out the same (Temporal's ``workflow.now()`` and
``workflow.uuid4()`` in ``workflow/_context.py`` are the model). This module is
the one place that reads the wall clock (:func:`now`) and draws random ids
(:func:`random_id`); a test walks the code to keep it so
(``tests/test_architecture.py``).

Everything outside a run that needs the time (the store's row stamps, the
sweeper, leases) calls :func:`now` too, or takes a clock that defaults to it.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta


def now() -> datetime:
    """The wall clock: the current time, timezone-aware UTC."""
    return datetime.now(UTC)


def random_id(length: int = 32) -> str:
    """A new random id of ``length`` lowercase hex digits (1 to 32; a UUID4's)."""
    if not 1 <= length <= 32:
        raise ValueError("an id has 1 to 32 hex digits")
    return uuid.uuid4().hex[:length]


REQUEST_ID_LENGTH = 12
"""Hex digits of a pending request's id (short enough for a button's payload)."""


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """The clock and id source of the engine's decisions.

    ``clock()`` returns the current time (timezone-aware UTC); ``ids()`` a new
    unique id (:data:`REQUEST_ID_LENGTH` hex digits by default). Both default to
    the wall clock and random ids; tests pass a :class:`ManualClock` and
    :class:`CountingIds`. ``sleep(seconds)`` waits (a tool call's retry delay,
    :mod:`core.retry`); ``asyncio.sleep`` by default, and a test passes one that
    records the delays and returns at once.
    """

    clock: Callable[[], datetime] = now
    ids: Callable[[], str] = field(default=lambda: random_id(REQUEST_ID_LENGTH))
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def now(self) -> datetime:
        """The current time by this context's clock."""
        return self.clock()

    def new_id(self) -> str:
        """A new id from this context's id source."""
        return self.ids()


WALL = RunContext()
"""The context of a running bot: the wall clock and random ids."""


class ManualClock:
    """A clock that stands still until a test moves it (timezone-aware UTC).

    Call it for the time; :meth:`advance` it by seconds. Starts at ``start``, by
    default 2026-01-01 00:00 UTC.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> datetime:
        """Move the clock ``seconds`` forward; returns the new time."""
        self._now += timedelta(seconds=seconds)
        return self._now


class CountingIds:
    """Ids ``<prefix>1``, ``<prefix>2``, ... in order, for tests."""

    def __init__(self, prefix: str = "id") -> None:
        self._prefix = prefix
        self._numbers = itertools.count(1)

    def __call__(self) -> str:
        return f"{self._prefix}{next(self._numbers)}"
