"""A conversation's worker: sends its pending rows in order until none is left or it must wait.

A worker reads its conversation's pending rows in bounded batches, oldest first (from
the rows the deliverer knows of: :mod:`conversations.outbox._known`),
sends what it can, and ends with either nothing left (None) or a
:class:`Deferral`: when the dispatcher should start a worker for it again. A held
note, a rate limit or a backoff never keeps a worker slot: the worker ends and the
conversation waits in the dispatcher.

:class:`RepliesWorker` is the ``replies`` progress mode: consecutive notes merge
into one reply (at most :data:`NOTE_REPLY_CHARS`), at most one note reply per
``note_interval``; a milestone after them flushes them at once. The ``status``
mode's worker is in :mod:`conversations.outbox._status`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from conversations import logcontext
from conversations.events import ANSWER, OutboundAction, PostReply, UpdateMessage
from conversations.outbox._attempt import NOTE, Attempts, Outcome, Refused, Sent
from conversations.outbox._board import StatusBoard
from conversations.outbox._clock import Clock
from conversations.outbox._closing import closing_edit, queued_edit
from conversations.outbox._known import KnownRows
from conversations.outbox._streams import AnswerStreams
from conversations.plan_cards import PLAN_STEPS
from conversations.render import CLOSED, QUEUED
from conversations.sessions import SESSION
from conversations.store import PendingSend

NOTE_REPLY_CHARS = 3_500
"""Characters of merged notes in one reply: one Slack message (3,900 at most per
part, :mod:`adapters.slack.outbound`), never a file upload."""


@dataclass(frozen=True)
class Deferral:
    """When a conversation is to be taken up again: at ``until`` (clock seconds), or sooner.

    ``on_milestone``: as soon as a row other than a note is pending (held notes
    are flushed before it; a rate-limited status edit does not hold it back).
    ``on_drain``: as soon as a drain asks (notes held for their interval).
    """

    until: float
    on_milestone: bool = False
    on_drain: bool = False

    def ready(self, now: float, *, milestone: bool, draining: bool) -> bool:
        """Whether the conversation may be taken up now."""
        return (
            now >= self.until or (self.on_milestone and milestone) or (self.on_drain and draining)
        )

    def or_sooner(self, other: Deferral | None) -> Deferral:
        """Ready when either is (the earlier time, either trigger)."""
        if other is None:
            return self
        return Deferral(
            until=min(self.until, other.until),
            on_milestone=self.on_milestone or other.on_milestone,
            on_drain=self.on_drain or other.on_drain,
        )


Next = Deferral | Literal["again", "done"]
"""What a worker's step leads to: wait, take another step, or stop (nothing pending)."""


@dataclass(frozen=True)
class Context:
    """What every worker shares: the known rows (over the outbox), the attempts, the clock
    and the settings."""

    outbox: KnownRows
    attempts: Attempts
    may_send: Callable[[str], Awaitable[bool]]
    """Whether this process delivers the conversation now (its delivery claim)."""
    clock: Clock
    note_interval: float
    draining: Callable[[], bool]
    batch: int = 100
    streams: AnswerStreams | None = None
    """The answers streamed while they are written, which their rows finalise."""
    plan_interval: float = 1.0
    """Seconds between two edits of one plan's message (its card's steps)."""


@dataclass
class ConversationState:
    """What the deliverer remembers of a conversation between its workers.

    ``last_note``: clock seconds of the last note reply or status edit;
    ``pinned``: ids of merged notes whose send failed without a known fate, sent
    again as exactly that group (same idempotency key, same text);
    ``board``: the status replies (``status`` mode);
    ``plan_edits``: clock seconds of the last edit of each plan's message, by request id;
    ``parked``: the edits of a plan's steps waiting for its interval, by request id,
    the newest first (one edit, the newest's, shows them all).
    """

    last_note: float = -math.inf
    pinned: tuple[int, ...] = ()
    board: StatusBoard = field(default_factory=StatusBoard)
    plan_edits: dict[str, float] = field(default_factory=dict)
    parked: dict[str, tuple[PendingSend, ...]] = field(default_factory=dict)

    def idle(self, now: float, interval: float, plan_interval: float = 1.0) -> bool:
        """Whether forgetting this state changes nothing."""
        recent = any(now < at + plan_interval for at in self.plan_edits.values())
        return (
            not self.pinned
            and not self.parked
            and not recent
            and self.board.idle()
            and now >= self.last_note + interval
        )


