"""The dispatcher: finds conversations with pending rows and runs a worker for each."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping

from conversations.adapter import Sender
from conversations.channels import ProgressMode
from conversations.errors import DeliveryError
from conversations.events import PostReply
from conversations.outbox._attempt import Attempts
from conversations.outbox._clock import Clock, as_clock, wait_for_event
from conversations.outbox._redact import redacting
from conversations.outbox._status import StatusWorker
from conversations.outbox._worker import (
    Context,
    ConversationState,
    ConversationWorker,
    Deferral,
    RepliesWorker,
)
from conversations.store import Outbox
from core.context import random_id
from core.faults import NO_FAULTS, Faults
from core.secrets import NO_SECRETS, Redactor

log = logging.getLogger("conversations.outbox")

ModeLookup = Callable[[str], Awaitable[ProgressMode]]
"""The progress mode of a conversation, by its id (its channel's setting)."""

LOOKAHEAD = 4
"""Conversations read per look at the store, per worker slot: those that do not fit
start as workers end, without another look (a look costs a scan of pending rows)."""


class Deliverer:
    """Delivers every outbox row: one worker per conversation, ``concurrency`` at once.

    ``progress_mode`` and ``note_interval`` (seconds) say how notes are shown
    (``progress_mode_of``, when given, says it per conversation: its channel's);
    ``max_attempts``: failed attempts (429s not counted) before a row fails for
    good; ``concurrency``: conversations delivered at once; ``poll_interval``:
    seconds between looks at the store for rows that no :meth:`wake` announced
    (another process wrote them); ``clock``: a :class:`Clock`, or a bare callable
    of monotonic seconds (then sleeps are real); ``faults``: the crash points;
    ``redactor``: the bot's secrets, taken out of every text sent through any sender,
    given here or added later (:mod:`conversations.outbox._redact` says why there).
    """

    def __init__(
        self,
        *,
        outbox: Outbox,
        senders: Mapping[str, Sender],
        progress_mode: ProgressMode = "replies",
        progress_mode_of: ModeLookup | None = None,
        note_interval: float = 3.0,
        max_attempts: int = 5,
        concurrency: int = 8,
        poll_interval: float = 2.0,
        clock: Clock | Callable[[], float] = time.monotonic,
        faults: Faults = NO_FAULTS,
        redactor: Redactor = NO_SECRETS,
    ) -> None:
        self._outbox = outbox
        self._clock = as_clock(clock)
        self._redactor = redactor
        self._attempts = Attempts(
            outbox=outbox,
            senders={p: redacting(s, redactor) for p, s in senders.items()},
            clock=self._clock,
            faults=faults,
            max_attempts=max_attempts,
        )
        self._ctx = Context(
            outbox=outbox,
            attempts=self._attempts,
            clock=self._clock,
            note_interval=note_interval,
            draining=lambda: self._draining > 0,
        )
        self._progress_mode = progress_mode
        self._progress_mode_of = progress_mode_of
        self._concurrency = max(1, concurrency)
        self._poll = poll_interval
        self._wakeup = asyncio.Event()
        self._progress = asyncio.Event()
        self._workers: dict[str, asyncio.Task[Deferral | None]] = {}
        self._deferred: dict[str, Deferral] = {}
        self._ready: deque[str] = deque()
        """Conversations read from the store, ready, not started yet (oldest row first)."""
        self._stale = True
        self._wakes = 0
        self._states: dict[str, ConversationState] = {}
        self._failure: BaseException | None = None
        self._running = False
        self._driving = False
        self._draining = 0
        self._suspects_known = False
        self._swept_at = -math.inf

    def add_sender(self, sender: Sender) -> None:
        """Route rows of ``sender.platform`` to ``sender`` (what it sends is redacted)."""
        self._attempts.senders[sender.platform] = redacting(sender, self._redactor)

    def wake(self) -> None:
        """Look at the outbox now (the store calls this after a commit that wrote rows)."""
        self._wakes += 1
        self._stale = True
        self._wakeup.set()

    async def run(self) -> None:
        """Deliver until cancelled; raises what a worker or the store raised.

        May be called again after it ended (a supervisor restarts it): it starts
        from the store, and rows an ended worker may have sent are looked for first
        (``maybe_sent``) before they are sent again. Raises ``RuntimeError`` when
        it is running already.
        """
        if self._running:
            raise RuntimeError("the deliverer is running already")
        self._running = True
        self._suspects_known = False
        self._stale = True
        try:
            await self._loop(until_idle=False)
        finally:
            self._running = False
            await self._stop_workers()
            self._notify()

    async def drain(self) -> None:
        """Return once nothing is pending in the store and no worker is busy.

        Held notes are flushed at once meanwhile; rate limits and backoffs are
        waited out. Without :meth:`run` going, delivers by itself. Raises what a
        worker or the store raised.
        """
        self._draining += 1
        self.wake()  # held notes are ready now
        try:
            while True:
                if not (self._running or self._driving):
                    await self._drive()
                    if not self._running:
                        return
                    continue
                progress = self._progress  # taken first: what happens while we look counts
                if await self._idle():
                    return
                await progress.wait()  # a pass, or a worker's end
        finally:
            self._draining -= 1

    async def pass_over(
        self, *, platform: str | None = None, channel: str | None = None, patience: float = 5.0
    ) -> None:
        """Return once no message in ``channel`` may be out without its stored id.

        That is: no send in flight now, and no pending row of ``platform`` and
        ``channel`` that an earlier process may have sent already (it crashed
        between the platform's answer and storing the id; the row is sent again,
        which finds the message, and stores its id). The hub calls this when a
        reaction names a message it does not know. Waits at most ``patience``
        seconds for such rows (a rate limit may hold them up).
        """
        await self._attempts.settled()
        if platform is None or channel is None or not self._suspects_known:
            return
        suspects = self._attempts.suspect_up_to
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(patience):
                while await self._outbox.has_pending_in(platform, channel, up_to=suspects):
                    self.wake()
                    await self._progress.wait()

    async def send_now(self, action: PostReply) -> None:
        """Send a reply that belongs to no conversation (e.g. "nothing to stop"), once.

        Failures are logged, not raised: the person can simply ask again.
        """
        sender = self._attempts.senders.get(action.ref.platform)
        if sender is None:
            return
        try:
            await sender.send(action, idempotency_key=f"tb-now-{random_id()}")
        except DeliveryError as exc:
            log.warning("could not send a notice: %s", exc)

    # --- the dispatcher loop ---------------------------------------------------------

    async def _drive(self) -> None:
        self._driving = True
        try:
            await self._loop(until_idle=True)
        finally:
            self._driving = False
            self._notify()

    async def _loop(self, *, until_idle: bool) -> None:
        """Start workers for ready conversations until cancelled (or idle, or run() took over)."""
        if not self._suspects_known:
            self._attempts.suspect_up_to = await self._outbox.last_outbox_id()
            self._suspects_known = True
        while True:
            self._raise_failure()
            look, self._stale = self._stale, False
            self._wakeup.clear()
            found, due = await self._pass(look=look)
            self._notify()
            if until_idle and (self._running or (not found and not self._workers)):
                return
            timeout = self._poll if due is None else min(self._poll, due - self._clock.now())
            await wait_for_event(self._clock, self._wakeup, max(timeout, 0.0))
            if not self._wakeup.is_set():
                self._stale = True  # the poll timer, or a deferral's time: look again

    async def _pass(self, *, look: bool) -> tuple[bool, float | None]:
        """Start what is ready; whether anything is pending, and when a deferral falls due.

        The store is asked only when ``look`` (woken, or a timer ran out) or when
        no conversation read before is left to start; a worker's end alone starts
        the next one read before.
        """
        free = self._concurrency - len(self._workers)
        if free <= 0:
            return True, None  # a worker that ends wakes the loop
        now = self._clock.now()
        found = await self._look(now) if look or not self._ready else True
        while free > 0 and self._ready:
            conversation_id = self._ready.popleft()
            if conversation_id not in self._workers and conversation_id not in self._deferred:
                self._start(conversation_id)
                free -= 1
        self._sweep(now)
        due = min((d.until for d in self._deferred.values()), default=None)
        return found, due

    async def _look(self, now: float) -> bool:
        """Read the conversations with pending rows into the ready queue; whether any are."""
        limit = self._concurrency * LOOKAHEAD + len(self._deferred) + len(self._workers)
        pending = await self._outbox.pending_conversations(limit)
        draining = self._draining > 0
        self._ready.clear()
        for conversation_id, milestone in pending:
            if conversation_id in self._workers:
                continue
            deferral = self._deferred.get(conversation_id)
            if deferral is not None:
                if not deferral.ready(now, milestone=milestone, draining=draining):
                    continue
                del self._deferred[conversation_id]
            self._ready.append(conversation_id)
        if len(pending) < limit:  # every pending conversation was seen: forget the others' waits
            seen = {conversation_id for conversation_id, _ in pending}
            self._deferred = {c: d for c, d in self._deferred.items() if c in seen}
        return bool(pending)

    def _start(self, conversation_id: str) -> None:
        self._deferred.pop(conversation_id, None)
        state = self._states.setdefault(conversation_id, ConversationState())
        task = asyncio.create_task(
            self._deliver(conversation_id, state), name=f"deliver {conversation_id}"
        )
        self._workers[conversation_id] = task
        done = functools.partial(self._finished, conversation_id, self._wakes)
        task.add_done_callback(done)

    async def _deliver(self, conversation_id: str, state: ConversationState) -> Deferral | None:
        """Run a worker of the conversation's progress mode."""
        mode = self._progress_mode
        if self._progress_mode_of is not None:
            mode = await self._progress_mode_of(conversation_id)
        worker_type: type[ConversationWorker] = StatusWorker if mode == "status" else RepliesWorker
        return await worker_type(self._ctx, conversation_id, state).run()

    def _finished(
        self, conversation_id: str, wakes: int, task: asyncio.Task[Deferral | None]
    ) -> None:
        """A worker ended: keep its deferral or its error, forget an idle state, go on."""
        self._workers.pop(conversation_id, None)
        deferral: Deferral | None = None
        if not task.cancelled():
            if (error := task.exception()) is not None:
                self._failure = self._failure or error
            elif (deferral := task.result()) is not None:
                self._deferred[conversation_id] = deferral
        state = self._states.get(conversation_id)
        if (
            deferral is None
            and state is not None
            and state.idle(self._clock.now(), self._ctx.note_interval)
        ):
            del self._states[conversation_id]
        if self._wakes != wakes:  # rows came meanwhile; a look while it ran skipped it
            self._stale = True
        self._wakeup.set()
        self._notify()

    def _sweep(self, now: float) -> None:
        """Forget, now and then, the state of conversations with nothing to remember."""
        if now - self._swept_at < self._poll:
            return
        self._swept_at = now
        interval = self._ctx.note_interval
        self._states = {
            c: s
            for c, s in self._states.items()
            if c in self._workers or c in self._deferred or not s.idle(now, interval)
        }

    def _raise_failure(self) -> None:
        if self._failure is not None:
            error, self._failure = self._failure, None
            raise error

    def _notify(self) -> None:
        """Wake whoever waits for progress (a drain)."""
        self._progress.set()
        self._progress = asyncio.Event()

    async def _idle(self) -> bool:
        return not self._workers and not await self._outbox.pending_conversations(1)

    async def _stop_workers(self) -> None:
        workers = list(self._workers.values())
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
