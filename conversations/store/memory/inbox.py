"""Inbound deliveries in memory: a delivery key is taken once."""

from __future__ import annotations

from typing import Any

from conversations.channels import BusyMode
from conversations.store.memory._tables import Delivery, Tables, checkpoint


def add_delivery(
    t: Tables, key: str, conversation_id: str | None, event: dict[str, Any] | None = None
) -> bool:
    """Take the delivery ``key``; False when it was taken before."""
    if key in t.deliveries:
        return False
    t.deliveries[key] = Delivery(key, conversation_id, event, received_at=t.clock())
    return True


class MemoryInbox:
    """:class:`conversations.store.interfaces.Inbox` in memory."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    async def record_delivery(
        self,
        delivery_key: str,
        conversation_id: str | None = None,
        event: dict[str, Any] | None = None,
    ) -> bool:
        """Record an inbound delivery; False when the key was seen before."""
        await checkpoint()
        return add_delivery(self._t, delivery_key, conversation_id, event)

    async def unhandled(self) -> list[tuple[str, str, dict[str, Any]]]:
        """``(key, conversation id, event)`` of kept deliveries not yet handled, oldest first."""
        await checkpoint()
        return [
            (d.key, d.conversation_id or "", d.event)
            for d in self._t.deliveries.values()
            if d.event and d.handled_at is None
        ]

    async def keep_busy_mode(self, delivery_key: str, mode: BusyMode) -> None:
        """Keep ``mode`` with the delivery (see :class:`conversations.store.Inbox`)."""
        await checkpoint()
        delivery = self._t.deliveries.get(delivery_key)
        if delivery is not None:
            delivery.busy_mode = mode

    async def busy_mode(self, delivery_key: str) -> BusyMode | None:
        """The busy mode kept with the delivery, if any."""
        await checkpoint()
        delivery = self._t.deliveries.get(delivery_key)
        return delivery.busy_mode if delivery is not None else None
