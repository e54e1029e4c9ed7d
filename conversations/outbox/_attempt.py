"""One delivery attempt: an outbound action for some outbox rows, through its sender.

:meth:`Attempts.send` gives an :data:`Outcome`:

- :class:`Sent`: the platform took the action; the rows are marked sent with the
  platform message id (an edit's: the edited message), so a reaction on that
  message finds its conversation. A :class:`~conversations.events.StartThread`'s
  thread is told first (``on_thread``: the hub binds the scheduled run's
  conversation to it and starts its run), then its row is marked sent. An action
  that changes nothing when sent twice (:func:`harmless_again`: a session status,
  an edit of a request's message) has its mark held back, written with the
  conversation's next one, or alone after at most ``hold_marks`` seconds, at a drain
  or at the deliverer's end (:meth:`~conversations.outbox._known.KnownRows.mark_sent`):
  one ``UPDATE`` for several sends.
- :class:`Refused` with ``rate_limited``: the platform answered 429 and asked us to
  wait ``Retry-After`` (https://docs.slack.dev/apis/web-api/rate-limits,
  https://discord.com/developers/docs/topics/rate-limits). That is no failure: the
  row's ``attempts`` column does not change and it is tried again after the wait,
  however often that happens.
- :class:`Refused` otherwise: one failed attempt of the head row is counted in the
  store; it is ``final`` after ``max_attempts`` or at once when the error is
  permanent, else it may be tried again after an exponential backoff (2, 4, 8...
  seconds, at most 60).

A row that fails for good is reported once in its thread (:meth:`Attempts.give_up`):
a new outbox row of purpose :data:`REPORT`, whose own failure is only logged. The
report says in words what could not be done, why (the adapter's words: "Slack
answered with a server error (HTTP 502)"), and that it will not be tried again; it
takes the failed row's place in the conversation's order, so it goes out before
the rows after it (:meth:`conversations.store.Outbox.pending_rows`). An adapter's
own bug is logged with its traceback and said as an error inside the bot: no
exception's repr reaches a thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import assert_never

from conversations.adapter import Sender
from conversations.errors import DeliveryError, RateLimited
from conversations.events import (
    AddReaction,
    OutboundAction,
    PlatformRef,
    PostReply,
    SetSessionStatus,
    StartThread,
    UpdateMessage,
)
from conversations.outbox._clock import Clock
from conversations.outbox._known import KnownRows
from conversations.plan_cards import PLAN_STEPS
from conversations.render import CLOSED
from conversations.store import Outgoing, PendingSend
from core.context import random_id
from core.faults import Faults

log = logging.getLogger("conversations.outbox")

NOTE = "note"
"""``purpose`` of a progress note row (merged, held back for the note interval)."""
REPORT = "report"
"""``purpose`` of the row that tells a thread a message could not be delivered."""
MAX_BACKOFF = 60.0
"""Seconds, the longest wait between two failed attempts of a row."""
UNEXPECTED = "an unexpected error inside the bot (details in its log)"
"""Why a send failed when the adapter raised something other than a delivery error."""

ThreadStarted = Callable[[str, PlatformRef], Awaitable[None]]
"""``on_thread(conversation id, the thread's ref)``: a :class:`StartThread` was posted."""


async def _no_thread(_conversation_id: str, _thread: PlatformRef) -> None:
    return None


@dataclass(frozen=True)
class Sent:
    """The platform took the action; ``message_id`` is the new message's id, if any."""

    message_id: str | None


@dataclass(frozen=True)
class Refused:
    """The platform did not take the action.

    ``error``: why, in words; ``until``: the clock time (seconds) to try again at;
    ``rate_limited``: a 429, not counted; ``final``: failed for good, because
    ``permanent`` (a retry cannot help) or after ``attempts`` failed attempts.
    """

    error: str
    until: float
    rate_limited: bool = False
    final: bool = False
    permanent: bool = False
    attempts: int = 0


Outcome = Sent | Refused


class Attempts:
    """Sends actions for outbox rows and records each outcome in the outbox.

    ``suspect_up_to``: rows up to this id may have been sent by an earlier process
    (or an attempt cut short), so the sender is told ``maybe_sent`` and looks first;
    so are the rows of ``suspect_conversations``. ``on_sent(platform, seconds)``: after
    each action a platform took, the seconds its sender took (wall time, not ``clock``).
    ``on_thread``: told each thread a :class:`StartThread` started (see the module
    docstring); what it raises is raised here, the row still pending.
    """

    def __init__(
        self,
        *,
        outbox: KnownRows,
        senders: Mapping[str, Sender],
        clock: Clock,
        faults: Faults,
        max_attempts: int,
        on_sent: Callable[[str, float], None] = lambda _platform, _seconds: None,
        on_thread: ThreadStarted | None = None,
    ) -> None:
        self._outbox = outbox
        self._on_sent = on_sent
        self._on_thread = on_thread or _no_thread
        self.senders = dict(senders)
        self._clock = clock
        self._faults = faults
        self._max_attempts = max(1, max_attempts)
        self.suspect_up_to = 0
        self.suspect_conversations: set[str] = set()
        """Conversations whose delivery claim was taken over from another process: any of
        their pending rows may have gone out (cleared once nothing of theirs is pending)."""
        self._in_flight: set[asyncio.Event] = set()

    async def send(self, rows: Sequence[PendingSend], action: OutboundAction) -> Outcome:
        """Perform ``action`` for ``rows`` (``rows[0]`` gives the idempotency key).

        Raises only what the outbox raises; every failure of the sender, even an
        adapter's own bug, is an outcome.
        """
        head = rows[0]
        sender = self.senders.get(action.ref.platform)
        if sender is None:
            return Refused(f"no adapter for {action.ref.platform}", self._clock.now(), final=True)
        done = asyncio.Event()
        self._in_flight.add(done)
        started = time.perf_counter()
        try:
            try:
                message_id = await sender.send(
                    action,
                    idempotency_key=f"tb-{head.id}",
                    maybe_sent=head.id <= self.suspect_up_to
                    or head.conversation_id in self.suspect_conversations,
                )
            except RateLimited as exc:
                log.info("outbox row %s rate-limited for %s s: %s", head.id, exc.retry_after, exc)
                return Refused(str(exc), self._clock.now() + exc.retry_after, rate_limited=True)
            except DeliveryError as exc:
                return await self._failed(head, exc)
            except Exception:  # an adapter's bug must not stop every delivery
                log.exception("sending outbox row %s failed unexpectedly", head.id)
                return await self._failed(head, DeliveryError(UNEXPECTED))
            self._on_sent(action.ref.platform, time.perf_counter() - started)
            self._faults.hit("after_platform_accept")
            if isinstance(action, UpdateMessage):  # the rows are shown in the edited message
                message_id = action.ref.message
            if isinstance(action, StartThread) and message_id is not None:
                await self._on_thread(head.conversation_id, action.thread_ref(message_id))
            later = harmless_again(rows, action)
            await self._outbox.mark_sent(rows, message_id, later=later, now=self._clock.now())
            return Sent(message_id)
        finally:
            done.set()
            self._in_flight.discard(done)

    async def send_now(self, action: PostReply) -> None:
        """Send a reply that belongs to no conversation (e.g. "nothing to stop"), once,
        outside the outbox. Failures are logged, not raised: the person can simply ask
        again."""
        sender = self.senders.get(action.ref.platform)
        if sender is None:
            return
        try:
            await sender.send(action, idempotency_key=f"tb-now-{random_id()}")
        except DeliveryError as exc:
            log.warning("could not send a notice: %s", exc)

    async def settled(self) -> None:
        """Return once every send in flight now has its outcome (and its message id) stored."""
        for done in list(self._in_flight):
            await done.wait()

    async def give_up(
        self, rows: Sequence[PendingSend], action: OutboundAction, refused: Refused
    ) -> None:
        """Mark ``rows`` failed for good and report it once in their thread.

        A failed report (``purpose`` :data:`REPORT`) is only logged, never reported.
        """
        head = rows[0]
        ids = [r.id for r in rows]
        error = refused.error
        report: Outgoing | None = None
        if head.purpose == REPORT:
            log.error("could not tell thread %s about a failure: %s", action.ref.thread, error)
        else:
            log.warning("outbox rows %s failed for good: %s", ids, error)
            thread = action.ref.model_copy(update={"message": None, "user": None})
            report = Outgoing(PostReply(ref=thread, text=report_text(action, refused)), REPORT)
        await self._outbox.fail_for_good(rows, error, report)

    async def _failed(self, head: PendingSend, exc: DeliveryError) -> Refused:
        attempts = await self._outbox.record_failure(head.id, str(exc))
        final = exc.permanent or attempts >= self._max_attempts
        log.warning("delivery of outbox row %s failed (attempt %s): %s", head.id, attempts, exc)
        backoff = min(2.0**attempts, MAX_BACKOFF)
        return Refused(
            str(exc),
            self._clock.now() + backoff,
            final=final,
            permanent=exc.permanent,
            attempts=attempts,
        )


def harmless_again(rows: Sequence[PendingSend], action: OutboundAction) -> bool:
    """Whether sending ``action`` for ``rows`` once more would change nothing anyone sees,
    now or after what follows it: a session's status (set to what it is), or an edit of
    a request's own message (its closing, a plan card's steps: the whole message, made
    from the rows alone; sent again it shows the same, and the edits after it follow
    it again). Not an edit of a status reply or a queued message: those are remade
    from what the deliverer holds, which a restart does not."""
    if isinstance(action, SetSessionStatus):
        return True
    purposes = {row.purpose for row in rows}
    return isinstance(action, UpdateMessage) and purposes <= {CLOSED, PLAN_STEPS}


def report_text(action: OutboundAction, refused: Refused) -> str:
    """What a thread is told about an action that failed for good, in one short line:
    ``⚠️ I could not post a message here (“📋 Plan (v1)”): <why>. I tried 5 times and
    will not try again.`` (or, for a permanent refusal, ``Trying again cannot help,
    so I will not.``)."""
    reason = " ".join(refused.error.split())[:300].rstrip(".")
    match action:
        case PostReply() | StartThread():
            what = f"post a message here (“{_excerpt(action.text)}”)"
        case UpdateMessage():
            what = f"update a message here (“{_excerpt(action.text)}”)"
        case AddReaction():
            what = f"add the :{action.emoji}: reaction here"
        case SetSessionStatus():
            what = f"mark this thread's session {action.status}"
        case _:
            assert_never(action)
    if refused.permanent:
        again = "Trying again cannot help, so I will not."
    elif refused.attempts > 1:
        again = f"I tried {refused.attempts} times and will not try again."
    else:
        again = "I will not try again."
    return f"⚠️ I could not {what}: {reason}. {again}"


def _excerpt(text: str, size: int = 80) -> str:
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= size else line[: size - 1] + "…"