class ConversationWorker(ABC):
    """Delivers one conversation's rows: the shared reading and sending, per mode a step."""

    def __init__(self, ctx: Context, conversation_id: str, state: ConversationState) -> None:
        self.ctx = ctx
        self.conversation_id = conversation_id
        self.state = state

    async def run(self) -> Deferral | None:
        """Take steps until nothing is pending (None) or the conversation must wait."""
        logcontext.conversation.set(self.conversation_id)  # the worker is a task of its own
        while True:
            if not await self.ctx.may_send(self.conversation_id):
                return None  # another process delivers it now
            step = await self.step()
            if step == "done":
                return None
            if isinstance(step, Deferral):
                return step

    @abstractmethod
    async def step(self) -> Next:
        """Send one thing, or say why not (each progress mode has its own)."""

    async def read(self) -> tuple[list[PendingSend], bool]:
        """Up to ``batch`` pending rows not waiting in a status reply, in the
        conversation's order (a report of a failed row first, in that row's place:
        :meth:`conversations.store.Outbox.pending_rows`), as the deliverer knows them
        (:class:`~conversations.outbox._known.KnownRows`: no read of the store).

        The flag says more may follow. Rows waiting in a status reply are paged
        over, so however many wait, the rows after them are read.
        """
        parked = (row.id for rows in self.state.parked.values() for row in rows)
        skip = self.state.board.covered() | set(parked)
        rows: list[PendingSend] = []
        after = 0
        while True:
            page = await self.ctx.outbox.pending_rows(
                self.conversation_id, after=after, limit=self.ctx.batch
            )
            fresh = [row for row in page if row.id not in skip]
            skip.update(row.id for row in fresh)  # a report comes first on every page
            rows += fresh
            if len(page) < self.ctx.batch:
                return rows, False
            if len(rows) >= self.ctx.batch:
                return rows, True
            after = page[-1].id

    async def milestone_follows(
        self, rows: Sequence[PendingSend], notes: Sequence[PendingSend], more: bool
    ) -> bool:
        """Whether a row other than a note is pending after the leading ``notes``."""
        if len(notes) < len(rows):
            return True
        return more and await self.ctx.outbox.has_pending_milestone(
            self.conversation_id, after=rows[-1].id
        )

    def notes_due(self) -> bool:
        """Whether a note reply may go now: a drain, or the interval has passed."""
        return (
            self.ctx.draining()
            or self.ctx.clock.now() >= self.state.last_note + self.ctx.note_interval
        )

    def hold_notes(self) -> Deferral:
        """Notes wait for their interval; a milestone or a drain flushes them sooner."""
        until = self.state.last_note + self.ctx.note_interval
        return Deferral(until=until, on_milestone=True, on_drain=True)

    async def deliver(self, rows: Sequence[PendingSend], action: OutboundAction) -> Outcome:
        """Send ``action`` for ``rows``; a final refusal is given up (and reported) here."""
        outcome = await self.ctx.attempts.send(rows, action)
        if isinstance(outcome, Refused) and outcome.final:
            await self.ctx.attempts.give_up(rows, action, outcome)
        return outcome

    async def milestone(self, row: PendingSend) -> Next:
        """Send ``row``, a row other than a note, and say what follows.

        An edit of a plan's steps (purpose ``plan_steps``, :mod:`conversations.plan_cards`)
        takes along the edits of the same plan still waiting: one edit, the newest's, is
        sent, and every one of them is marked sent with it (the newer says all they say;
        one ``UPDATE``). One that comes less than ``plan_interval`` after the last edit
        of that message waits aside (:meth:`plan_due`) while the rows after it go on, so
        one message is edited at most once per ``plan_interval`` (Slack's
        ``chat.update``, Tier 3: https://docs.slack.dev/reference/methods/chat.update).
        """
        if row.purpose != PLAN_STEPS or row.request_id is None:
            return self.follow(await self.deliver_milestone(row))
        older = self.state.parked.pop(row.request_id, ())
        if self._plan_edit_due(row.request_id):
            return await self._plan_edit(row.request_id, (row, *older))
        self.state.parked[row.request_id] = (row, *older)
        return "again"

    async def plan_due(self) -> Next | None:
        """Send a plan's edit that waited aside and whose time has come, with the newer
        edits of that plan already pending behind it (a drain makes every waiting edit
        due at once: the card is edited once, to its newest steps); None when none has
        come (:meth:`plan_wait` says until when)."""
        for request_id, parked in list(self.state.parked.items()):
            if self._plan_edit_due(request_id):
                del self.state.parked[request_id]
                return await self._plan_edit(request_id, parked)
        return None

    async def _plan_edit(self, request_id: str, rows: Sequence[PendingSend]) -> Next:
        """Send the edit of a plan's steps, ``rows`` (the newest first) and the newer edits
        of that plan pending behind them: the newest's edit, all of them settled by it."""
        pending = await self.ctx.outbox.pending_rows(
            self.conversation_id, after=rows[0].id, limit=self.ctx.batch
        )
        same = (PLAN_STEPS, request_id)
        newer = [r for r in pending if (r.purpose, r.request_id) == same]
        every = (*reversed(newer), *rows)
        return self.follow(await self.deliver_milestone(every[0], every[1:]))

    def plan_wait(self) -> Deferral | None:
        """When the next plan's edit waiting aside may go (a milestone or a drain takes
        the conversation up sooner); None when none waits."""
        if not self.state.parked:
            return None
        interval = self.ctx.plan_interval
        until = min(self.state.plan_edits.get(r, -math.inf) for r in self.state.parked)
        return Deferral(until=until + interval, on_milestone=True, on_drain=True)

    def _plan_edit_due(self, request_id: str) -> bool:
        last = self.state.plan_edits.get(request_id, -math.inf)
        return self.ctx.draining() or self.ctx.clock.now() >= last + self.ctx.plan_interval

    async def deliver_milestone(
        self, row: PendingSend, older: Sequence[PendingSend] = ()
    ) -> Outcome:
        """Send ``row``, a row other than a note, alone; ``older``: earlier edits of the
        same plan's steps that ``row``'s edit shows too, settled with it.

        A closing row (purpose ``closed``) or an edit of a plan's steps (``plan_steps``)
        becomes the edit of its request's message (the last edit's time kept), an
        edit of a queued run's message (purpose ``queued``) the edit of that message
        (:mod:`conversations.outbox._closing`); with nothing to edit it is settled
        without a send, and that counts as sent: what follows goes on.
        """
        if row.purpose == QUEUED and isinstance(row.action, UpdateMessage):
            edit = await queued_edit(self.ctx.outbox, row)  # of the queued run's message
        elif row.purpose == ANSWER and self.ctx.streams is not None:
            return await self._answer(row, self.ctx.streams)
        elif row.purpose not in (CLOSED, PLAN_STEPS):
            if self.ctx.streams is not None and row.purpose != SESSION:
                await self.ctx.streams.close(self.conversation_id)  # shown as it is
            return await self.deliver([row], row.action)
        else:
            edit = await closing_edit(self.ctx.outbox, row, older)
        if edit is None:
            return Sent(None)
        outcome = await self.deliver([row, *older], edit)
        if row.purpose in (CLOSED, PLAN_STEPS) and row.request_id is not None:
            self.state.plan_edits[row.request_id] = self.ctx.clock.now()
        return outcome

    async def _answer(self, row: PendingSend, streams: AnswerStreams) -> Outcome:
        """Send the answer's row, finalising its streamed preview, if any
        (:mod:`conversations.outbox._streams`)."""
        action = row.action
        if not isinstance(action, PostReply):
            return await self.deliver([row], action)
        streamed = await streams.finalising(self.conversation_id, action.text)
        if streamed is None:
            await streams.close(self.conversation_id)  # a turn's text left open: as it is
        else:
            action = action.model_copy(update={"streamed": streamed})
        outcome = await self.deliver([row], action)
        if isinstance(outcome, Sent) or outcome.final:
            streams.settled(self.conversation_id)
        return outcome

    async def streamed_note(self, rows: Sequence[PendingSend]) -> Next | None:
        """Send the first of ``rows`` alone, at once, when it is a note that finalises its
        turn's streamed text (:meth:`AnswerStreams.finalising`); None when it is not."""
        streams = self.ctx.streams
        if streams is None or not rows or rows[0].purpose != NOTE:
            return None
        first = rows[0].action
        if not isinstance(first, PostReply):
            return None
        streamed = await streams.finalising(self.conversation_id, first.text, answer=False)
        if streamed is None:
            return None
        outcome = await self.deliver(rows[:1], first.model_copy(update={"streamed": streamed}))
        if isinstance(outcome, Sent) or outcome.final:
            streams.settled(self.conversation_id)
            self.state.last_note = self.ctx.clock.now()
        return self.follow(outcome)

    @staticmethod
    def follow(outcome: Outcome) -> Next:
        """After a send that keeps the order: go on, or wait (what follows waits too)."""
        if isinstance(outcome, Sent) or outcome.final:
            return "again"
        return Deferral(until=outcome.until)


