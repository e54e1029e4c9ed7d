"""This process's slots: asked of the store, waited for, held, renewed and freed.

The store decides who holds a slot (:mod:`conversations.store.slots`); this module is
the process's side of it (docs/architecture.md, "Limits and priorities"):

- :meth:`Slots.held` asks for a slot, waits until the store grants it and frees it
  when the block ends, however it ends (a stop's cancellation included: the row is
  deleted, and the pass that deletes it grants the next in line).
- A pass made here that granted one of them tells its waiter at once. While rows of
  this process wait, one task looks at where they stand every ``poll`` seconds, in one
  read for all of them, and sooner when told: a wake-up from another process whose
  pass granted one (:attr:`conversations.store.wakeups.Topic.SLOT`,
  :meth:`Slots.look`). A look counts the runs ahead only of the rows whose watcher
  wants a count now (:class:`Watcher`: a queued message due to be posted or edited),
  and a look that finds a pass would change something (a holder gone, a row past its
  expiry) runs one.
- Every row of this process is renewed with the leases, by the same task
  (:meth:`conversations.store.leases.Leases.keep_renewed` calls :meth:`Slots.renew_all`),
  so a process that dies loses its slots ``ttl`` seconds later (at once for another
  process of its host).
- :meth:`Slots.drop_earlier`, at the start, drops the rows left under the process's
  name by its earlier life (a restart under the same ``THREADBOT_INSTANCE``).
- :meth:`Slots.steps` is core's :class:`core.run.slots.StepSlots`: a model call or a
  command waits for a ``model`` or ``command`` slot under the cluster's limits.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

from conversations.store.slots import (
    Category,
    Limits,
    Passed,
    SlotAsk,
    SlotStore,
    Standing,
)
from conversations.store.wakeups import Topic, Wakeup, Wakeups
from core.run.slots import StepCategory

log = logging.getLogger(__name__)


class Watcher(Protocol):
    """Told where a waiting row stands while it waits (a queued message)."""

    def wants_count(self) -> bool:
        """Whether the next look should count the runs ahead (a count is a read of the
        queue: asked only when the count would be shown)."""
        ...

    async def moved(self, standing: Standing) -> None:
        """Where the row stands, its runs ahead counted (at each look that counted them)."""
        ...


@dataclass(frozen=True, kw_only=True)
class SlotLimits:
    """The limits of the bot's settings that are not per channel: runs at once in this
    process (``max_runs``) and in every process on the database (``cluster_max_runs``),
    model calls and commands at once in the cluster, and the seconds of waiting that
    raise a run's priority by one (``priority_aging``; None: none)."""

    max_runs: int | None = None
    cluster_max_runs: int | None = None
    model_calls_at_once: int | None = None
    commands_at_once: int | None = None
    priority_aging: float | None = 60.0


@dataclass
class _Waiter:
    standing: Standing
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    dropped: bool = False
    watcher: Watcher | None = None


@dataclass
class _Run:
    """A run holding its slot here: what its steps ask with."""

    workspace: str
    user: str
    priority: int


