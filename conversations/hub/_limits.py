"""The limits step: a person over a channel's per-user limit starts nothing.

A channel's settings may cap how many conversations one person has going at once
(running or waiting for a person) and how many one person starts per hour
(:class:`conversations.channels.ChannelSettings`). A mention over a limit opens no
conversation: the bot says so in the mention's thread, and the delivery is
recorded like any other (a redelivery says nothing twice).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from conversations.channels import ChannelLookup
from conversations.hub._chain import Inbound, Next, Open, Respond
from conversations.store import Threads

HOUR = timedelta(hours=1)


class Limits:
    """Turns a mention over its channel's limits into a :class:`Respond` in its thread.

    ``clock``: the current time, timezone-aware UTC (the store's clock).
    """

    def __init__(
        self, *, threads: Threads, channels: ChannelLookup, clock: Callable[[], datetime]
    ) -> None:
        self._threads = threads
        self._channels = channels
        self._clock = clock

    async def __call__(self, inbound: Inbound, next: Next) -> None:
        """Check an :class:`Open` against its channel's limits; then go on."""
        intent = inbound.intent
        if isinstance(intent, Open):
            over = await self._over(intent)
            if over is not None:
                inbound.intent = Respond(intent.binding, over)
        await next()

    async def _over(self, intent: Open) -> str | None:
        """What to say when the mention's author is over a limit, else None."""
        channel = self._channels(intent.binding)
        runs, per_hour = channel.user_runs, channel.user_mentions_per_hour
        if runs is None and per_hour is None:
            return None
        who = intent.event.author
        active, started = await self._threads.started_by(
            platform=intent.binding.platform,
            requester_id=who.id,
            since=self._clock() - HOUR,
        )
        if runs is not None and active >= runs:
            return (
                f"{who.name}, you have {active} conversations going, and {runs} at once is "
                "the limit here: I started nothing. Finish or stop one, then ask again."
            )
        if per_hour is not None and started >= per_hour:
            return (
                f"{who.name}, you started {started} conversations in the last hour, and "
                f"{per_hour} an hour is the limit here: I started nothing. Ask again later."
            )
        return None
