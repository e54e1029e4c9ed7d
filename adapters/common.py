"""What the platform runners share: handing events to the hub, the bot-to-bot cap."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Hashable

from conversations.adapter import InboundSink
from conversations.events import InboundEvent

log = logging.getLogger(__name__)


async def hand_over(hub: InboundSink | None, event: InboundEvent) -> None:
    """Give ``event`` to the hub; a failure is logged, never raised into the SDK's loop."""
    if hub is None:
        return
    try:
        await hub.handle(event)
    except Exception:
        log.exception("the hub could not take %s", event.delivery_key)


class BotCap:
    """Counts other bots' messages per thread; past ``cap`` they are dropped (no loops)."""

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._counts: Counter[Hashable] = Counter()

    def allows(self, event: InboundEvent, thread: Hashable) -> bool:
        """True for people, and for a bot's message while its thread is under the cap."""
        if not event.author.is_bot:
            return True
        self._counts[thread] += 1
        return self._counts[thread] <= self._cap
