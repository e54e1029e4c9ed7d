"""A stop reaches the run wherever it runs.

Only the instance that holds a conversation's lease runs it, so only it can
cancel the model call, kill the command and close the run with one result per
call. :meth:`Stopper.stop` therefore:

- stops the run here when this instance holds the lease (it cancels the job: a
  running command's process group is killed), then closes the conversation
  (:meth:`core.run.engine.Engine.stop`: ``Stopped`` once in the thread);
- asks the holder when another live instance holds it: a stop request in the
  store naming the run (:class:`conversations.store.StopRequests`), which the holder finds
  at once when told (a wake-up: :mod:`conversations.store.wakeups`), else by
  :meth:`Stopper.keep_polling` within ``poll_interval``, and carries out as above.
  The thread is told at once (:data:`STOPPING`, posted before the request is
  written), and the asking instance follows
  the request up at each poll: whoever holds the conversation next (a process that
  took it over) carries it out, and once the holder's lease lapses (it died on
  another host) the asking instance takes the lease and stops it itself;
- otherwise (nobody holds it, the run ended meanwhile, or the holder is a process
  of this host that is gone: :func:`conversations.store.owners.holder_gone`, no
  wait for its lease to lapse) takes the lease itself, so a paused former holder
  is fenced out, and closes the conversation here.

A stop is aimed at a run: the run working or waiting for a person when it was sent
(:meth:`core.run.engine.Engine.running`, the ``seq`` of the request that began it),
carried in the stop request too, so it survives a restart and reaches another
instance. It ends that run and nothing else: when the holder carries it out after that
run ended (a later run may work, begun by a message after the stop) it cancels nothing
and the thread is told (:data:`ALREADY_ENDED`). While a stop is carried out here, what
arrived after it waits in the queue and runs after it
(:meth:`conversations.queue.ConversationQueue.holding`), so a message sent just after
a stop starts the next run instead of being dropped with the stopped one
(docs/architecture.md, "One mention, one approval, one stop").

No instance other than the holder ever writes a result for a running call, so no
call has two results. How the stop was given (its means: ``/stop``, 🛑, a Stop button,
``stop`` in the thread, Slack's stop button) travels with it, in the stop request too:
the stop's commit records it in the audit trail, and a stop that stopped nothing is
recorded as refused with the notice that says so (docs/architecture.md, "The audit
trail").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import assert_never

from conversations.queue import ConversationQueue, arrived_now
from conversations.store import ConversationInfo, StopRequest, StopRequests, Threads
from conversations.store.leases import Leases, LeaseState
from conversations.store.owners import holder_gone
from core.context import now
from core.requests.audit import refused
from core.run.engine import Engine
from core.vocabulary.audit import STOP, Audited, Means
from core.vocabulary.inputs import StopOutcome
from core.vocabulary.people import Person

log = logging.getLogger(__name__)

Notice = Callable[[ConversationInfo, str], Awaitable[None]]
"""Posts a short message in the conversation's thread."""
Refuse = Callable[[ConversationInfo, Audited, str], Awaitable[None]]
"""Records a refused attempt in the audit trail with its notice (if any), in one write
(:meth:`conversations.hub._refusals.Refusals.refuse`)."""
StopQueued = Callable[[ConversationInfo, Person, Means | None], Awaitable[bool]]
"""Stops a start that waited for its slot, as a person asked by a means
(:meth:`conversations.hub._queued.Queueing.stop_queued`)."""

NOTHING_RUNNING = "Nothing is running here."
ALREADY_ENDED = "⏹ Nothing was stopped: the run this stop was aimed at had already ended."
"""Said when a stop comes after the run it was aimed at ended (on its own, or stopped by
someone else); a run started after the stop goes on."""
STOPPING = "⏹ Stopping…"
"""Said at once when the run is held by another instance, which stops it (or, if that
instance is gone, this one once its lease lapses); ``Stopped by`` follows."""


