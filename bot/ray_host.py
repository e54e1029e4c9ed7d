"""A run host: the Ray actor that carries out runs for :class:`bot.ray_runner.RayRunner`.

An async actor (https://docs.ray.io/en/latest/ray-core/actors/async_api.html): every
method is a coroutine on the actor's one event loop, so one host carries out many runs
at once, each a task, as the bot process does with :class:`core.runner.local.LocalRunner`
(docs/architecture.md, "Runners"). It builds its own store (PostgreSQL) and engine from
the bot's settings (:func:`bot.engines.open_engine`, the bot's own wiring), so a run's
commits go from here to the store, journal and outbox in one transaction, fenced by
the conversation's lease that the bot process holds and passes along with each run
(:func:`conversations.store.leases.fence_with`). Replies that come while a run works
are read from the store's inbox (:class:`conversations.replies.StoredReplies`). Its runs'
model calls and commands wait for their slots under the cluster's limits as this
process (``host:pid``), which renews their rows (docs/architecture.md, "Limits and
priorities"); the run's own slot is held by the bot process that asked for it.

Its log records go to the actor's stderr (which Ray hands to the driver, the bot, by
default) in the bot's format, redacted as the bot's are (:func:`bot.logs.configure`). With
Slack installs, it reads the installs as the bot does (every ``wakeup_poll`` seconds, when
they changed) so its redactor learns each install's token too: a run's tool output here
loses it before it is stored (:mod:`conversations.installs`).

The class is plain Python: :mod:`bot.ray_runner` makes it an actor
(``ray.remote(RunHost)``), so this module imports no Ray and is pickled by reference.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator

from bot.engines import EngineParts, open_engine
from bot.logs import configure as configure_logs
from bot.settings import Settings
from conversations import logcontext
from conversations.installs import Installs
from conversations.replies import StoredReplies
from conversations.sealing import Sealer
from conversations.slots import Slots
from conversations.store.leases import Lease, fence_with
from core.runner.local import LocalRunner
from core.runner.protocol import RunItem, RunRequest
from core.secrets import Redactor

log = logging.getLogger(__name__)

_Out = asyncio.Queue[RunItem | BaseException | None]
"""What a run's pump hands the stream: items, then None (ended) or what it raised."""


