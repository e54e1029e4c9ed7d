"""The ``Usage`` interface of the store: price entries, model calls, spend and reports.

Every model call is a row written with its assistant turn (the journal's commit);
this interface reads them back: what a channel spent (for its daily budget), the
report of ``threadbot usage``, and the dated price entries calls are costed with.
Taken by the bot (at start: :meth:`Usage.sync_prices`; per run: the channel's
spend) and by the ``threadbot usage`` command.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from core.pricing import Price, Rates, Spend

Grouping = Literal["conversation", "channel", "day", "model", "role"]
"""What a usage report's lines are per: a conversation (its id), a channel
(``platform:workspace:channel``, a Discord thread counted in its channel), a UTC
day (``YYYY-MM-DD``), a model id or a model role (``planner``, ``executor``,
``expert``; :data:`NO_ROLE` for calls recorded before roles were)."""

NO_ROLE = "(none)"
"""A report's key for the calls recorded without a role (before migration 0012)."""


@dataclass(frozen=True)
class UsageLine:
    """One line of a usage report: its key (see :data:`Grouping`), the number of model
    calls, their tokens of each kind as the API reported them, and their cost in µ$
    (the priced calls'; ``unpriced`` calls had no price entry)."""

    key: str
    calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_micro_usd: int
    unpriced: int

    @property
    def tokens(self) -> int:
        """Every token of the line's calls."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )


class Usage(Protocol):
    """Price entries and model calls (the ``prices`` and ``model_calls`` tables)."""

    async def sync_prices(self, sheet: Mapping[str, Rates], now: datetime) -> dict[str, Price]:
        """The current price entry of each model of ``sheet``: its newest entry when the
        rates are the same, else a new entry dated ``now``. Entries are never changed."""
        ...

    async def prices(self) -> list[Price]:
        """Every price entry, oldest first."""
        ...

    async def channel_spend(self, conversation_id: str, since: datetime) -> Spend:
        """What every model call since ``since`` in the channel of ``conversation_id``
        spent (a Discord thread counts in the channel it was started in). Raises
        :class:`core.vocabulary.errors.ConversationNotFound`."""
        ...

    async def report(self, by: Grouping, since: datetime | None = None) -> list[UsageLine]:
        """Tokens and cost of the model calls made at ``since`` or later (all without),
        one line per ``by`` key, sorted by key."""
        ...


def channel_key(platform: str, workspace: str, channel: str) -> str:
    """A report's key of a channel: ``platform:workspace:channel``."""
    return f"{platform}:{workspace}:{channel}"
