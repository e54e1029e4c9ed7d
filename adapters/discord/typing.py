"""The thread's typing indicator while a run works there.

Discord shows "threadbot is typing…" for about 10 seconds after
``POST /channels/{id}/typing``, or until the bot posts in that channel
(https://discord.com/developers/docs/resources/channel#trigger-typing-indicator). The
store writes a thread's session status as the conversation moves (docs/architecture.md,
"Agent sessions"); on Discord the sender makes ``processing`` (the run works) the start
of a loop that triggers the indicator every :data:`EVERY` seconds, and any other status
(waits for a person, answered, stopped) its end. A post of the bot ends Discord's
indicator until the next trigger; the loop does not trigger it at once after a post,
since the post may be a question that the next status says waits. A loop holds only
this process's memory: a restart ends it, and the run's next status starts it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

EVERY = 8.0
"""Seconds between two triggers: under the indicator's ten seconds."""


class TypingIndicator:
    """Per channel, a task that calls ``trigger(channel)`` every ``every`` seconds
    from :meth:`start` until :meth:`stop` (or :meth:`close`).

    ``trigger`` sends ``POST /channels/{channel}/typing``; a failure is logged (once
    until a trigger works again) and the loop goes on (the indicator is decoration).
    """

    def __init__(
        self, *, trigger: Callable[[str], Awaitable[object]], every: float = EVERY
    ) -> None:
        self._trigger = trigger
        self._every = every
        self._loops: dict[str, asyncio.Task[None]] = {}
        self._refused: set[str] = set()
        """Channels whose trigger failed and was logged: logged again only once it
        worked in between."""

    @property
    def channels(self) -> frozenset[str]:
        """The channels whose indicator is kept on now."""
        return frozenset(self._loops)

    async def start(self, channel: str) -> None:
        """Keep ``channel``'s indicator on (already on: nothing changes). The first
        trigger is sent before this returns, so it comes before the thread's next
        message."""
        if channel in self._loops:
            return
        task = asyncio.create_task(self._loop(channel), name=f"discord-typing-{channel}")
        self._loops[channel] = task
        await self._once(channel)

    async def stop(self, channel: str) -> None:
        """Stop triggering ``channel``'s indicator (it fades within ten seconds)."""
        task = self._loops.pop(channel, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def close(self) -> None:
        """Stop every loop."""
        for channel in list(self._loops):
            await self.stop(channel)

    async def _loop(self, channel: str) -> None:
        while True:
            await asyncio.sleep(self._every)
            await self._once(channel)

    async def _once(self, channel: str) -> None:
        try:
            await self._trigger(channel)
        except Exception as exc:  # decoration: log (once) and go on
            if channel not in self._refused:
                self._refused.add(channel)
                log.warning("could not show typing in %s: %r", channel, exc)
        else:
            self._refused.discard(channel)
