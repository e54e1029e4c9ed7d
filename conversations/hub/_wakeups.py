"""The hub's side of wake-ups: what one instance tells another, and what it does when told.

(:mod:`conversations.store.wakeups`; docs/architecture.md, "Several instances".)

Told (:meth:`Listening.tell`): a stop asked of the run's holder (``stop``), a reply in
a thread whose run another instance holds (``inbox``), outbox rows whose delivery
claim another instance holds (``outbox``). Heard (:meth:`Listening.heard`), from
another instance: ``stop``, the stopper looks for stop requests aimed here now;
``inbox``, if the run is held here, the conversation's replies not journaled yet are
routed here, so the run takes them at its next turn; ``outbox``, the deliverer reads
the conversation's pending rows now; ``slot``, the slots waited for here are looked at
now (another instance's pass granted one).

The fallback, the same on every backend (and the only way on SQLite): every
``wakeup_poll`` seconds, while this instance holds runs, the replies not journaled yet
of those runs are routed here (:meth:`Listening.poll_once`); the stopper polls its stop
requests at the same interval. A reply is routed here once; if the run ends before it
takes it, the instance that received it handles it once the lease is free, and the one
that comes second finds it journaled (:class:`core.vocabulary.errors.AlreadyHandled`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from conversations.outbox import Deliverer
from conversations.stopping import Stopper
from conversations.store import Inbox
from conversations.store.leases import Leases
from conversations.store.wakeups import Topic, Wakeup, Wakeups

log = logging.getLogger("conversations.hub")

RouteReply = Callable[[str, dict[str, object]], Awaitable[None]]
"""Routes a recorded, unjournaled reply (its conversation id, its event as stored)."""


class Listening:
    """One instance's wake-ups: sent as ``leases.owner``, heard from the others;
    ``on_slot`` is called when another instance granted a slot waited for here
    (:mod:`conversations.slots`).

    ``in_hand``: the delivery keys of replies a job of this instance has (the runs'
    :attr:`~conversations.hub._runs.Runs.in_hand`; pruned here of those journaled):
    those are not routed again."""

    def __init__(
        self,
        *,
        wakeups: Wakeups,
        leases: Leases,
        stopper: Stopper,
        deliverer: Deliverer,
        inbox: Inbox,
        route_reply: RouteReply,
        in_hand: set[str],
        poll: float,
        on_slot: Callable[[], None] | None = None,
    ) -> None:
        self._wakeups = wakeups
        self._leases = leases
        self._stopper = stopper
        self._deliverer = deliverer
        self._inbox = inbox
        self._route_reply = route_reply
        self._in_hand = in_hand
        self.poll = poll
        self._on_slot = on_slot or (lambda: None)
        self._routed: set[str] = set()
        """Delivery keys of replies routed here and not journaled yet."""
        self._tasks: set[asyncio.Task[object]] = set()

    def tell(self, topic: Topic, conversation_id: str) -> None:
        """Tell the other instances ``topic`` of ``conversation_id`` (sent in the
        background; a failure is logged: the polls find it anyway)."""
        if not self._wakeups.carried:
            return
        wakeup = Wakeup(topic, conversation_id, self._leases.owner)
        self._spawn(self._wakeups.tell(wakeup), f"tell {topic} {conversation_id}")

    def heard(self, wakeup: Wakeup) -> None:
        """Act on a wake-up another instance sent (see the module docstring)."""
        if wakeup.origin == self._leases.owner:
            return
        cid = wakeup.conversation_id
        if wakeup.topic is Topic.STOP:
            self._spawn(self._stopper.poll_once(), f"stop requests for {cid}")
        elif wakeup.topic is Topic.INBOX:
            if cid in self._leases.held_ids:
                self._spawn(self.poll_once({cid}), f"replies for {cid}")
        elif wakeup.topic is Topic.OUTBOX:
            self._deliverer.look_at(cid)
        elif wakeup.topic is Topic.SLOT:
            self._on_slot()

    async def keep_listening(self) -> None:
        """Hear wake-ups, and look at the store every ``poll`` seconds, until cancelled
        (a supervised task)."""
        listening = asyncio.create_task(
            self._wakeups.listen(self.heard, self._reconnected), name="wake-ups"
        )
        try:
            while True:
                await asyncio.sleep(self.poll)
                await self.poll_once()
        finally:
            listening.cancel()
            await asyncio.gather(listening, return_exceptions=True)

    async def poll_once(self, only: set[str] | None = None) -> int:
        """Route here the unjournaled replies of the runs held here (of ``only``, if
        given), each once; how many were routed."""
        held = self._leases.held_ids if only is None else self._leases.held_ids & only
        if not held:
            return 0
        unhandled = await self._inbox.unhandled()
        waiting = {key for key, _cid, _data in unhandled}
        self._routed &= waiting  # journaled since: forgotten
        self._in_hand &= waiting
        routed = 0
        for key, cid, data in unhandled:
            if cid in held and key not in self._routed and key not in self._in_hand:
                self._routed.add(key)
                log.info(
                    "conversation %s: reply %s, taken by another instance, goes here", cid, key
                )
                await self._route_reply(cid, data)
                routed += 1
        return routed

    def _reconnected(self) -> None:
        """Wake-ups told while nobody listened are lost: look at the store now."""
        self._spawn(self._stopper.poll_once(), "stop requests after a reconnect")
        self._spawn(self.poll_once(), "replies after a reconnect")
        self._deliverer.wake()
        self._on_slot()

    def _spawn(self, work: Awaitable[object], name: str) -> None:
        async def logged() -> object:
            try:
                return await work
            except Exception:
                log.exception("%s failed; the next poll tries again", name)
                return None

        task = asyncio.ensure_future(logged())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
