"""What every kind of request needs when it opens: an id and its times.

The id and the time come from the run context (:mod:`core.context`), never from
the wall clock or a random source directly, so a test that sets the clock and
the id source gets the same requests every time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from core.context import RunContext


@dataclass(frozen=True, kw_only=True)
class Opening:
    """Ids and times of new requests: the run context and a request's lifetime.

    ``ttl``: seconds a request waits before it expires (the conversation's setting);
    its one reminder comes at half of it.
    """

    context: RunContext
    ttl: float

    def new_id(self) -> str:
        """A new request id from the context's id source."""
        return self.context.new_id()

    def times(self) -> tuple[datetime, datetime]:
        """``(expires_at, remind_at)`` of a request opened now (timezone-aware UTC)."""
        now = self.context.now()
        ttl = timedelta(seconds=self.ttl)
        return now + ttl, now + ttl / 2
