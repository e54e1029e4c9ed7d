"""The hub: chat events in, engine inputs out; engine run events become outbox rows.

Each inbound event goes through a short chain of steps, assembled in one place
(:meth:`Hub._chain`; the steps and what they pass on: :mod:`conversations.hub._chain`):

1. **bind**: what the event is about (its conversation, the request it decides);
   then **limits**: a mention over its channel's per-user limits opens nothing;
2. **dedupe**: the delivery key is recorded in the store; a duplicate stops here
   (a mention creates its conversation in the same write);
3. **authorise**: who may not decide or stop is told so and audited, nothing changes;
4. **route**: the engine gets an input through the conversation's queue (start,
   reply, decision taken at once by compare-and-set, or stop, which jumps the queue);
   a reply while a run works is acknowledged (👀) and handled by the conversation's
   busy mode (:mod:`conversations.hub._busy`).

Where limits are set, each run first waits for its slot, and says so in its thread
(:mod:`conversations.hub._queued`; docs/architecture.md, "Limits and priorities").

A scheduled run (and a fork, :mod:`conversations.forks`) opens its conversation without
an event: :meth:`Hub.open_scheduled`, then :meth:`Hub.thread_started` once its message is
posted (:mod:`conversations.hub._scheduled`).

The hub takes the store's interfaces (:mod:`conversations.store.interfaces`), never a
backend; platform-specific help texts come from the adapters (:meth:`Hub.add_texts`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Collection
from datetime import datetime

from conversations.events import (
    InboundEvent,
    PlatformRef,
    PostReply,
)
from conversations.files import FileFetcher
from conversations.hub import _chain
from conversations.hub._authorise import Authorise
from conversations.hub._bind import Bind
from conversations.hub._busy import Busy
from conversations.hub._chain import Inbound, Step
from conversations.hub._dedupe import Dedupe
from conversations.hub._files import Downloads
from conversations.hub._inflight import InFlight
from conversations.hub._limits import Limits
from conversations.hub._queued import queueing
from conversations.hub._refusals import Refusals
from conversations.hub._requeue import Requeue
from conversations.hub._route import Route
from conversations.hub._runs import Runs
from conversations.hub._scheduled import Scheduled
from conversations.hub._settings import (
    DEFAULT_APPROVE,
    DEFAULT_REJECT,
    DEFAULT_STOP,
    HubSettings,
    default_instance,
)
from conversations.hub._wakeups import Listening
from conversations.membership import Membership
from conversations.outbox import Deliverer
from conversations.schedules import Schedule
from conversations.stopping import Stopper
from conversations.store import ConversationInfo, Outgoing, Store
from conversations.store.leases import Leases
from conversations.store.wakeups import Topic
from conversations.texts import PlatformTexts
from core.run.engine import Engine
from core.runner.local import LocalRunner
from core.runner.protocol import Runner
from core.vocabulary.lifecycle import Lifecycle

__all__ = [
    "DEFAULT_APPROVE",
    "DEFAULT_REJECT",
    "DEFAULT_STOP",
    "Hub",
    "HubSettings",
    "default_instance",
]

log = logging.getLogger(__name__)

TAKEOVER_BATCH = 100
"""Conversations taken over per look (the rest at the next look, a third of
``lease_ttl`` later): an instance does not take on every orphan at once."""


class Hub:
    """Routes inbound events to the engine; one instance serves every adapter."""

    def __init__(
        self,
        *,
        store: Store,
        engine: Engine,
        deliverer: Deliverer,
        settings: HubSettings,
        runner: Runner | None = None,
    ) -> None:
        """``engine`` takes the decisions, stops and reminders (compare-and-set writes made
        here); ``runner`` carries out the runs (:mod:`core.runner`; by default in this
        process, with ``engine``). A runner that commits in another process wakes the
        deliverer here with each update of its runs."""
        self._store = store
        self._engine = engine
        self._deliverer = deliverer
        self._settings = settings
        self._texts: dict[str, PlatformTexts] = {}
        self.leases = Leases(store=store.leases, owner=settings.instance, ttl=settings.lease_ttl)
        """This process's leases; the app runs :meth:`Leases.keep_renewed` beside the hub."""
        self.inbound = InFlight()
        """The events being handled; the app's graceful shutdown lets them finish first."""
        self.takeovers = 0
        """Runs this instance took over from a lapsed lease while it ran (:meth:`take_over`),
        since it started (``threadbot_lease_takeovers_total`` in ``/metrics``)."""
        self._downloads = Downloads(
            limits=settings.files, threads=store.threads, notice=self._notice
        )
        local = runner is None
        self._local = local
        """Runs are carried out in this process: their inbox knows the busy modes."""
        if runner is None:
            runner = LocalRunner(engine, inbox_for=lambda cid: self._runs.inbox(cid))
        self.runner = runner
        """What carries out this hub's runs."""
        self._queued = queueing(settings, store, self.leases, engine)
        self._refusals = Refusals(audit=store.audit)
        self._runs = Runs(
            runner=runner,
            leases=self.leases,
            inbox=store.inbox,
            downloads=self._downloads,
            on_update=None if local else lambda cid, _update: deliverer.look_at(cid),
            slot=self._queued.slot,
        )
        self.stopper = Stopper(
            threads=store.threads,
            stops=store.stops,
            engine=engine,
            queue=self._runs.queue,
            leases=self.leases,
            notice=self._notice,
            poll_interval=settings.wakeup_poll,
            tell_holder=lambda cid: self.tell(Topic.STOP, cid),
            notice_now=self._notice_now,
            stop_queued=self._queued.stop_queued,
            refuse=self._refusals.refuse,
        )
        """Stops runs wherever they run; the app runs :meth:`Stopper.keep_polling` beside."""
        self._requeue = Requeue(
            inbox=store.inbox,
            threads=store.threads,
            runs=self._runs,
            steps=lambda: self._steps[self._steps.index(self._authorise) :],
        )
        self.listening = Listening(
            wakeups=store.wakeups,
            leases=self.leases,
            stopper=self.stopper,
            deliverer=deliverer,
            inbox=store.inbox,
            route_reply=functools.partial(self._requeue.message, mentions=False),
            in_hand=self._runs.in_hand,
            poll=settings.wakeup_poll,
            on_slot=settings.slots.look if settings.slots is not None else None,
        )
        """Wake-ups between instances; the app runs :meth:`Listening.keep_listening`."""
        self._authorise = Authorise(access=settings.access)
        self._steps = self._chain()
        self._scheduled = Scheduled(
            store=store.schedules,
            threads=store.threads,
            go_on=self._runs.resume,
            workspace_root=settings.workspace_root,
            instance=settings.instance,
            resume=lambda ids: self.resume_unhandled(only=ids),
        )

    def _chain(self) -> list[Step]:
        """The steps every inbound event goes through, in order."""
        store, settings = self._store, self._settings
        limits: list[Step] = []
        if settings.channels is not None:
            limits.append(
                Limits(threads=store.threads, channels=settings.channels, clock=settings.clock)
            )
        return [
            Bind(
                threads=store.threads,
                requests=store.requests,
                settings=settings,
                texts=self.texts,
                pass_over=self._deliverer.pass_over,
            ),
            *limits,
            Dedupe(
                inbox=store.inbox,
                threads=store.threads,
                workspace_root=settings.workspace_root,
                position="",
                leases=self.leases,
                on_open=settings.on_open,
                on_claimed=self._deliverer.opened,
            ),
            self._authorise,
            Route(
                engine=self._engine,
                runs=self._runs,
                stopper=self.stopper,
                threads=store.threads,
                access=settings.access,
                stop_command=settings.stop_command,
                notice=self._notice,
                send_now=self._deliverer.send_now,
                feedback=store.feedback,
                refusals=self._refusals,
                downloads=self._downloads,
                reply_elsewhere=self._reply_elsewhere,
                busy=Busy(
                    runs=self._runs,
                    inbox=store.inbox,
                    outbox=store.outbox,
                    access=settings.access,
                    # a run elsewhere (a Ray host) reads replies from the store: notes
                    channels=settings.channels if self._local else None,
                ),
            ),
        ]

    async def handle(self, event: InboundEvent) -> None:
        """Take one inbound event; returns once recorded and queued, not when its run ends.

        Adapters decide whether other bots' messages reach the hub (``allow_bots``).
        The event is numbered as it comes (:func:`conversations.queue.arriving`): a stop
        ends only what came before it; and counted until handled (:attr:`inbound`).
        """
        with self.inbound.track():
            await _chain.run(self._steps, Inbound(event))

    def working(self) -> int:
        """How many conversations have a run going or queued in this process."""
        return self._runs.queue.busy_count()

    def add_membership(self, membership: Membership) -> None:
        """Ask ``membership`` whether a person is in a group approver of its platform."""
        self._settings.access.add_membership(membership)

    def add_fetcher(self, fetcher: FileFetcher) -> None:
        """Fetch the files shared on ``fetcher.platform`` through ``fetcher`` (the adapter's);
        without one, a platform's files are described to the model as not fetched."""
        self._downloads.add(fetcher)

    def add_texts(self, texts: PlatformTexts) -> None:
        """Say ``texts`` on ``texts.platform`` (an adapter's own help texts)."""
        self._texts[texts.platform] = texts

    def texts(self, platform: str) -> PlatformTexts:
        """The help texts of ``platform``: its adapter's, else the defaults."""
        return self._texts.get(platform) or PlatformTexts(platform=platform)

    async def settled(self) -> None:
        """Return when every run has ended or waits for a person and the outbox is empty."""
        queue = self._runs.queue
        while True:
            await queue.idle()
            await self._deliverer.drain()
            if not queue.busy_any():
                return

    async def resume_running(self) -> list[str]:
        """Queue a run for every conversation left ``running`` (after a crash or redeploy)
        that no other live instance runs: its lease is taken here first, without waiting
        (free, lapsed, this instance's own, or a gone process's of this host); one that
        another live instance holds is left to it, and taken over here only if its
        lease lapses (:meth:`take_over`), so no job waits here for each of its runs.
        Returns the ids queued."""
        resumed: list[str] = []
        for conversation_id in await self._store.threads.running():
            if await self._runs.resume(conversation_id):
                self._settings.on_resume(conversation_id)
                resumed.append(conversation_id)
        return resumed

    async def take_over(self) -> list[str]:
        """Take over the conversations left ``running`` whose run's lease lapsed a whole
        ``lease_ttl`` ago (its holder died or was cut off; a live holder slowed down
        past one renewal is left alone), while this instance runs: each goes on from its
        journal here (an unknown outcome marked as after a restart), and its replies not
        journaled yet are queued again. Returns their ids (docs/architecture.md,
        "Several instances")."""
        ttl = self.leases.ttl
        taken = await self._store.leases.take_lapsed(
            self.leases.owner, ttl=ttl, limit=TAKEOVER_BATCH, lapsed_for=ttl
        )
        ids = {lease.conversation_id for lease in taken}
        self.takeovers += len(ids)
        for lease in taken:
            log.warning("taking over conversation %s: its lease lapsed", lease.conversation_id)
            self.leases.taken_over(lease)
            self._settings.on_resume(lease.conversation_id)
            self._runs.run(lease.conversation_id)
        if ids:
            await self.resume_unhandled(only=ids)
        return sorted(ids)

    async def keep_taking_over(self) -> None:
        """Look for runs to take over every third of ``lease_ttl`` (a supervised task)."""
        while True:
            await asyncio.sleep(self.leases.ttl / 3)
            await self.take_over()

    async def resume_unhandled(self, only: Collection[str] | None = None) -> int:
        """Queue again the messages a crash left unjournaled (of the conversations
        ``only`` names, or all); returns how many (:mod:`conversations.hub._requeue`)."""
        return await self._requeue.unhandled(only)

    async def open_scheduled(self, schedule: Schedule, due: datetime, now: datetime) -> str | None:
        """Record ``schedule``'s time ``due`` at ``now`` and open its conversation, unless
        another instance did: the id, or None (:mod:`conversations.hub._scheduled`)."""
        return await self._scheduled.open(schedule, due, now)

    async def thread_started(self, conversation_id: str, thread: PlatformRef) -> None:
        """A scheduled run's or a fork's message was posted, its thread at ``thread``: bind
        its conversation there and queue its first request, or a fork's run (the
        deliverer's ``on_thread``; :mod:`conversations.hub._scheduled`)."""
        await self._scheduled.thread_started(conversation_id, thread)

    def tell(self, topic: Topic, conversation_id: str) -> None:
        """Tell the other instances ``topic`` of ``conversation_id`` (a wake-up)."""
        self.listening.tell(topic, conversation_id)

    def _reply_elsewhere(self, conversation: ConversationInfo) -> None:
        """A reply came here for a run that another instance may hold: tell it."""
        running = conversation.status.lifecycle is Lifecycle.RUNNING
        if running and conversation.id not in self.leases.held_ids:
            self.tell(Topic.INBOX, conversation.id)

    async def expire(self, conversation_id: str, request_id: str) -> None:
        """Expire a request through the conversation's queue (the sweeper calls this)."""
        self._runs.expire(conversation_id, request_id)

    async def close(self) -> None:
        """Cancel running work (a later start resumes it from the store)."""
        await self._runs.queue.close()

    async def shutdown(self) -> None:
        """Stop taking work: runs end at their next commit, or are cut after the grace.

        Events still arriving are recorded (the inbox keeps them) but start
        nothing; each run finishes the step it is in and ends there, leaving its
        conversation ``running`` for the next start. After ``shutdown_grace``
        seconds the runs still going are cancelled: a running command is killed
        and recorded ``interrupted``. A conversation's lease is released when its last
        queued job has ended.

        The events being handled when it is called (the adapters have stopped
        receiving) are let finish meanwhile, within the same grace, so that each is
        recorded before the store closes (a run one of them asks for starts at the next
        start). One still going after the grace may fail as the store closes, and is
        logged: Slack's events were acknowledged before they were handled, so Slack does
        not send it again.
        """
        grace = self._settings.shutdown_grace
        await asyncio.gather(self.inbound.finished(grace), self._runs.shutdown(grace))

    async def _notice_now(self, conversation: ConversationInfo, text: str) -> None:
        """Post ``text`` in the conversation's thread at once, outside the outbox."""
        await self._deliverer.send_now(PostReply(ref=conversation.binding, text=text))

    async def _notice(self, conversation: ConversationInfo, text: str) -> None:
        await self._store.outbox.enqueue(
            conversation.id, [Outgoing(PostReply(ref=conversation.binding, text=text))]
        )
