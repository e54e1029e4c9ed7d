"""The edit that shows a closed request on its own message (rows of purpose ``closed``).

A :class:`core.vocabulary.run_events.RequestClosed` is written as an outbox row of purpose
:data:`conversations.render.CLOSED`, with the request's id and an
:class:`~conversations.events.UpdateMessage` that holds only the outcome line.
It is delivered in order like any milestone, so the request's own message (an
earlier row of the conversation) has been sent, or given up, by then. Its turn
come, :func:`closing_edit` finds that message (the first row with the request's
id: its action, and the platform message id stored when it was sent, read from the
store) and builds the edit with
:func:`conversations.closing.closed_message`.

A message never delivered (failed for good, or sent without an id) has nothing to
edit: the row is settled ``dropped`` with the reason, and logged; nothing is sent.

A queued run's message (rows of purpose :data:`conversations.render.QUEUED`) is
edited the same way (:func:`queued_edit`): its edits carry the request id of its
post, and the text replaces the message's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from conversations.closing import closed_message
from conversations.events import PostReply, UpdateMessage
from conversations.outbox._known import KnownRows
from conversations.store import PendingSend

log = logging.getLogger("conversations.outbox")


async def closing_edit(
    outbox: KnownRows, row: PendingSend, older: Sequence[PendingSend] = ()
) -> UpdateMessage | None:
    """The edit to send for the closing row ``row``, or None when there is nothing to edit.

    None settles ``row`` and ``older`` (earlier edits of the same message that ``row``
    replaces: ``dropped``, the reason in ``last_error``) and logs why.
    Raises only what the outbox raises.
    """
    reason = await _edit_or_reason(outbox, row)
    if isinstance(reason, UpdateMessage):
        return reason
    log.info("outbox row %s: nothing to edit (%s); settled without a send", row.id, reason)
    await outbox.settle_unsent([row, *older], reason)
    return None


async def queued_edit(outbox: KnownRows, row: PendingSend) -> UpdateMessage | None:
    """The edit to send for ``row``, an edit of a queued run's message (its text in
    place of the message's), or None when that message was not delivered (``row`` is
    settled ``dropped`` then, as for :func:`closing_edit`)."""
    reason = await _queued_or_reason(outbox, row)
    if isinstance(reason, UpdateMessage):
        return reason
    log.info("outbox row %s: nothing to edit (%s); settled without a send", row.id, reason)
    await outbox.settle_unsent([row], reason)
    return None


async def _queued_or_reason(outbox: KnownRows, row: PendingSend) -> UpdateMessage | str:
    if row.request_id is None or not isinstance(row.action, UpdateMessage):
        return "not an edit of a queued message"
    original = await outbox.request_message(row.conversation_id, row.request_id)
    if original is None or original.state != "sent" or original.message_id is None:
        return f"the queued message {row.request_id} was not delivered"
    ref = original.action.ref.model_copy(update={"message": original.message_id})
    return UpdateMessage(ref=ref, text=row.action.text)


async def _edit_or_reason(outbox: KnownRows, row: PendingSend) -> UpdateMessage | str:
    """The edit for ``row``, or why there is none."""
    if row.request_id is None or not isinstance(row.action, UpdateMessage):
        return "not an edit of a request's message"
    original = await outbox.request_message(row.conversation_id, row.request_id)
    if original is None:
        return f"request {row.request_id} has no message"
    if original.state != "sent" or original.message_id is None:
        return f"the message of request {row.request_id} was not delivered ({original.state})"
    assert isinstance(original.action, PostReply)  # request_message finds posts only
    return closed_message(original.action, row.action, original.message_id)
