"""The delivery claims one deliverer holds: which conversations this process may send now.

Several processes on one database each run a deliverer; a conversation's rows are sent
only by the process that holds its delivery claim (:mod:`conversations.store.claims`,
docs/architecture.md, "Several instances"). A worker takes the claim before its
first send and before each send after it (:meth:`HeldClaims.take`); a claim with at
least a third of its ``ttl`` left is used as it is, with no statement, so a busy
conversation costs one claim statement per two thirds of ``ttl`` and a conversation
opened here none at first (:meth:`HeldClaims.opened`). The time left is measured on
the deliverer's monotonic clock from before the statement that took the claim, so it
never outlasts the claim in the store however the process is paused.

Tasks of one deliverer that take a claim at once (a worker, the answer's stream) share
one statement (:meth:`HeldClaims.take`), so the claim is taken at one epoch.

A conversation whose claim another live process holds is not tried again for a third
of ``ttl`` (:meth:`HeldClaims.elsewhere`): its rows are that process's to send, and
whoever wrote them tells it (``claimed_elsewhere``); if that process died, its claim
lapses and the next try takes it over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from conversations.outbox._attempt import Attempts
from conversations.outbox._clock import Clock
from conversations.outbox._known import KnownRows
from conversations.store.claims import Claim, ClaimLost, DeliveryClaims, deliver_under
from conversations.store.owners import taken_unless_alive

__all__ = ["ClaimedDelivery", "HeldClaims", "Taken"]

log = logging.getLogger("conversations.outbox")

LOOK_AGAIN = 0.1
"""Seconds between two looks at the store for rows another instance is sending."""


@dataclass(frozen=True)
class Taken:
    """A claim :meth:`HeldClaims.take` gives a worker.

    ``fresh``: this deliverer did not hold it right up to now (taken anew: what it
    knows of the conversation's pending rows may be stale, other processes may have
    sent some); ``claim.taken_over``: another process held it last (rows it left
    pending may have gone out: they are sent ``maybe_sent``).
    """

    claim: Claim
    fresh: bool


@dataclass
class _Held:
    claim: Claim
    until: float
    """Clock seconds after which the claim may have lapsed in the store."""


class HeldClaims:
    """The delivery claims of one deliverer (``owner``), each lasting ``ttl`` seconds.

    Errors: what the store raises (the worker that asked fails, and the deliverer with
    it, as for any store error).
    """

    @classmethod
    def of(
        cls, claims: DeliveryClaims | None, *, owner: str, ttl: float, clock: Clock
    ) -> HeldClaims | None:
        """The claims of ``claims`` held as ``owner`` (None without a store's claims:
        one process sends every row)."""
        return None if claims is None else cls(store=claims, owner=owner, ttl=ttl, clock=clock)

    def __init__(self, *, store: DeliveryClaims, owner: str, ttl: float, clock: Clock) -> None:
        self._store = store
        self.owner = owner
        self.ttl = ttl
        self.clock = clock
        self._held: dict[str, _Held] = {}
        self._elsewhere: dict[str, float] = {}
        """Conversations another process delivers, each with when to try again."""
        self._taking: dict[str, asyncio.Future[Taken | None]] = {}
        """The claims being taken now, by conversation (:meth:`take`)."""

    def opened(self, claim: Claim) -> None:
        """Hold ``claim``, which the conversation was created with (it was opened here)."""
        self._held[claim.conversation_id] = _Held(claim, self.clock.now() + self.ttl)

    def elsewhere(self, conversation_id: str, now: float) -> bool:
        """Whether another process held the conversation's claim at the last try, and it
        is not time to try again yet."""
        again = self._elsewhere.get(conversation_id)
        if again is None:
            return False
        if now >= again:
            del self._elsewhere[conversation_id]
            return False
        return True

    async def take(self, conversation_id: str) -> Taken | None:
        """The claim to send the conversation's next row under; None when another live
        process holds it (then it is not tried again for ``ttl / 3``).

        Two asking at once (a worker and the answer's stream,
        :mod:`conversations.outbox._streams`) share one statement and its answer: each
        statement takes the claim at a new epoch, so a second would fence out the
        first's sends (``ClaimLost``, and the conversation left for ``ttl / 3``)."""
        now = self.clock.now()
        held = self._held.get(conversation_id)
        if held is not None and held.until - now >= self.ttl / 3:
            return Taken(held.claim, fresh=False)
        underway = self._taking.get(conversation_id)
        if underway is None:
            underway = asyncio.ensure_future(self._take(conversation_id, now, held))
            self._taking[conversation_id] = underway
            underway.add_done_callback(self._taken)
        return await asyncio.shield(underway)

    def _taken(self, done: asyncio.Future[Taken | None]) -> None:
        """A statement of :meth:`take` ended: the next take makes its own (an error is
        raised to those who waited, and retrieved here should they all be gone)."""
        self._taking = {c: f for c, f in self._taking.items() if f is not done}
        if not done.cancelled():
            done.exception()

    async def _take(self, conversation_id: str, now: float, held: _Held | None) -> Taken | None:
        """:meth:`take`'s statement: the claim taken (or renewed) in the store."""
        claim = await taken_unless_alive(
            lambda dead: self._store.claim_delivery(
                conversation_id, self.owner, ttl=self.ttl, dead=dead
            ),
            lambda: self._store.claim_owner(conversation_id),
        )
        if claim is None:
            self._held.pop(conversation_id, None)
            self._elsewhere[conversation_id] = now + self.ttl / 3
            return None
        self._elsewhere.pop(conversation_id, None)
        self._held[conversation_id] = _Held(claim, now + self.ttl)
        return Taken(claim, fresh=held is None or held.until <= now)

    def held(self, conversation_id: str) -> Claim | None:
        """The conversation's claim as this deliverer holds it now (its newest epoch),
        None when it holds none that has not lapsed."""
        held = self._held.get(conversation_id)
        return held.claim if held is not None and held.until > self.clock.now() else None

    def lost(self, claim: Claim) -> None:
        """A fenced write found ``claim`` taken over: another process delivers now."""
        held = self._held.get(claim.conversation_id)
        if held is not None and held.claim == claim:
            del self._held[claim.conversation_id]
        self._elsewhere[claim.conversation_id] = self.clock.now() + self.ttl / 3

    def forget_idle(self, busy: set[str]) -> None:
        """Forget the claims that have lapsed (no statement: they lapse in the store too),
        except those of ``busy`` conversations."""
        now = self.clock.now()
        self._held = {c: h for c, h in self._held.items() if c in busy or h.until > now}
        self._elsewhere = {c: t for c, t in self._elsewhere.items() if t > now}

    async def release(self) -> None:
        """Give every claim still held up (at shutdown, once nothing is being sent), so
        another process delivers these conversations at once rather than after ``ttl``."""
        now = self.clock.now()
        held = [h.claim for h in self._held.values() if h.until > now]
        self._held.clear()
        await self._store.release_claims(held)


