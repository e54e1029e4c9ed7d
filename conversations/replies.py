"""The replies a run takes as notes when it runs outside the bot process that received them.

In the bot process a run takes the replies queued behind it
(:meth:`conversations.hub._runs.Runs.inbox`). A run carried out elsewhere (on a Ray
actor: docs/architecture.md, "Runners") reads them from the store instead: the
replies the hub recorded in the inbox and no commit journaled yet
(:meth:`conversations.store.Inbox.unhandled`), looked at every ``poll`` seconds while
runs are hosted here, one query for all of them. Each is handed to the run at its
next turn boundary once; the run journals it as a note, its delivery marked handled
in the same commit, and the reply's own job, queued in the bot, later finds it
journaled (:class:`core.vocabulary.errors.AlreadyHandled`) and is dropped. A reply the
run ends without journaling stays for that job.

Left to their own job: a reply that shares files (the job fetches them first:
:mod:`conversations.hub._files`) and one whose text the platform withheld.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable

from pydantic import ValidationError

from conversations.events import MessagePosted, inbound_adapter
from conversations.store import Inbox
from core.vocabulary.inputs import ThreadMessage
from core.vocabulary.people import Person

log = logging.getLogger(__name__)


class StoredReplies:
    """The unjournaled replies of the conversations whose runs are hosted here.

    :meth:`watch` a conversation while a run of it is hosted here (the run's own
    input, if it has a delivery key, is never handed back to it), hand the run
    :meth:`inbox_for` it, :meth:`unwatch` it when the run has ended; run
    :meth:`keep_polling` beside.
    """

    def __init__(self, *, inbox: Inbox, poll: float) -> None:
        self._inbox = inbox
        self.poll = poll
        self._watched: Counter[str] = Counter()
        self._waiting: dict[str, list[tuple[str, ThreadMessage]]] = {}
        """Per conversation: ``(delivery key, reply)`` read and not handed over yet."""
        self._handed: dict[str, set[str]] = {}
        """Per conversation: delivery keys handed over (or the run's own input)."""

    def watch(self, conversation_id: str, own: str | None = None) -> None:
        """A run of ``conversation_id`` starts here; ``own``: the delivery key of its input."""
        self._watched[conversation_id] += 1
        self._waiting.setdefault(conversation_id, [])
        handed = self._handed.setdefault(conversation_id, set())
        if own is not None:
            handed.add(own)

    def unwatch(self, conversation_id: str) -> None:
        """A run of ``conversation_id`` ended here; with none left, its replies are forgotten."""
        self._watched[conversation_id] -= 1
        if self._watched[conversation_id] <= 0:
            del self._watched[conversation_id]
            self._waiting.pop(conversation_id, None)
            self._handed.pop(conversation_id, None)

    def inbox_for(self, conversation_id: str) -> Callable[[], list[ThreadMessage]]:
        """The run's inbox (:data:`core.vocabulary.inputs.Inbox`): the replies read since
        it was last called, each once."""

        def take() -> list[ThreadMessage]:
            waiting = self._waiting.get(conversation_id)
            if not waiting:
                return []
            self._handed.setdefault(conversation_id, set()).update(k for k, _ in waiting)
            taken = [message for _, message in waiting]
            waiting.clear()
            return taken

        return take

    def waiting(self) -> dict[str, int]:
        """Per watched conversation, how many replies were read and not handed over yet."""
        return {cid: len(waiting) for cid, waiting in self._waiting.items()}

    async def keep_polling(self) -> None:
        """Read the replies every ``poll`` seconds while a run is hosted here, until
        cancelled; a failed read is logged and tried at the next poll."""
        while True:
            await asyncio.sleep(self.poll)
            if not self._watched:
                continue
            try:
                await self.poll_once()
            except Exception as exc:
                log.warning("could not read the replies for the runs here (%s)", exc)

    async def poll_once(self) -> int:
        """Read the unjournaled replies of the watched conversations; how many are new."""
        new = 0
        for key, conversation_id, data in await self._inbox.unhandled():
            waiting = self._waiting.get(conversation_id)
            if waiting is None or key in self._handed.get(conversation_id, set()):
                continue
            if any(k == key for k, _ in waiting):
                continue
            message = _note(key, data)
            if message is not None:
                waiting.append((key, message))
                new += 1
        return new


def _note(key: str, data: dict[str, object]) -> ThreadMessage | None:
    """The reply ``data`` (an event as the hub stored it) as a message to take as a note;
    None for what its own job handles (see the module docstring)."""
    try:
        event = inbound_adapter.validate_python(data)
    except ValidationError:
        log.warning("reply %s: its stored event does not read; left to its job", key)
        return None
    if not isinstance(event, MessagePosted) or event.ref.thread is None:
        return None  # a mention opens a conversation: its start journals it
    if event.attachments or event.unreadable:
        return None
    return ThreadMessage(
        text=event.text,
        author=Person(id=event.author.id, name=event.author.name),
        delivery_key=event.delivery_key,
    )
