"""What every platform runner does with a translated event: cap bot loops, hand it over.

The translators are pure; a runner feeds their events here. :class:`BotCap` drops
another bot's messages in a thread past a cap (two bots answering each other would
never stop), and :func:`hand_over` gives an event to the hub; a failure there is
logged with the event's delivery key and never raised into the SDK's callbacks.
"""

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
    """Counts other bots' messages per thread; past ``cap`` they are dropped (no loops).

    ``thread`` is any hashable the runner picks to name a thread (Slack:
    ``(channel, thread ts or message ts)``; Discord: the thread's id). Counts live
    in memory: a restart starts them again.
    """

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._counts: Counter[Hashable] = Counter()

    def allows(self, event: InboundEvent, thread: Hashable) -> bool:
        """True for people, and for a bot's message while its thread is under the cap."""
        if not event.author.is_bot:
            return True
        self._counts[thread] += 1
        return self._counts[thread] <= self._cap
