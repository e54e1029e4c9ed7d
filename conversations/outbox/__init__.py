"""The deliverer: sends every outbox row through the adapters, at least once, in order.

Every pending row goes out, concurrently across conversations and in order within
one; a rate limit delays a row, it never fails it (docs/architecture.md, "One
mention, one approval, one stop").

- A commit that writes outbox rows hands them over (:meth:`Deliverer.wake` with
  the rows, the store's ``on_outbox``): the deliverer keeps them in memory per
  conversation and sends them without reading them back; settling a row is one
  write and no read (:mod:`conversations.outbox._known`). The store is looked at
  only as a fallback: at start (rows left pending), every ``poll_interval``
  seconds (rows another process wrote) and when woken without rows.
- A dispatcher (:meth:`Deliverer.run`) runs one worker per conversation with
  pending rows, the one with the oldest row first, at most ``concurrency`` at
  once. A conversation that must wait (a rate limit, a backoff, notes held for
  their interval) gives its worker slot back and waits in the dispatcher, so it
  never holds up the others.
- A worker sends its conversation's rows oldest first, in bounded batches, until
  none is left. The outbox id is the idempotency key (``tb-{id}``); the platform
  message id is stored, so a reaction on the message finds its conversation.
- Progress notes (``purpose == "note"``) are shown in one of two modes
  (docs/architecture.md, "Progress notes"): ``replies`` merges consecutive notes
  into one reply, at most one per ``note_interval`` seconds, flushed at once before a
  milestone (:mod:`conversations.outbox._worker`); ``status`` shows them in one
  reply edited in place, a new one after each milestone
  (:mod:`conversations.outbox._status`).
- A closed request's row (``purpose == "closed"``, written for
  :class:`core.vocabulary.run_events.RequestClosed`) is a milestone, not a note: in its turn
  it becomes the edit of the request's own message, found by the request id and
  the platform message id stored when that message was sent, read back from the
  store (:mod:`conversations.outbox._closing`); a message never delivered leaves
  nothing to edit, and the row is settled ``dropped`` without a send.
- A 429 is no failure: the row waits ``Retry-After`` and goes again, its
  ``attempts`` untouched. Other failures count; after ``max_attempts``, or at
  once when permanent, the row fails for good and a short "⚠️ ..." reply says so
  in its thread (once: a failed report is only logged), and the rows after it
  still go out, in order (:mod:`conversations.outbox._attempt`).
- Every text sent, through any sender, loses the bot's secrets first (``redactor``;
  :mod:`conversations.outbox._redact` says why there).

Errors: a worker's unexpected exception (the store raising, say) ends
:meth:`Deliverer.run` with it; run it again to go on. An adapter's own bug in
``send`` is a counted failure of that row.
"""

from conversations.channels import ProgressMode
from conversations.outbox._attempt import NOTE, REPORT
from conversations.outbox._board import STATUS_MAX_CHARS
from conversations.outbox._clock import Clock, MonotonicClock
from conversations.outbox._deliverer import Deliverer, ModeLookup
from conversations.outbox._streams import AnswerStreams
from conversations.outbox._worker import NOTE_REPLY_CHARS

__all__ = [
    "NOTE",
    "NOTE_REPLY_CHARS",
    "REPORT",
    "STATUS_MAX_CHARS",
    "AnswerStreams",
    "Clock",
    "Deliverer",
    "ModeLookup",
    "MonotonicClock",
    "ProgressMode",
]
