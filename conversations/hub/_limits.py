"""The limits step: a person over a channel's per-user limit starts nothing.

A channel's settings may cap how many conversations one person starts per hour and,
with ``user_runs_over = "refuse"``, how many one person has going at once (running or
waiting for a person) (:class:`conversations.channels.ChannelSettings`; with the
default ``"queue"``, ``user_runs`` queues a run instead: docs/architecture.md,
"Limits and priorities"). A mention over a limit opens no
conversation: the bot says so in the mention's thread, and the delivery is
recorded like any other (a redelivery says nothing twice). A message in the thread
of an ended conversation starts it again, so it counts as a start too: over a
limit, the bot says so in that thread and the message starts nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from conversations.channels import ChannelLookup
from conversations.events import Author, PlatformRef
from conversations.hub._chain import Answer, Inbound, Next, Notice, Open, Respond
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
            over = await self._over(intent.binding, intent.event.author)
            if over is not None:
                inbound.intent = Respond(intent.binding, over)
        elif isinstance(intent, Answer) and not intent.conversation.status.active:
            over = await self._over(intent.conversation.binding, intent.event.author)
            if over is not None:
                inbound.intent = Notice(intent.conversation, over)
        await next()

    async def _over(self, where: PlatformRef, who: Author) -> str | None:
        """What to say when ``who`` starting a run at ``where`` is over a limit, else None."""
        channel = self._channels(where)
        runs, per_hour = channel.user_runs, channel.user_mentions_per_hour
        if channel.user_runs_over == "queue":
            runs = None  # over it, a run waits for its slot (conversations.hub._queued)
        if runs is None and per_hour is None:
            return None
        active, started = await self._threads.started_by(
            platform=where.platform, requester_id=who.id, since=self._clock() - HOUR
        )
        if runs is not None and active >= runs:
            return (
                f"{who.name}, you have {_conversations(active)} going, and {runs} at once is "
                "the limit here: I started nothing. Finish or stop one, then ask again."
            )
        if per_hour is not None and started >= per_hour:
            return (
                f"{who.name}, you started {_conversations(started)} in the last hour, and "
                f"{per_hour} an hour is the limit here: I started nothing. Ask again once "
                "the earliest of them is an hour old."
            )
        return None


def _conversations(count: int) -> str:
    return f"{count} conversation" + ("" if count == 1 else "s")
