"""What the hub needs from a platform adapter, and what an adapter gets from the hub.

An adapter is pure translators plus a thin runner (docs/architecture.md, "How the
code is written"). The runner feeds inbound events to an :class:`InboundSink` and
implements :class:`Sender` for the deliverer.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from conversations.events import InboundEvent, OutboundAction, PlatformRef


class Sender(Protocol):
    """Sends outbound actions to one platform."""

    platform: str

    async def send(
        self, action: OutboundAction, *, idempotency_key: str, maybe_sent: bool = False
    ) -> str | None:
        """Perform ``action``; return the new message's platform id for a post, else None.

        ``idempotency_key`` (the outbox id) lets the platform drop a redelivery
        (Discord ``nonce``, Slack message ``metadata``). ``maybe_sent`` is True for
        a row an earlier process may have sent before it died: the adapter looks
        for it before sending again. Raises
        :class:`conversations.errors.DeliveryError` when the platform refused.
        """
        ...


@runtime_checkable
class AnswerStreamer(Protocol):
    """A sender that can stream an answer into a thread while the model writes it
    (Slack's ``chat.startStream`` / ``appendStream`` / ``stopStream``; docs/architecture.md
    "Streamed answers"). The texts are threadbot's (redacted already); the streamer
    formats them as its platform asks. ``stream_limit``: characters a streamed
    message may hold (past them the answer goes as the outbox posts it: parts or a file).

    Each method raises :class:`conversations.errors.StreamEnded` when the stream takes
    no more text, :class:`conversations.errors.RateLimited` for a 429 and
    :class:`conversations.errors.DeliveryError` otherwise."""

    platform: str
    stream_limit: int

    async def start_stream(self, thread: PlatformRef, recipient: str, text: str) -> str:
        """Start a streamed reply in ``thread`` for ``recipient`` (a platform user id)
        with ``text``; returns its message id."""
        ...

    async def append_stream(self, thread: PlatformRef, message: str, text: str) -> None:
        """Add ``text`` at the end of the streamed message ``message``."""
        ...

    async def stop_stream(self, thread: PlatformRef, message: str, text: str) -> None:
        """End the stream of ``message``, adding ``text`` (may be empty) first."""
        ...

    async def left_open(self, thread: PlatformRef, openings: tuple[str, ...]) -> str | None:
        """The message id of a stream (opening with one of ``openings``, its marks) that a
        process left in ``thread`` when it died, if it is the bot's newest message there;
        None otherwise. Never raises."""
        ...


class InboundSink(Protocol):
    """Where an adapter hands what people did (the hub)."""

    async def handle(self, event: InboundEvent) -> None:
        """Take one inbound event; returns once it is recorded, not when its run ends."""
        ...
