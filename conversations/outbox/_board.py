"""Status-mode bookkeeping: which notes go in which status reply, shown or not yet.

Pure, no I/O. In the ``status`` progress mode a conversation's notes go into one
threaded reply edited in place; a milestone closes it and the notes after it start
a new one. A reply that would pass :data:`STATUS_MAX_CHARS` is closed too, and the
next note starts a new one, so no line is ever dropped and every reply stays one
Discord message (2,000 characters at most:
https://discord.com/developers/docs/resources/message#create-message) and well
under Slack's 4,000 (https://docs.slack.dev/reference/methods/chat.update).

A note's row stays pending in the store until a post or an edit that shows it
succeeded; until then it is *waiting* in its :class:`StatusReply`, and the
deliverer does not read it again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from conversations.events import PlatformRef, PostReply, UpdateMessage
from conversations.store import PendingSend

STATUS_MAX_CHARS = 1_800
"""Characters past which a status reply is closed and the next note starts a new one."""


@dataclass
class StatusReply:
    """One status reply: its message (once posted), lines shown, notes waiting.

    ``retry_at``: clock seconds before which an edit may not be tried again (the
    platform rate-limited it, or it failed); ``closed``: a milestone came after it,
    or it is full: no new lines go in.
    """

    thread: PlatformRef
    message_id: str | None = None
    shown: list[str] = field(default_factory=list)
    waiting: list[PendingSend] = field(default_factory=list)
    retry_at: float = -math.inf
    closed: bool = False
    status: str | None = None
    """The newest note's status line (running totals and cost), shown last."""

    def lines(self) -> list[str]:
        """Every line, shown first, then the waiting notes' texts."""
        return [*self.shown, *(_text(note) for note in self.waiting)]

    def text(self) -> str:
        """The reply's whole text: its lines, then the status line (``— 4 tool calls · ...``)."""
        status = [f"— {self.status}"] if self.status else []
        return "\n".join([*self.lines(), *status])

    def fits(self, line: str, limit: int) -> bool:
        """Whether ``line`` goes in within ``limit`` characters (any goes in an empty reply)."""
        return not self.lines() or len(self.text()) + 1 + len(line) <= limit

    def post(self) -> PostReply:
        """The new message showing every line (its first waiting note's reply, merged)."""
        first = self.waiting[0].action
        assert isinstance(first, PostReply)
        return first.model_copy(update={"text": self.text()})

    def edit(self) -> UpdateMessage:
        """The edit of the posted message that shows every line."""
        ref = self.thread.model_copy(update={"message": self.message_id})
        return UpdateMessage(ref=ref, text=self.text())

    def shown_now(self, message_id: str | None) -> None:
        """The waiting notes are on the platform now, in message ``message_id``.

        A post whose id the platform did not give cannot be edited: it is closed.
        """
        self.shown.extend(_text(note) for note in self.waiting)
        self.waiting = []
        self.message_id = message_id
        self.retry_at = -math.inf
        if message_id is None:
            self.closed = True

    def repost(self) -> None:
        """The message cannot be edited (gone, say): post every line as a new reply."""
        self.message_id = None
        self.retry_at = -math.inf


@dataclass
class StatusBoard:
    """A conversation's status replies, oldest first; the last one is open unless closed."""

    replies: list[StatusReply] = field(default_factory=list)

    @property
    def open(self) -> StatusReply | None:
        """The reply new notes go into, if there is one."""
        if self.replies and not self.replies[-1].closed:
            return self.replies[-1]
        return None

    def covered(self) -> set[int]:
        """Ids of the note rows waiting in some reply (pending in the store, not to re-read)."""
        return {note.id for reply in self.replies for note in reply.waiting}

    def add(self, notes: list[PendingSend], limit: int = STATUS_MAX_CHARS) -> None:
        """Put ``notes`` (post replies of purpose note) into the open reply, opening new ones."""
        for note in notes:
            reply = self.open
            if reply is None or not reply.fits(_text(note), limit):
                if reply is not None:
                    reply.closed = True
                reply = StatusReply(thread=note.action.ref)
                self.replies.append(reply)
            reply.waiting.append(note)
            assert isinstance(note.action, PostReply)
            reply.status = note.action.status or reply.status

    def waiting(self) -> list[StatusReply]:
        """The replies with notes waiting, oldest first."""
        return [reply for reply in self.replies if reply.waiting]

    def close(self) -> None:
        """A milestone goes out: the open reply takes no more notes; forget finished ones."""
        if self.replies:
            self.replies[-1].closed = True
        self.prune()

    def prune(self) -> None:
        """Forget closed replies with nothing waiting."""
        self.replies = [r for r in self.replies if r.waiting or not r.closed]

    def idle(self) -> bool:
        """Nothing waiting and no open reply to edit: nothing worth remembering."""
        return not self.replies


def _text(note: PendingSend) -> str:
    action = note.action
    assert isinstance(action, PostReply)
    return action.text
