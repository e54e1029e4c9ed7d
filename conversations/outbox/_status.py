"""The ``status`` progress mode's worker: notes shown in status replies edited in place.

Rules, in the order a step applies them:

- Every note read joins the conversation's :class:`~conversations.outbox._board.StatusBoard`
  (the open reply, or a new one past the size); its row stays pending until a post
  or an edit shows it.
- A status reply not yet posted is posted in order, like any reply: a rate limit
  or a failure holds what follows (a post may not jump behind a later message).
- An edit never holds anything back. Refused for a rate limit, it waits its
  ``Retry-After`` (https://docs.slack.dev/apis/web-api/rate-limits) and is made
  later with every line merged in; a milestone goes out meanwhile and closes the
  reply, which is still brought up to date later, so every note reaches the thread.
  A thread's agent session status (:mod:`conversations.sessions`) goes out in its
  place too, and leaves the reply open: it shows nothing in the thread.
  An edit refused for good (the message is gone), or failing ``max_attempts``
  times, posts the lines as a new status reply instead.
- The open reply is shown at most once per ``note_interval``, at once before a
  milestone or when draining.
"""

from __future__ import annotations

from conversations.outbox._attempt import Sent
from conversations.outbox._board import StatusReply
from conversations.outbox._worker import ConversationWorker, Deferral, Next, leading_notes
from conversations.plan_cards import PLAN_STEPS
from conversations.sessions import SESSION


class StatusWorker(ConversationWorker):
    """Delivers one conversation in the ``status`` mode (see the module docstring)."""

    async def step(self) -> Next:
        if (sent := await self.plan_due()) is not None:
            return sent
        board = self.state.board
        rows, more = await self.read()
        if (streamed := await self.streamed_note(rows)) is not None:
            return streamed
        notes = leading_notes(rows)
        board.add(notes)
        milestone = rows[len(notes)] if len(notes) < len(rows) else None
        if milestone is None and more:
            return "again"  # read on: the notes just read wait in the board now
        flush = milestone is not None or self.ctx.draining()
        now = self.ctx.clock.now()
        for reply in board.waiting():
            held = not reply.closed and not flush and not self.notes_due()
            if reply.message_id is None:
                if held:
                    break
                return await self._post(reply)
            if reply.retry_at > now or held:
                continue
            return await self._edit(reply)
        if milestone is not None:
            if milestone.purpose not in (SESSION, PLAN_STEPS):  # no new message in the thread
                board.close()
            return await self.milestone(milestone)
        wait = self.plan_wait()
        return (wait.or_sooner(self._deferral()) if wait else self._deferral()) or "done"

    async def _post(self, reply: StatusReply) -> Next:
        """Post a status reply: in order, so a refusal holds what follows."""
        if not await self._still_waiting(reply):
            return "again"
        rows = list(reply.waiting)
        outcome = await self.deliver(rows, reply.post())
        if isinstance(outcome, Sent):
            reply.shown_now(outcome.message_id)
            self.state.last_note = self.ctx.clock.now()
        elif outcome.final:
            reply.waiting = []  # given up and reported
            reply.closed = True
            self.state.board.prune()
        return self.follow(outcome)

    async def _edit(self, reply: StatusReply) -> Next:
        """Edit a status reply; whatever the platform says, nothing else waits for it."""
        if not await self._still_waiting(reply):
            return "again"
        outcome = await self.ctx.attempts.send(list(reply.waiting), reply.edit())
        if isinstance(outcome, Sent):
            reply.shown_now(reply.message_id)
            self.state.last_note = self.ctx.clock.now()
        elif outcome.final:
            reply.repost()
        else:
            reply.retry_at = outcome.until
        self.state.board.prune()
        return "again"

    async def _still_waiting(self, reply: StatusReply) -> bool:
        """Forget the waiting notes that a stop dropped meanwhile; whether any are left."""
        pending = await self.ctx.outbox.still_pending([n.id for n in reply.waiting])
        reply.waiting = [note for note in reply.waiting if note.id in pending]
        self.state.board.prune()
        return bool(reply.waiting)

    def _deferral(self) -> Deferral | None:
        """When this conversation's waiting notes may be shown, if any wait."""
        now = self.ctx.clock.now()
        deferral: Deferral | None = None
        for reply in self.state.board.waiting():
            if reply.retry_at > now:  # a refused edit: its wait, whatever happens
                until = reply.retry_at
                if not reply.closed:
                    until = max(until, self.state.last_note + self.ctx.note_interval)
                wait = Deferral(until=until, on_milestone=True)
            else:  # the open reply, held for the note interval
                wait = self.hold_notes()
            deferral = wait.or_sooner(deferral)
        return deferral