class RunHost:
    """Carries out runs with an engine of its own, built from ``settings`` (the bot's,
    its paths absolute) at the first call (:meth:`ready`); see the module docstring.

    Methods (each a coroutine the runner calls through Ray): :meth:`ready`,
    :meth:`run` (a streaming generator), :meth:`cancel`, :meth:`suspend`,
    :meth:`running`, :meth:`replies_waiting`, :meth:`close`.
    """

    def __init__(self, settings: Settings) -> None:
        self._redactor = Redactor(settings.secrets())
        configure_logs(settings.log_level, settings.log_format, self._redactor)
        self._settings = settings
        self._learning: asyncio.Task[None] | None = None
        self._parts: EngineParts | None = None
        self._opening: asyncio.Lock | None = None
        self._local: LocalRunner | None = None
        self._replies: StoredReplies | None = None
        self._polling: asyncio.Task[None] | None = None
        self._renewing: asyncio.Task[None] | None = None
        self._runs: dict[str, asyncio.Task[None]] = {}

    async def ready(self) -> dict[str, object]:
        """Open the store and build the engine (once); where this host runs:
        ``{"node": hostname, "pid": process id}``."""
        await self._opened()
        return {"node": socket.gethostname(), "pid": os.getpid()}

    async def _opened(self) -> LocalRunner:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._local is None:
                parts = await open_engine(self._settings, redactor=self._redactor)
                if self._settings.slack_installs:
                    installs = Installs(
                        store=parts.store.installations,
                        states=parts.store.oauth_states,
                        sealer=Sealer(self._settings.sealing_keys()),
                        learned=self._redactor.add,
                        poll=self._settings.wakeup_poll,
                    )
                    with contextlib.suppress(Exception):  # the loop logs and tries again
                        await installs.refresh()  # before the first run here
                    self._learning = asyncio.create_task(_learned(installs), name="installs")
                replies = StoredReplies(inbox=parts.store.inbox, poll=self._settings.wakeup_poll)
                self._parts, self._replies = parts, replies
                self._polling = asyncio.create_task(replies.keep_polling(), name="replies")
                if parts.slots is not None:
                    self._renewing = asyncio.create_task(
                        _renewed(parts.slots, self._settings.lease_ttl / 3), name="slots"
                    )
                self._local = LocalRunner(parts.engine, inbox_for=replies.inbox_for)
            return self._local

    async def run(self, request: RunRequest, lease: Lease | None) -> AsyncIterator[RunItem]:
        """Carry out ``request`` under ``lease`` (None: unfenced), streaming its items
        (:class:`core.runner.protocol.RunUpdate`, then one
        :class:`core.runner.protocol.RunEnded`); raises what the run raised
        (:class:`core.vocabulary.errors.LeaseLost` when the lease was taken over). A run
        cancelled by :meth:`cancel` ends the stream without an end."""
        local = await self._opened()
        replies = self._replies
        assert replies is not None
        own = request.message.delivery_key if request.message is not None else None
        replies.watch(request.conversation_id, own)
        out: _Out = asyncio.Queue()
        pump = asyncio.create_task(self._pump(local, request, lease, out), name=request.run_id)
        self._runs[request.run_id] = pump
        try:
            while (item := await out.get()) is not None:
                if isinstance(item, asyncio.CancelledError):
                    return  # cancelled from the bot: it has left the stream
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self._runs.pop(request.run_id, None)
            if not pump.done():
                pump.cancel()
                await asyncio.wait({pump})
            replies.unwatch(request.conversation_id)

    @staticmethod
    async def _pump(
        local: LocalRunner, request: RunRequest, lease: Lease | None, out: _Out
    ) -> None:
        """Follow the local run in a task of its own, its commits fenced by ``lease``, its
        log records naming the conversation."""
        logcontext.conversation.set(request.conversation_id)
        if lease is not None:
            fence_with(lease)  # this task's context, and the run's task started from it
        try:
            async for item in local.run(request):
                out.put_nowait(item)
        except BaseException as exc:
            out.put_nowait(exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
        else:
            out.put_nowait(None)

    async def cancel(self, run_id: str) -> bool:
        """Cancel the run ``run_id`` (its model call, its command) and return once it
        has ended; False when it does not run here."""
        pump = self._runs.get(run_id)
        if pump is None or pump.done():
            return False
        pump.cancel()
        await asyncio.wait({pump})
        return True

    async def suspend(self) -> None:
        """Start no new step in any run here (the bot shuts down)."""
        if self._local is not None:
            await self._local.suspend()

    async def running(self) -> list[str]:
        """The ids of the runs going on here."""
        return sorted(self._runs)

    async def replies_waiting(self) -> dict[str, int]:
        """Per conversation with a run here, the replies read from the store that its run
        has not taken yet (it takes them at its next turn)."""
        return self._replies.waiting() if self._replies is not None else {}

    async def close(self) -> None:
        """Cancel the runs here and close the store (before the actor is ended)."""
        for pump in list(self._runs.values()):
            pump.cancel()
        if self._runs:
            await asyncio.wait(list(self._runs.values()))
        for task in (self._polling, self._renewing, self._learning):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._parts is not None:
            await self._parts.store.close()


async def _learned(installs: Installs) -> None:
    """Read the installs when they changed (their tokens learned by the redactor), now and
    every ``installs.poll`` seconds until cancelled; a failed read is logged and tried at
    the next."""
    while True:
        try:
            await installs.refresh()
        except Exception as exc:
            log.warning("could not read the installs (%s)", exc)
        await asyncio.sleep(installs.poll)


async def _renewed(slots: Slots, every: float) -> None:
    """Renew the host's slot rows (its runs' model calls and commands waiting for or
    holding theirs) every ``every`` seconds until cancelled, as the bot renews its own
    with its leases; a failed renewal is logged and tried at the next."""
    while True:
        await asyncio.sleep(every)
        try:
            await slots.renew_all()
        except Exception as exc:
            log.warning("could not renew the slots of the runs here (%s)", exc)
