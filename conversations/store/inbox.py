"""The store's inbox: inbound deliveries, each key taken once, a kept event waiting until
it is journaled (docs/architecture.md "Durability and exactly-once"); re-exported by
:mod:`conversations.store.interfaces`."""

from __future__ import annotations

from typing import Any, Protocol

from conversations.channels import BusyMode


class Inbox(Protocol):
    """Inbound deliveries: a key is taken once; a kept event waits until it is journaled."""

    async def record_delivery(
        self,
        delivery_key: str,
        conversation_id: str | None = None,
        event: dict[str, Any] | None = None,
    ) -> bool:
        """Take ``delivery_key``; False (and nothing written) when it was taken before.

        Of several concurrent calls with one key exactly one gets True. With
        ``event`` (a JSON-able dump of the inbound event), the delivery stays
        unhandled until a change names its key in ``Change.handled``.
        """
        ...

    async def unhandled(self) -> list[tuple[str, str, dict[str, Any]]]:
        """``(key, conversation id, event)`` of kept deliveries not yet handled, oldest
        first (a crash left them unjournaled: the hub queues them again at start)."""
        ...

    async def keep_busy_mode(self, delivery_key: str, mode: BusyMode) -> None:
        """Store with the kept delivery ``delivery_key`` what became of it while a run
        worked, as its acknowledgement tells the person (``mode``), so a restart queues
        it again the same way (docs/architecture.md, "What a person sees"); a key not
        recorded changes nothing."""
        ...

    async def busy_mode(self, delivery_key: str) -> BusyMode | None:
        """The busy mode kept with ``delivery_key`` (:meth:`keep_busy_mode`); None when
        none was decided for it (or the key is unknown)."""
        ...