class RepliesWorker(ConversationWorker):
    """The ``replies`` mode: notes merged into replies, at most one per note interval."""

    async def step(self) -> Next:
        if (sent := await self.plan_due()) is not None:
            return sent
        rows, more = await self.read()
        if not rows:
            return self.plan_wait() or "done"
        if (streamed := await self.streamed_note(rows)) is not None:
            return streamed
        notes = leading_notes(rows)
        if not notes:
            return await self.milestone(rows[0])
        if not (await self.milestone_follows(rows, notes, more) or self.notes_due()):
            return self.hold_notes().or_sooner(self.plan_wait())
        group = self._group(notes)
        first = group[0].action
        assert isinstance(first, PostReply)
        text = "\n".join(_text(note) for note in group)
        outcome = await self.deliver(group, first.model_copy(update={"text": text}))
        if isinstance(outcome, Sent) or outcome.final:
            self.state.pinned = ()
            self.state.last_note = self.ctx.clock.now()
        elif not outcome.rate_limited:
            self.state.pinned = tuple(note.id for note in group)  # its fate is unknown
        return self.follow(outcome)

    def _group(self, notes: Sequence[PendingSend]) -> list[PendingSend]:
        """The leading notes that go in one reply: a pinned group, or up to the size."""
        pinned = set(self.state.pinned)
        if pinned and notes[0].id in pinned:
            return [note for note in notes if note.id in pinned]
        self.state.pinned = ()
        group: list[PendingSend] = []
        size = 0
        for note in notes:
            size += len(_text(note)) + 1
            if group and size > NOTE_REPLY_CHARS:
                break
            group.append(note)
        return group


def leading_notes(rows: Sequence[PendingSend]) -> list[PendingSend]:
    """The notes (posted replies of purpose note) before the first other row."""
    notes: list[PendingSend] = []
    for row in rows:
        if row.purpose != NOTE or not isinstance(row.action, PostReply):
            break
        notes.append(row)
    return notes


def _text(note: PendingSend) -> str:
    action = note.action
    assert isinstance(action, PostReply)
    return action.text
