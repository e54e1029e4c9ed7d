"""The dispatcher: runs a worker for each conversation with pending rows it knows of.

The rows come from the commits that wrote them (:meth:`Deliverer.wake` with rows,
kept in :class:`~conversations.outbox._known.KnownRows`); the store is looked at
only at start, every ``poll_interval`` seconds, and when woken without rows.
With several processes on one database, a conversation's rows are sent by the holder
of its delivery claim alone (:mod:`conversations.outbox._claims`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable, Container, Mapping, Sequence

from conversations.adapter import Sender
from conversations.channels import ProgressMode
from conversations.events import PostReply
from conversations.outbox._attempt import Attempts, ThreadStarted
from conversations.outbox._claims import ClaimedDelivery, HeldClaims
from conversations.outbox._clock import Clock, as_clock, wait_for_event
from conversations.outbox._known import KnownRows, Looks
from conversations.outbox._marks import write_due
from conversations.outbox._redact import redacting
from conversations.outbox._status import StatusWorker
from conversations.outbox._streams import AnswerStreams
from conversations.outbox._worker import (
    Context,
    ConversationState,
    ConversationWorker,
    Deferral,
    RepliesWorker,
)
from conversations.store import Outbox, OutboxRecord
from conversations.store.claims import Claim, ClaimLost, DeliveryClaims
from core.faults import NO_FAULTS, Faults
from core.secrets import NO_SECRETS, Redactor

log = logging.getLogger("conversations.outbox")

ModeLookup = Callable[[str], Awaitable[ProgressMode]]
"""The progress mode of a conversation, by its id (its channel's setting)."""

LOOKAHEAD = 4
"""Conversations listed per look at the store, per worker slot (a look costs a scan of
pending rows); those left out are found by a later look."""


class Deliverer:
    """Delivers every outbox row: one worker per conversation, ``concurrency`` at once.

    ``progress_mode`` and ``note_interval`` (seconds) say how notes are shown
    (``progress_mode_of``, when given, says it per conversation: its channel's);
    ``plan_interval``: seconds between two edits of one plan's card;
    ``max_attempts``: failed attempts (429s not counted) before a row fails for
    good; ``concurrency``: conversations delivered at once; ``poll_interval``:
    seconds between looks at the store for rows that no :meth:`wake` handed over
    (another process wrote them, or a tool); ``hold_marks``: seconds at most that the mark
    of a row whose sending twice changes nothing waits for the conversation's next one
    (:mod:`conversations.outbox._attempt`); ``clock``: a :class:`Clock`, or a bare callable
    of monotonic seconds (then sleeps are real); ``faults``: the crash points;
    ``redactor``: the bot's secrets, taken out of every text sent through any sender,
    given here or added later (:mod:`conversations.outbox._redact` says why there).
    ``claims``: the store's delivery claims, taken as ``owner`` for ``claim_ttl``
    seconds (several processes on one database; without them this deliverer sends
    every pending row); ``claimed_elsewhere`` is called with the id of a conversation
    whose rows another live process delivers (the bot tells that process).
    ``on_sent`` is called with the platform and the seconds it took to take each action
    it took (an operator's delivery latency, ``/metrics``); ``on_thread`` is awaited with
    each thread a ``StartThread`` row started (:mod:`conversations.outbox._attempt`);
    ``streams`` streams the answers while they are written, through the senders that
    can (:mod:`conversations.outbox._streams`).
    """

    def __init__(
        self,
        *,
        outbox: Outbox,
        senders: Mapping[str, Sender],
        progress_mode: ProgressMode = "replies",
        progress_mode_of: ModeLookup | None = None,
        note_interval: float = 3.0,
        plan_interval: float = 1.0,
        max_attempts: int = 5,
        concurrency: int = 8,
        poll_interval: float = 2.0,
        hold_marks: float = 1.0,
        clock: Clock | Callable[[], float] = time.monotonic,
        faults: Faults = NO_FAULTS,
        redactor: Redactor = NO_SECRETS,
        claims: DeliveryClaims | None = None,
        owner: str = "",
        claim_ttl: float = 60.0,
        claimed_elsewhere: Callable[[str], None] = lambda _id: None,
        on_sent: Callable[[str, float], None] = lambda _platform, _seconds: None,
        on_thread: ThreadStarted | None = None,
        streams: AnswerStreams | None = None,
    ) -> None:
        self._known, self._clock = KnownRows(outbox, hold_marks), as_clock(clock)
        held = HeldClaims.of(claims, owner=owner, ttl=claim_ttl, clock=self._clock)
        self._streams = streams or AnswerStreams()
        self._raw, self._redactor = dict(senders), redactor
        self._attempts = Attempts(
            outbox=self._known,
            senders={p: redacting(s, redactor) for p, s in senders.items()},
            clock=self._clock,
            faults=faults,
            max_attempts=max_attempts,
            on_sent=on_sent,
            on_thread=on_thread,
        )
        self._gate = ClaimedDelivery(held, self._known, self._attempts, claimed_elsewhere)
        self._ctx = Context(
            outbox=self._known,
            attempts=self._attempts,
            may_send=self._gate.may_send,
            clock=self._clock,
            note_interval=note_interval,
            plan_interval=plan_interval,
            draining=lambda: self._draining > 0,
            streams=self._streams,
        )
        self._progress_mode, self._progress_mode_of = progress_mode, progress_mode_of
        self._concurrency, self._poll = max(1, concurrency), poll_interval
        self._wakeup, self._progress = asyncio.Event(), asyncio.Event()
        self._workers: dict[str, asyncio.Task[Deferral | None]] = {}
        self._deferred: dict[str, Deferral] = {}
        self._looks = Looks(poll_interval)
        self._states: dict[str, ConversationState] = {}
        self._failure: BaseException | None = None
        self._running = self._driving = self._suspects_known = False
        self._draining, self._swept_at = 0, -math.inf
        self._streams.attach(self._workers, self._known, self._gate, self._raw, self._clock)

    def add_sender(self, sender: Sender) -> None:
        """Route rows of ``sender.platform`` to ``sender`` (what it sends is redacted)."""
        self._attempts.senders[sender.platform] = redacting(sender, self._redactor)
        self._raw[sender.platform] = sender

    def opened(self, claim: Claim) -> None:
        """Hold ``claim``: the conversation was opened here, claimed by this process."""
        self._gate.opened(claim)

    def look_at(self, conversation_id: str) -> None:
        """Read the conversation's pending rows from the store now (told by another process)."""
        self._known.refresh(conversation_id)
        self._wakeup.set()

    async def release_claims(self) -> None:
        """Give the delivery claims up (at shutdown, after the last drain)."""
        await self._gate.release()

    def wake(self, rows: Sequence[OutboxRecord] | None = None) -> None:
        """Take ``rows``, the outbox rows a commit wrote (the store's ``on_outbox``): the
        pending ones are sent without reading them back, the others (notes a stop
        dropped) are not sent. Without ``rows``: look at the store at once (rows
        written behind the store's back, or at start)."""
        if rows is None:
            self._looks.ask()
        else:
            self._known.take(rows)
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
        self._looks.ask()  # rows may have come while it was not running
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

        "Pending" is what the commits handed over and the last look at the store
        found; a deliverer never handed any rows (no store tells it what it writes)
        looks at the store first.
        """
        self._draining += 1
        if not self._known.fed:
            self._looks.ask()
        self._wakeup.set()  # held notes are ready now
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
        """Return once no message in ``channel`` may be out without its stored id, waiting
        ``patience`` seconds at most (:meth:`ClaimedDelivery.pass_over`). The hub calls
        this when a reaction names a message it does not know."""
        suspects = self._attempts.suspect_up_to if self._suspects_known else None
        await self._gate.pass_over(platform, channel, patience, suspects, self._nudged)

    async def _nudged(self) -> None:
        """Wake the dispatcher and wait for its next pass, or a worker's end."""
        self.wake()
        await self._progress.wait()

    async def send_now(self, action: PostReply) -> None:
        """Send a reply that belongs to no conversation (e.g. "nothing to stop"), once
        (:meth:`Attempts.send_now`: a failure is logged, not raised)."""
        await self._attempts.send_now(action)

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
            self._attempts.suspect_up_to = await self._known.last_outbox_id()
            self._suspects_known = True
        while True:
            self._raise_failure()
            self._wakeup.clear()
            if self._look_due():
                await self._look()
            found, due = self._pass()
            await self._mark_held(every=self._draining > 0)
            self._notify()
            if until_idle and (self._running or not (found or self._workers or self._known.held)):
                return
            dues = (self._looks.next(), due, self._known.held.next_due())
            timeout = min(d for d in dues if d is not None) - self._clock.now()
            await wait_for_event(self._clock, self._wakeup, max(timeout, 0.0))

    def _look_due(self) -> bool:
        """Whether to look at the store (:class:`Looks`): the last look left some out
        and those it listed are done, among the reasons."""
        rest = self._known.more and self._known.empty() and not self._workers
        return self._looks.due(self._clock.now(), rest=rest)

    async def _look(self) -> None:
        """Look at the store for conversations with pending rows (the fallback)."""
        limit = self._concurrency * LOOKAHEAD + len(self._deferred) + len(self._workers)
        await self._looks.look(self._known, limit, self._clock.now())

    def _pass(self) -> tuple[bool, float | None]:
        """Start the ready conversations, oldest row first, as many as there are free
        slots; whether any conversation is pending, and when a deferral falls due."""
        now = self._clock.now()
        draining = self._draining > 0
        free = self._concurrency - len(self._workers)
        elsewhere: list[str] = []
        for conversation_id, milestone in self._known.conversations():
            if free <= 0:
                break
            if conversation_id in self._workers:
                continue
            if self._gate.elsewhere(conversation_id, now):
                elsewhere.append(conversation_id)  # another process sends these
                continue
            deferral = self._deferred.get(conversation_id)
            if deferral is not None and not deferral.ready(
                now, milestone=milestone, draining=draining
            ):
                continue
            self._start(conversation_id)
            free -= 1
        for conversation_id in elsewhere:
            self._known.forget_conversation(conversation_id)
        self._deferred = {c: d for c, d in self._deferred.items() if self._known.pending(c)}
        self._sweep(now)
        due = min((d.until for d in self._deferred.values()), default=None)
        return not self._known.empty(), due

    async def _mark_held(self, *, every: bool, busy: Container[str] | None = None) -> None:
        """Write the marks held back ``hold_marks`` seconds (``every``: all of them) of the
        conversations no worker sends for (``busy``, by default the workers')."""
        due = self._known.held.due(self._clock.now(), every=every)
        workers = self._workers if busy is None else busy
        await write_due(due, self._mark_held_of, self._gate.lost, busy=workers)

    async def _mark_held_of(self, conversation_id: str) -> None:
        await self._known.mark_held(conversation_id, self._gate.held(conversation_id))

    def _start(self, conversation_id: str) -> None:
        self._deferred.pop(conversation_id, None)
        state = self._states.setdefault(conversation_id, ConversationState())
        task = asyncio.create_task(
            self._deliver(conversation_id, state), name=f"deliver {conversation_id}"
        )
        self._workers[conversation_id] = task
        done = functools.partial(self._finished, conversation_id)
        task.add_done_callback(done)

    async def _deliver(self, conversation_id: str, state: ConversationState) -> Deferral | None:
        """Run a worker of the conversation's progress mode (it sends under the
        conversation's delivery claim: :class:`ClaimedDelivery`)."""
        mode = self._progress_mode
        if self._progress_mode_of is not None:
            mode = await self._progress_mode_of(conversation_id)
        worker_type: type[ConversationWorker] = StatusWorker if mode == "status" else RepliesWorker
        try:
            deferral = await worker_type(self._ctx, conversation_id, state).run()
        except ClaimLost as lost:
            self._gate.lost(lost)
            return None
        if deferral is None:
            self._gate.done(conversation_id)
        return deferral

    def _finished(self, conversation_id: str, task: asyncio.Task[Deferral | None]) -> None:
        """A worker ended: keep its deferral or its error, forget an idle state, go on."""
        self._workers.pop(conversation_id, None)
        self._streams.nudge(conversation_id)
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
            and state.idle(self._clock.now(), self._ctx.note_interval, self._ctx.plan_interval)
        ):
            del self._states[conversation_id]
        self._wakeup.set()
        self._notify()

    def _sweep(self, now: float) -> None:
        """Forget, now and then, the state of conversations with nothing to remember."""
        if now - self._swept_at < self._poll:
            return
        self._swept_at = now
        interval = (self._ctx.note_interval, self._ctx.plan_interval)
        self._gate.forget_idle(set(self._workers))
        self._states = {
            c: s
            for c, s in self._states.items()
            if c in self._workers or c in self._deferred or not s.idle(now, *interval)
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
        """No worker busy, no look at the store due, no pending row known, no mark held."""
        return not (self._workers or self._look_due() or self._known.held) and self._known.empty()

    async def _stop_workers(self) -> None:
        """Cancel the workers, then write the marks their passes held back (at worst the
        rows are sent again at the next start: sending them twice changes nothing)."""
        self._streams.cancel()
        workers = list(self._workers.values())
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        try:
            await self._mark_held(every=True, busy=())
        except Exception:
            log.warning("could not mark the rows held back sent", exc_info=True)