class Slots:
    """The slots of one process (``owner``, as its leases have it) in ``store``.

    ``ttl``: seconds a row lasts without renewal (the leases' ``lease_ttl``); ``poll``:
    seconds between two looks while rows wait (``wakeup_poll``); ``wakeups`` tells the
    other processes when a pass here granted one of their rows.
    """

    def __init__(
        self,
        *,
        store: SlotStore,
        owner: str,
        limits: SlotLimits,
        ttl: float = 60.0,
        poll: float = 1.0,
        wakeups: Wakeups | None = None,
    ) -> None:
        self._store = store
        self.owner = owner
        self.limits = limits
        self._ttl = ttl
        self._poll = poll
        self._wakeups = wakeups
        self._waiting: dict[int, _Waiter] = {}
        self._held: set[int] = set()
        self._early: set[int] = set()
        """Rows of this process a pass granted before their ask came back."""
        self._runs: dict[str, _Run] = {}
        self._look = asyncio.Event()
        self._looking: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[object]] = set()

    @property
    def aging(self) -> float | None:
        """Seconds of waiting that raise a row's priority by one."""
        return self.limits.priority_aging

    @contextlib.asynccontextmanager
    async def held(self, ask: SlotAsk, watcher: Watcher | None = None) -> AsyncIterator[Standing]:
        """Hold a slot for ``ask`` for the block (see the module docstring); ``watcher``
        is told where the row stands at each look that counted the runs ahead for it
        while it waits, never when granted at once. Yields the row's standing as it was
        granted (its ``enqueued_at`` says since when it waited). Raises what the store
        raises for the ask."""
        slot_id, standing = await self._asked(ask)
        try:
            while not standing.held:
                waited = await self._wait(standing, watcher)
                if waited is None:  # dropped while it waited (taken for gone): ask again
                    slot_id, standing = await self._asked(ask)
                    continue
                standing = waited
            if ask.category is Category.RUN:
                self._runs[ask.conversation_id] = _Run(ask.workspace, ask.user, ask.priority)
            yield standing
        finally:
            if ask.category is Category.RUN:
                self._runs.pop(ask.conversation_id, None)
            self._forget(slot_id)
            self._held.discard(slot_id)
            await asyncio.shield(self._release(slot_id))

    def steps(self) -> StepSlotsHere:
        """Core's step slots (:class:`core.run.slots.StepSlots`) over this process's slots."""
        return StepSlotsHere(self)

    def look(self) -> None:
        """Look at where the waiting rows stand now (a pass may have granted one)."""
        self._look.set()

    async def renew_all(self) -> None:
        """Renew every row of this process (called with the leases' renewal); a row found
        dropped (this process was taken for gone) is asked again by its waiter."""
        ids = set(self._waiting) | self._held
        if not ids:
            return
        kept = await self._store.renew_slots(self.owner, ids, ttl=self._ttl)
        for slot_id in ids - kept:
            log.warning("slot %s was dropped (this process was taken for gone)", slot_id)
            if (waiter := self._waiting.get(slot_id)) is not None:
                waiter.dropped = True  # its wait sees the row gone and asks again
                waiter.changed.set()

    async def drop_earlier(self) -> int:
        """Drop the rows the store keeps under this process's name from before it started
        (a restart under the same ``THREADBOT_INSTANCE``, which takes its leases back at
        once too): no waiter here has them, and a name, unlike a ``host:pid``, never
        looks gone, so they would hold their slots, and the queue behind them, until
        they lapsed ``ttl`` seconds on. Each drop runs its category's pass. Call it
        before this process asks for a slot; how many were dropped."""
        mine = set(self._waiting) | self._held | self._early
        earlier = [s.id for s in await self._store.slots() if s.holder == self.owner]
        dropped = [slot_id for slot_id in earlier if slot_id not in mine]
        for slot_id in dropped:
            await self._release(slot_id)
        if dropped:
            log.info("dropped %d slot(s) this instance held before it started", len(dropped))
        return len(dropped)

    async def _asked(self, ask: SlotAsk) -> tuple[int, Standing]:
        """Ask the store; a cancellation while the ask is under way deletes the row once
        it is written, so no row is left behind."""
        task = asyncio.ensure_future(
            self._store.ask_slot(ask, holder=self.owner, ttl=self._ttl, aging=self.aging)
        )
        try:
            passed = await asyncio.shield(task)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                written = await task
                if written.standing is not None:
                    self._early.discard(written.standing.slot_id)
                    await self._release(written.standing.slot_id)
            raise
        self._granted(passed)
        standing = passed.standing
        assert standing is not None  # a row of this live process is never dropped at once
        if standing.slot_id in self._early:  # another pass here granted it meanwhile
            self._early.discard(standing.slot_id)
            standing = Standing(standing.slot_id, True, 0, standing.enqueued_at)
        if standing.held:
            self._held.add(standing.slot_id)
        else:
            self._waiting[standing.slot_id] = _Waiter(standing)
        return standing.slot_id, standing

    async def _wait(self, standing: Standing, watcher: Watcher | None) -> Standing | None:
        """Wait until the row ``standing`` is granted, telling ``watcher`` at each look
        that counted; None when the row was dropped meanwhile."""
        slot_id = standing.slot_id
        waiter = self._waiting[slot_id]
        waiter.watcher = watcher
        self._keep_looking()
        while True:
            await waiter.changed.wait()
            waiter.changed.clear()
            if waiter.dropped:
                self._forget(slot_id)
                return None
            standing = waiter.standing
            if standing.held:
                self._forget(slot_id)
                self._held.add(slot_id)
                return standing
            if watcher is not None and standing.ahead is not None:
                await watcher.moved(standing)

    def _forget(self, slot_id: int) -> None:
        """The row waits no more; with none left, the looking task ends now."""
        self._waiting.pop(slot_id, None)
        if not self._waiting:
            self._look.set()

    def _keep_looking(self) -> None:
        if self._looking is None or self._looking.done():
            self._looking = asyncio.create_task(  # not the first waiter's lease nor log context
                self._looking_loop(), name="slots", context=contextvars.Context()
            )

    async def _looking_loop(self) -> None:
        """Look at every waiting row of this process, each ``poll`` seconds or when told,
        until none waits; a failed look is logged and tried again at the next."""
        while self._waiting:
            self._look.clear()  # before the look: one asked for meanwhile comes next
            try:
                await self._look_once()
            except Exception:
                log.exception("could not look at the slots; trying again in %g s", self._poll)
            if not self._waiting:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._look.wait(), self._poll)

    async def _look_once(self) -> None:
        ids = list(self._waiting)
        if not ids:
            return
        counted = [i for i, w in self._waiting.items() if w.watcher and w.watcher.wants_count()]
        standings = await self._store.slot_standings(ids, counted=counted)
        for category in standings.stale:
            self._granted(await self._store.grant_slots(category))
        if standings.stale:
            standings = await self._store.slot_standings(ids, counted=counted)
        for slot_id in ids:
            waiter = self._waiting.get(slot_id)
            if waiter is None or waiter.standing.held:
                continue
            found = standings.of.get(slot_id)
            if found is None:  # dropped: this process was taken for gone; ask again
                log.warning("slot %s was dropped while it waited; asking again", slot_id)
                waiter.dropped = True
            elif not found.held and found.ahead is None:
                continue  # still waiting, not counted: nothing to tell
            else:
                waiter.standing = found
            waiter.changed.set()

    async def _release(self, slot_id: int) -> None:
        try:
            self._granted(await self._store.release_slot(slot_id))
        except Exception:
            log.exception("could not free slot %s; it lapses once no longer renewed", slot_id)

    def _granted(self, passed: Passed) -> None:
        """A pass granted rows: tell their waiters here at once (a row whose ask has not
        come back yet is kept for it), tell the other holders."""
        for granted in passed.granted:
            if granted.holder == self.owner:
                waiter = self._waiting.get(granted.slot_id)
                if waiter is None:
                    self._early.add(granted.slot_id)
                    continue
                was = waiter.standing
                waiter.standing = Standing(was.slot_id, True, 0, was.enqueued_at)
                waiter.changed.set()
            elif self._wakeups is not None and self._wakeups.carried:
                wakeup = Wakeup(Topic.SLOT, granted.conversation_id, self.owner)
                task = asyncio.ensure_future(self._wakeups.tell(wakeup))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    def run_of(self, conversation_id: str) -> tuple[str, str, int]:
        """The workspace, person and priority of the conversation's run held here (the
        steps of a run ask with them), or empty keys and priority 0."""
        run = self._runs.get(conversation_id)
        return ("", "", 0) if run is None else (run.workspace, run.user, run.priority)


class StepSlotsHere:
    """:class:`core.run.slots.StepSlots` over a process's :class:`Slots`: a ``model``
    step waits under ``model_calls_at_once``, a ``command`` under ``commands_at_once``
    (both in the cluster; None: no wait, no row), at its run's priority."""

    def __init__(self, slots: Slots) -> None:
        self._slots = slots

    @contextlib.asynccontextmanager
    async def hold(self, conversation_id: str, category: StepCategory) -> AsyncIterator[None]:
        """Hold a slot of ``category`` for the conversation's step, for the block."""
        limits = self._slots.limits
        most = limits.model_calls_at_once if category == "model" else limits.commands_at_once
        if most is None:
            yield
            return
        workspace, user, priority = self._slots.run_of(conversation_id)
        ask = SlotAsk(
            conversation_id=conversation_id,
            category=Category.MODEL if category == "model" else Category.COMMAND,
            limits=Limits(cluster=most),
            workspace=workspace,
            user=user,
            priority=priority,
        )
        async with self._slots.held(ask):
            yield
