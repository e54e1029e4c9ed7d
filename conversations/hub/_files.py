"""The files of a message that becomes an engine input, fetched for it.

A mention that opens a conversation and a message in its thread may share files
(:attr:`~conversations.events.MessagePosted.attachments`). Before the message goes to
the engine, :meth:`Downloads.of` fetches them through the fetcher of the event's
platform (the adapter's; :meth:`conversations.hub.Hub.add_fetcher`), within the hub's
:class:`~conversations.files.FileLimits`, and says in the conversation's thread which
files a cap left out (through the outbox). The engine gets the bytes
(:class:`core.vocabulary.inputs.SharedFile`) and reads them into what the model sees
(:mod:`core.files`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from conversations.events import MessagePosted
from conversations.files import FileFetcher, FileLimits, caps_notice, fetch_shared
from conversations.store import ConversationInfo, Threads
from core.vocabulary.inputs import SharedFile

Notify = Callable[[ConversationInfo, str], Awaitable[None]]
"""Posts a short message in the conversation's thread (through the outbox)."""


class Downloads:
    """Fetches the files of messages for their conversations; one fetcher per platform."""

    def __init__(self, *, limits: FileLimits, threads: Threads, notice: Notify) -> None:
        self._limits = limits
        self._threads = threads
        self._notice = notice
        self._fetchers: dict[str, FileFetcher] = {}

    def add(self, fetcher: FileFetcher) -> None:
        """Fetch the files shared on ``fetcher.platform`` through ``fetcher``."""
        self._fetchers[fetcher.platform] = fetcher

    async def of(self, conversation_id: str, event: MessagePosted) -> tuple[SharedFile, ...]:
        """The files ``event`` shares, fetched (one per attachment, in order; a file not
        fetched carries why); a cap that left a file out is said in the thread of
        ``conversation_id``. Nothing to fetch: ``()``, at once."""
        if not event.attachments:
            return ()
        fetcher = self._fetchers.get(event.ref.platform)
        fetched = await fetch_shared(event.attachments, fetcher, self._limits)
        said = caps_notice(fetched, self._limits)
        if said is not None:
            conversation = await self._threads.find(conversation_id)
            if conversation is not None:
                await self._notice(conversation, said)
        return fetched.files
