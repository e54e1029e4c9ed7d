"""Fault injection: make the process die at a named point, for crash tests.

Set ``THREADBOT_FAULT`` (see the README) to ``POINT`` or ``POINT:N`` (die the N-th
time the point is reached, default 1), several separated by commas. The process
then sends itself SIGKILL: no cleanup, no ``finally``, exactly like a crash or an
out-of-memory kill. Points:

- ``after_tool_result``: a tool call's result and record were committed;
- ``after_model_response``: a model turn (and its tool records) was committed,
  before any of its tools ran;
- ``after_platform_accept``: an adapter accepted an outbound message, before its
  platform message id was stored;
- ``after_ddl``: a schema migration ran a DDL statement (``CREATE``, ``ALTER`` or
  ``DROP``), before its transaction committed (``conversations/store/migrate.py``);
- ``after_tool_attempt``: a failed attempt of a tool call that its retry policy tries
  again was committed (``core/run/tool_step.py``), before the wait for the next one;
- ``after_scope_entered``: a nested scope was entered and its entry committed
  (``core/run/steps.py``, ``InScope``), before anything in it ran.

With no setting, :meth:`Faults.hit` does nothing.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

POINTS = frozenset(
    {
        "after_tool_result",
        "after_model_response",
        "after_platform_accept",
        "after_ddl",
        "after_tool_attempt",
        "after_scope_entered",
    }
)


class Faults:
    """Parsed fault settings; raises ``ValueError`` for an unknown point or count."""

    def __init__(self, spec: str = "") -> None:
        self._at: dict[str, int] = {}
        self._seen: Counter[str] = Counter()
        for part in filter(None, (p.strip() for p in spec.split(","))):
            name, _, count = part.partition(":")
            if name not in POINTS:
                raise ValueError(f"unknown fault point {name!r}; known: {sorted(POINTS)}")
            if count and not count.isdigit():
                raise ValueError(f"fault count must be a whole number: {part!r}")
            self._at[name] = int(count or 1)

    def hit(self, point: str) -> None:
        """Die with SIGKILL if ``point`` is armed and reached for the configured time."""
        if point not in self._at:
            return
        self._seen[point] += 1
        if self._seen[point] == self._at[point]:
            os.kill(os.getpid(), signal.SIGKILL)


NO_FAULTS = Faults()
