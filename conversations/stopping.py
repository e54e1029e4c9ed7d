"""A stop reaches the run wherever it runs.

Only the instance that holds a conversation's lease runs it, so only it can
cancel the model call, kill the command and close the run with one result per
call. :meth:`Stopper.stop` therefore:

- stops the run here when this instance holds the lease (it cancels the job: a
  running command's process group is killed), then closes the conversation
  (:meth:`core.run.engine.Engine.stop`: ``Stopped`` once in the thread);
- asks the holder when another live instance holds it: a stop request in the
  store naming the run (:class:`conversations.store.StopRequests`), which the holder finds
  by :meth:`Stopper.keep_polling` within about a second and carries out as above;
- otherwise (nobody holds it, the holder died, the run ended meanwhile) takes the
  lease itself, so a paused former holder is fenced out, and closes the
  conversation here.

No instance other than the holder ever writes a result for a running call, so no
call has two results.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from conversations.queue import ConversationQueue
from conversations.store import ConversationInfo, StopRequests, Threads
from conversations.store.leases import Leases
from core.context import now
from core.people import Person
from core.run.engine import Engine

log = logging.getLogger(__name__)

Notice = Callable[[ConversationInfo, str], Awaitable[None]]
"""Posts a short message in the conversation's thread."""

NOTHING_RUNNING = "Nothing is running here."


class Stopper:
    """Stops conversations for one instance; ``keep_polling`` is its supervised task.

    ``threads`` finds conversations, ``stops`` holds the stop requests, ``leases``
    is this instance's lease holder. ``poll_interval``: seconds between two looks
    for stop requests aimed at the runs this instance holds (one query, only while
    it holds any); every ``orphan_every`` seconds it also takes up requests whose
    holder is gone.
    """

    def __init__(
        self,
        *,
        threads: Threads,
        stops: StopRequests,
        engine: Engine,
        queue: ConversationQueue,
        leases: Leases,
        notice: Notice,
        poll_interval: float = 1.0,
        orphan_every: float = 30.0,
    ) -> None:
        self._threads = threads
        self._stops = stops
        self._engine = engine
        self._queue = queue
        self._leases = leases
        self._notice = notice
        self._poll = poll_interval
        self._orphan_ticks = max(1, round(orphan_every / poll_interval))

    async def stop(self, conversation: ConversationInfo, by: Person) -> None:
        """Stop the conversation's run wherever it runs (see the module docstring)."""
        cid = conversation.id
        for _attempt in range(3):
            if cid in self._leases.held_ids:
                await self._stop_here(conversation, by)
                return
            await self._queue.stop(cid)  # what waits here for the lease goes
            state = await self._leases.state(cid)
            if state is not None and state.live(now()) and state.owner != self._leases.owner:
                assert state.owner is not None
                asked = await self._stops.request_stop(
                    cid, holder=state.owner, epoch=state.epoch, by=by
                )
                if asked:
                    log.info("asked %s to stop the run of %s", state.owner, cid)
                    return
                continue  # the run ended meanwhile: look again
            async with self._leases.held_now(cid) as lease:
                if lease is not None:
                    await self._stop_here(conversation, by)
                    return
        log.warning("conversation %s: its lease kept changing hands; stopping it here", cid)
        await self._stop_here(conversation, by)

    async def keep_polling(self) -> None:
        """Carry out stop requests for the runs held here, until cancelled (supervised)."""
        tick = 0
        while True:
            await asyncio.sleep(self._poll)
            tick += 1
            await self.poll_once(orphans=tick % self._orphan_ticks == 0)

    async def poll_once(self, *, orphans: bool = False) -> int:
        """Carry out the open stop requests aimed here (and orphaned ones); how many."""
        held = self._leases.held_ids
        if not held and not orphans:
            return 0
        requests = await self._stops.stop_requests(held, orphans=orphans)
        done: set[str] = set()
        for request in requests:
            if request.conversation_id in done:
                continue
            done.add(request.conversation_id)
            conversation = await self._threads.find(request.conversation_id)
            if conversation is None:
                await self._stops.stop_requests_handled(request.conversation_id)
            elif request.conversation_id in held:
                await self._stop_here(conversation, request.by)
            else:
                await self.stop(conversation, request.by)
        return len(done)

    async def _stop_here(self, conversation: ConversationInfo, by: Person) -> None:
        """Cancel the job here (a command is killed), close the run, settle the requests."""
        await self._queue.stop(conversation.id)
        stopped = await self._engine.stop(conversation.id, by.name, by.id)
        await self._stops.stop_requests_handled(conversation.id)
        if not stopped:
            await self._notice(conversation, NOTHING_RUNNING)
