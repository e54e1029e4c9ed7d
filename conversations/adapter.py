"""What the hub needs from a platform adapter, and what an adapter gets from the hub.

An adapter is pure translators plus a thin runner (docs/architecture.md, "How the
code is written"). The runner feeds inbound events to an :class:`InboundSink` and
implements :class:`Sender` for the deliverer.
"""

from __future__ import annotations

from typing import Protocol

from conversations.events import InboundEvent, OutboundAction


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


class InboundSink(Protocol):
    """Where an adapter hands what people did (the hub)."""

    async def handle(self, event: InboundEvent) -> None:
        """Take one inbound event; returns once it is recorded, not when its run ends."""
        ...