class Stopper:
    """Stops conversations for one instance; ``keep_polling`` is its supervised task.

    ``threads`` finds conversations, ``stops`` holds the stop requests, ``leases``
    is this instance's lease holder. ``poll_interval``: seconds between two looks
    for stop requests aimed at the runs this instance holds (one query, only while
    it holds any); every ``orphan_every`` seconds it also takes up requests whose
    holder is gone. ``tell_holder`` is called with a conversation whose holder was
    asked to stop its run (a wake-up: the holder looks at once, not at its next poll).
    ``notice_now`` posts :data:`STOPPING` at once, outside the outbox (default:
    ``notice``), before the request is written, so the holder's "Stopped", which it
    posts from its own outbox, cannot come first. ``stop_queued`` stops a start that
    was waiting for its slot when the stop cancelled it, in a conversation not active
    (:meth:`conversations.hub._queued.Queueing.stop_queued`), when nothing else ran.
    ``refuse`` records a stop that stopped nothing, with its notice (default: the notice
    alone, nothing recorded).
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
        tell_holder: Callable[[str], None] = lambda _id: None,
        notice_now: Notice | None = None,
        stop_queued: StopQueued | None = None,
        refuse: Refuse | None = None,
    ) -> None:
        self._threads = threads
        self._stops = stops
        self._engine = engine
        self._queue = queue
        self._leases = leases
        self._notice = notice
        self._poll = poll_interval
        self._tell_holder = tell_holder
        self._notice_now = notice_now or notice
        self._stop_queued = stop_queued
        self._refuse = refuse
        self._orphan_ticks = max(1, round(orphan_every / poll_interval))
        self._asked: dict[str, tuple[Person, Means | None]] = {}
        """Conversations whose run this instance asked another to stop, and who asked, by
        what means: followed up at every poll until the request is carried out."""
        self._polling = asyncio.Lock()
        """One poll at a time: the timer's and a wake-up's would both find an open
        request and carry it out twice, the second saying nothing is running."""

    async def stop(
        self, conversation: ConversationInfo, by: Person, means: Means | None = None
    ) -> None:
        """Stop the conversation's run wherever it runs (see the module docstring), as
        ``by`` asked by ``means``.

        The stop is aimed at the run working or waiting now (:meth:`Engine.running`);
        what arrived after it waits meanwhile and is not stopped
        (:meth:`ConversationQueue.holding`). When the run is held by another live
        instance, the thread is told at once (:data:`STOPPING`) and this instance
        follows the request up until it is carried out (:meth:`poll_once`).
        """
        cid = conversation.id
        with self._queue.holding(cid, arrived_now()):
            run = await self._engine.running(cid)
            if await self._carry_out(conversation, by, run, means=means):
                return
        self._asked[cid] = (by, means)

    async def keep_polling(self) -> None:
        """Carry out stop requests for the runs held here, until cancelled (supervised)."""
        tick = 0
        while True:
            await asyncio.sleep(self._poll)
            tick += 1
            await self.poll_once(orphans=tick % self._orphan_ticks == 0)

    async def poll_once(self, *, orphans: bool = False) -> int:
        """Carry out the open stop requests aimed here, those this instance asked
        another to carry out and, with ``orphans``, those left by any instance; how many
        were looked at. Polls go one at a time (a wake-up's waits for the timer's), so
        each reads what the one before left open."""
        async with self._polling:
            return await self._poll_once(orphans=orphans)

    async def _poll_once(self, *, orphans: bool) -> int:
        held = self._leases.held_ids
        asked = self._asked.keys() - held
        if not held and not asked and not orphans:
            return 0
        requests = await self._stops.stop_requests(held | asked, orphans=orphans)
        newest: dict[str, StopRequest] = {}  # per conversation, the one aimed at its newest run
        for request in requests:
            known = newest.get(request.conversation_id)
            if known is None or _aim(request) > _aim(known):
                newest[request.conversation_id] = request
        done: set[str] = set()
        for cid, request in newest.items():
            done.add(cid)
            conversation = await self._threads.find(cid)
            if conversation is None:
                await self._stops.stop_requests_handled(cid)
            elif cid in held:
                await self._stop_here(conversation, request.by, request.run, means=request.means)
            elif await self._carry_out(
                conversation, request.by, request.run, asked=True, means=request.means
            ):
                self._asked.pop(cid, None)
        for cid in asked - done:  # carried out by the holder
            self._asked.pop(cid, None)
        return len(done)

    async def _carry_out(
        self,
        conversation: ConversationInfo,
        by: Person,
        run: int | None,
        *,
        asked: bool = False,
        means: Means | None = None,
    ) -> bool:
        """Stop ``run`` here if no live instance elsewhere holds the conversation; else
        ask that one (unless ``asked``: a request is open already). False: the run is
        elsewhere."""
        cid = conversation.id
        said = asked
        for _attempt in range(3):
            if cid in self._leases.held_ids:
                await self._stop_here(conversation, by, run, quiet=asked, means=means)
                return True
            holder = await self._live_holder(cid)
            if holder is not None and asked:
                return False  # still running there; what came here since waits its turn
            await self._queue.stop(cid)  # what waits here for the lease goes
            if holder is not None:
                assert holder.owner is not None
                if not said:  # before the request: the holder's "Stopped" comes after it
                    await self._notice_now(conversation, STOPPING)
                    said = True
                if await self._stops.request_stop(
                    cid, holder=holder.owner, epoch=holder.epoch, by=by, run=run, means=means
                ):
                    log.info("asked %s to stop run %s of %s", holder.owner, run, cid)
                    self._tell_holder(cid)
                    return False
                continue  # the run ended meanwhile: look again
            async with self._leases.held_now(cid) as lease:
                if lease is not None:
                    await self._stop_here(conversation, by, run, quiet=asked, means=means)
                    return True
        log.warning("conversation %s: its lease kept changing hands; stopping it here", cid)
        await self._stop_here(conversation, by, run, quiet=asked, means=means)
        return True

    async def _live_holder(self, conversation_id: str) -> LeaseState | None:
        """The lease of the conversation if another instance holds it and may be alive:
        unexpired, and not a process of this host that is gone."""
        state = await self._leases.state(conversation_id)
        if state is None or state.owner is None or state.owner == self._leases.owner:
            return None
        if not state.live(now()) or holder_gone(state.owner):
            return None
        return state

    async def _stop_here(
        self,
        conversation: ConversationInfo,
        by: Person,
        run: int | None,
        *,
        quiet: bool = False,
        means: Means | None = None,
    ) -> None:
        """Cancel the job here (a command is killed), close the run, settle the requests.

        ``run``: the run the stop was aimed at (None: whatever is active). When it is
        no longer active (it ended, a later run may work) nothing is cancelled and the
        thread is told (:data:`ALREADY_ENDED`). What arrived after the stop waits
        meanwhile and runs after it (:meth:`ConversationQueue.holding`). ``quiet``: a
        stop this instance asked another to carry out, followed up: when its run ended
        by a stop (the holder's) or nothing runs any more, the holder said so (and
        recorded it). ``means``: how the stop was given, for the audit trail: recorded
        with the stop's commit, or as refused with what the thread is told.
        """
        cid = conversation.id
        with self._queue.holding(cid, arrived_now()):
            outcome = await self._engine.stop_outcome(cid, run) if run is not None else None
            if outcome is None:  # the run aimed at works or waits (or a start waits here)
                unread = await self._queue.stop(cid)
                outcome = await self._engine.stop(
                    cid, by.name, by.id, run=run, notes=unread, means=means
                )
                if outcome is not StopOutcome.STOPPED and self._stop_queued is not None:
                    if await self._stop_queued(conversation, by, means):  # it waited here
                        outcome = StopOutcome.STOPPED
            await self._stops.stop_requests_handled(cid)
        match outcome:
            case StopOutcome.STOPPED:
                pass
            case StopOutcome.NOTHING_ACTIVE:
                if not quiet:
                    await self._refused(conversation, by, means, NOTHING_RUNNING)
            case StopOutcome.ALREADY_STOPPED:
                if not quiet:
                    await self._refused(conversation, by, means, ALREADY_ENDED)
            case StopOutcome.ENDED:
                log.info("a stop aimed at run %s of %s found it ended", run, cid)
                await self._refused(conversation, by, means, ALREADY_ENDED)
            case _:
                assert_never(outcome)

    async def _refused(
        self, conversation: ConversationInfo, by: Person, means: Means | None, text: str
    ) -> None:
        """Tell the thread ``text`` (a stop that stopped nothing), recorded as refused."""
        if self._refuse is None:
            await self._notice(conversation, text)
            return
        why = "nothing was running" if text == NOTHING_RUNNING else "the run had already ended"
        audited = refused(by.id, means, why, request_kind=STOP)
        await self._refuse(conversation, audited, text)


def _aim(request: StopRequest) -> tuple[bool, int]:
    """The order of stop requests' aims: a later run after an earlier one; a request
    aimed at whatever runs (written before stops named their run) above any run. One
    poll carries out a conversation's highest and closes the others with it."""
    return (request.run is None, request.run or 0)
