"""A message in a thread while a run works there: acknowledged at once, then handled
the way the conversation's busy mode says.

(docs/architecture.md, "What a person sees".) The route step hands a message here
when this process has a job of its conversation running or queued
(:meth:`Busy.working`). By then the dedupe step has recorded it in the inbox, where
it stays until a commit journals it, so a crash after the acknowledgement loses
nothing: the next start queues it again (:meth:`conversations.hub.Hub.resume_unhandled`),
the way its acknowledgement told, kept with it in the inbox
(:meth:`conversations.store.Inbox.keep_busy_mode`) before that was sent.

Through the outbox, in order: a 👀 reaction on the message (:data:`SEEN`; the
console prints it as a line), then one short line saying what became of it, by the
channel's ``busy_mode`` (:data:`conversations.channels.BusyMode`):

- ``steer``: a note the run reads at its next turn boundary, as before busy modes
  (:meth:`conversations.hub._runs.Runs.reply`);
- ``queue``: the request of the next run, once this one ends, together with the
  other messages queued so (:meth:`conversations.hub._runs.Runs.reply_next`); a run
  that ended waiting for a person gets them as the answer to its request, in words
  (a number picks no option of a question the person had not seen);
- ``interrupt``: the run's turn stops at its next tool boundary, the calls not yet
  run end ``cancelled``, and the message is its next instruction
  (:mod:`core.run.interrupting`); only someone who may stop the run (the requester
  or an approver: :meth:`conversations.access.AccessPolicy.may_stop`) interrupts it,
  anyone else's message is steered and they are told so.
"""

from __future__ import annotations

from typing import Final, assert_never

from conversations.access import AccessPolicy
from conversations.channels import BusyMode, ChannelLookup
from conversations.events import AddReaction, MessagePosted, PostReply
from conversations.hub._runs import Runs
from conversations.store import ConversationInfo, Inbox, Outbox, Outgoing
from core.vocabulary.inputs import ThreadMessage

SEEN: Final = "eyes"
"""The reaction that acknowledges a message sent while a run works (👀)."""


def steered_text(name: str) -> str:
    """The line for a message taken as a note (``steer``)."""
    return f"💬 Noted, {name}: I'll read this before my next step."


def queued_text(name: str) -> str:
    """The line for a message kept for the next run (``queue``)."""
    return f"📥 Queued, {name}: I'll take this up when the current run ends."


def interrupting_text(name: str) -> str:
    """The line for a message that interrupts the run (``interrupt``)."""
    return (
        f"⏸ Interrupting, {name}: I'll stop before my next tool call "
        "and take this as my next instruction."
    )


def not_interrupting_text(name: str) -> str:
    """The line for a message by someone who may not interrupt (steered instead)."""
    return (
        f"Only the requester or an approver can interrupt, {name}; "
        "I'll read this before my next step."
    )


class Busy:
    """Takes the messages that come while a run works (see the module docstring).

    ``runs``: the conversation's jobs; ``inbox``: where the message was recorded, and
    what became of it is kept; ``outbox``: where the acknowledgement and the line go;
    ``channels``: each channel's ``busy_mode`` (None: ``steer`` everywhere, as for runs
    carried out elsewhere, which read their replies from the store); ``access``: who
    may interrupt.
    """

    def __init__(
        self,
        *,
        runs: Runs,
        inbox: Inbox,
        outbox: Outbox,
        access: AccessPolicy,
        channels: ChannelLookup | None = None,
    ) -> None:
        self._runs = runs
        self._inbox = inbox
        self._outbox = outbox
        self._access = access
        self._channels = channels

    def working(self, conversation_id: str) -> bool:
        """Whether a job of the conversation runs or waits in this process."""
        return self._runs.queue.busy(conversation_id)

    def mode(self, conversation: ConversationInfo) -> BusyMode:
        """The conversation's busy mode: its channel's, else ``steer``."""
        if self._channels is None:
            return "steer"
        return self._channels(conversation.binding).busy_mode

    async def take(
        self,
        conversation: ConversationInfo,
        event: MessagePosted,
        reply: ThreadMessage,
        *,
        acknowledge: bool = True,
        told: BusyMode | None = None,
    ) -> None:
        """Queue ``reply`` (``event``'s, recorded in the inbox) by the busy mode, keep what
        became of it with it in the inbox, then acknowledge it and say so; raises what
        the store raises.

        Not ``acknowledge``: a message queued again after a restart, acknowledged when it
        came; ``told``: the busy mode that acknowledgement told (kept in the inbox), which
        it goes by again, whatever the channel's setting is now (an ``interrupt`` told
        was allowed then). None: the channel's setting decides."""
        name = event.author.name
        mode: BusyMode = told or self.mode(conversation)
        match mode:
            case "steer":
                text = steered_text(name)
            case "queue":
                reply = reply.model_copy(update={"queued": True})  # words, never a pick
                text = queued_text(name)
            case "interrupt":
                if told == "interrupt" or await self._access.may_stop(
                    event.author, conversation.requester, conversation.binding
                ):
                    reply = reply.model_copy(update={"interrupts": True})
                    text = interrupting_text(name)
                else:
                    mode = "steer"
                    text = not_interrupting_text(name)
            case _:
                assert_never(mode)
        if acknowledge:  # kept before the person is told, for a restart to honour
            await self._inbox.keep_busy_mode(event.delivery_key, mode)
        if mode == "queue":
            self._runs.reply_next(conversation.id, reply)
        else:
            self._runs.reply(conversation.id, reply)
        if not acknowledge:
            return
        seen = AddReaction(ref=event.ref, emoji=SEEN)
        line = PostReply(ref=conversation.binding, text=text)
        await self._outbox.enqueue(conversation.id, [Outgoing(seen), Outgoing(line)])
