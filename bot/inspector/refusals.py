"""Refused sign-ins counted, so a token cannot be guessed at the speed of the network
(docs/architecture.md, "The run inspector").

:class:`Refusals` counts, in this process's memory, the refused sign-ins of each key (the
sign-in uses two: the client's address and the operator name given). A key with
:data:`LIMIT` refusals within :data:`WINDOW` is limited until the oldest of them is
older than the window: the sign-in then answers 429 with ``Retry-After`` without checking
the token. A sign-in that succeeds forgets its keys' refusals. Each instance counts its
own (a load balancer spreading the tries over N instances allows N times as many), which
still makes guessing a random token hopeless (https://cheatsheetseries.owasp.org/cheatsheets/Authentication_Cheat_Sheet.html,
"Protect Against Automated Attacks").
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from datetime import datetime, timedelta

LIMIT = 5
"""Refused sign-ins of one key within :data:`WINDOW` after which it is limited."""
WINDOW = timedelta(minutes=1)
"""How long a refused sign-in counts."""
KEYS = 10_000
"""The keys kept at most; past it, the ones refused longest ago are forgotten first."""


class Refusals:
    """Refused sign-ins per key, the newest :data:`LIMIT` of each (see the module
    docstring). ``limit``, ``window`` and ``keys``: :data:`LIMIT`, :data:`WINDOW`,
    :data:`KEYS` unless given. Times are aware UTC datetimes (the inspector's clock)."""

    def __init__(self, *, limit: int = LIMIT, window: timedelta = WINDOW, keys: int = KEYS) -> None:
        self.limit = limit
        self.window = window
        self._keys = keys
        self._times: dict[str, deque[datetime]] = {}
        self._told: set[str] = set()

    def wait(self, keys: Iterable[str], at: datetime) -> int | None:
        """Whole seconds (1 at least) until a sign-in of ``keys`` is checked again, when one
        of them is limited at ``at``; None when none is."""
        lefts = [self._times[key][0] + self.window - at for key in keys if self._limited(key, at)]
        return max(1, math.ceil(max(lefts).total_seconds())) if lefts else None

    def first_told(self, keys: Iterable[str], at: datetime) -> bool:
        """Whether a key of ``keys`` is limited at ``at`` and this is the first time it is
        asked since its limit began: True once per limit, so a limit is audited once,
        not at every try it refuses."""
        new = [key for key in keys if self._limited(key, at) and key not in self._told]
        self._told.update(new)
        return bool(new)

    def refused(self, keys: Iterable[str], at: datetime) -> None:
        """Count a refused sign-in of ``keys`` at ``at``."""
        for key in keys:
            times = self._times.pop(key, None) or deque(maxlen=self.limit)
            times.append(at)
            self._times[key] = times  # last in the dict: refused most recently
        self._forget(at)

    def succeeded(self, keys: Iterable[str]) -> None:
        """A sign-in of ``keys`` succeeded: their refusals no longer count."""
        for key in keys:
            self._times.pop(key, None)
            self._told.discard(key)

    def _limited(self, key: str, at: datetime) -> bool:
        """Whether ``key`` has :attr:`limit` refusals within the window before ``at`` (its
        deque keeps the newest :attr:`limit`, so the first is the oldest that counts)."""
        times = self._times.get(key)
        if times is None:
            return False
        while times and times[0] <= at - self.window:
            times.popleft()
        if len(times) < self.limit:
            self._told.discard(key)  # the limit, if any, is over: a new one is told again
            return False
        return True

    def _forget(self, at: datetime) -> None:
        """Drop the keys with no refusal within the window; then, past ``keys`` of them,
        those refused longest ago."""
        if len(self._times) <= self._keys:
            return
        stale = [
            k for k, times in self._times.items() if not times or times[-1] <= at - self.window
        ]
        for key in stale:
            del self._times[key]
            self._told.discard(key)
        while len(self._times) > self._keys:
            key = next(iter(self._times))
            del self._times[key]
            self._told.discard(key)