class ClaimedDelivery:
    """A worker's claim before each send, and what taking or losing one changes.

    ``claims``: None when this deliverer sends every pending row (one process);
    ``claimed_elsewhere``: called with a conversation another live process delivers.
    """

    def __init__(
        self,
        claims: HeldClaims | None,
        known: KnownRows,
        attempts: Attempts,
        claimed_elsewhere: Callable[[str], None],
    ) -> None:
        self._claims = claims
        self._known = known
        self._attempts = attempts
        self._claimed_elsewhere = claimed_elsewhere

    async def may_send(self, conversation_id: str) -> bool:
        """Take (or keep) the conversation's claim for the worker's next send; whether
        this process delivers it now. A claim taken anew has the conversation's rows
        read from the store again; one taken over has them sent ``maybe_sent``; the
        worker's task writes under it (:func:`conversations.store.claims.deliver_under`)."""
        if self._claims is None:
            return True
        taken = await self._claims.take(conversation_id)
        if taken is None:
            self._known.forget_conversation(conversation_id)
            self._claimed_elsewhere(conversation_id)
            return False
        if taken.fresh:
            self._known.refresh(conversation_id)
        if taken.claim.taken_over:
            self._attempts.suspect_conversations.add(conversation_id)
        deliver_under(taken.claim)
        return True

    def held(self, conversation_id: str) -> Claim | None:
        """The conversation's claim held now (:meth:`HeldClaims.held`); None without claims."""
        return None if self._claims is None else self._claims.held(conversation_id)

    def opened(self, claim: Claim) -> None:
        """Hold ``claim`` (:meth:`HeldClaims.opened`)."""
        if self._claims is not None:
            self._claims.opened(claim)

    def elsewhere(self, conversation_id: str, now: float) -> bool:
        """Whether another process delivers the conversation now (:meth:`HeldClaims.elsewhere`)."""
        return self._claims is not None and self._claims.elsewhere(conversation_id, now)

    def forget_idle(self, busy: set[str]) -> None:
        """Forget lapsed claims but those of ``busy`` (:meth:`HeldClaims.forget_idle`)."""
        if self._claims is not None:
            self._claims.forget_idle(busy)

    async def release(self) -> None:
        """Give every claim held up (:meth:`HeldClaims.release`)."""
        if self._claims is not None:
            await self._claims.release()

    async def pass_over(
        self,
        platform: str | None,
        channel: str | None,
        patience: float,
        suspects: int | None,
        nudge: Callable[[], Awaitable[None]],
    ) -> None:
        """Return once no message in ``channel`` may be out without its stored id.

        That is: no send in flight now, and no pending row of ``platform`` and
        ``channel`` up to ``suspects`` (an outbox id; None: none is suspect) that an
        earlier process may have sent already (it crashed between the platform's answer
        and storing the id; the row is sent again, which finds the message, and stores
        its id: ``nudge`` has the deliverer go round), nor, with several instances, that
        another one may be sending now. Waits at most ``patience`` seconds (a rate limit
        may hold rows up).
        """
        await self._attempts.settled()
        if platform is None or channel is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(patience):
                if suspects is not None:
                    while await self._known.has_pending_in(platform, channel, up_to=suspects):
                        await nudge()
                await self.sent_elsewhere(platform, channel)

    async def sent_elsewhere(self, platform: str, channel: str) -> None:
        """Return once no row of ``platform``'s ``channel`` written so far is pending:
        another instance may be sending one now (its message out, its id not stored
        yet), and it says nothing here when done, so the store is looked at every
        :data:`LOOK_AGAIN` seconds. At once without claims (one process); the caller
        bounds the wait."""
        if self._claims is None:
            return
        up_to = await self._known.last_outbox_id()
        while await self._known.has_pending_in(platform, channel, up_to=up_to):
            await self._claims.clock.sleep(LOOK_AGAIN)

    def lost(self, lost: ClaimLost) -> None:
        """A send's fenced write found the claim taken over: forget the conversation."""
        log.warning("%s; its rows are that process's to send", lost)
        if self._claims is not None:
            self._claims.lost(lost.claim)
        self._known.forget_conversation(lost.claim.conversation_id)

    def done(self, conversation_id: str) -> None:
        """Nothing of the conversation is pending: its rows are no longer suspect."""
        self._attempts.suspect_conversations.discard(conversation_id)
