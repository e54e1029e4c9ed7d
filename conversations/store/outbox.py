"""The outbox's interface: outbound rows, written with the change that caused them,
delivered at least once, and settled (a consumer's protocol, as every store interface:
:mod:`conversations.store.interfaces`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from conversations.store.records import (
    NO_EARLIER,
    OutboxRecord,
    Outgoing,
    PendingSend,
    RequestMessage,
)


class Outbox(Protocol):
    """Outbound rows: written with the change that caused them, delivered at least once.

    Row ids grow and are never reused (they are the idempotency keys the platforms
    dedupe on, ``tb-<id>``). A row is ``pending`` until it is ``sent``, ``failed``
    for good or ``dropped`` (a note a stop made moot, an edit of a message never
    delivered); only pending rows change state.
    """

    async def enqueue(self, conversation_id: str, items: Sequence[Outgoing]) -> None:
        """Write pending rows that no state change goes with (notices to people)."""
        ...

    async def pending_conversations(self, limit: int) -> list[tuple[str, bool]]:
        """Up to ``limit`` conversations with pending rows, the one whose oldest pending
        row is oldest first: ``(id, whether a row other than a note is pending)``."""
        ...

    async def pending_rows(
        self, conversation_id: str, *, after: int = 0, limit: int = 100
    ) -> list[PendingSend]:
        """Up to ``limit`` pending rows of one conversation, ids above ``after``, in the
        conversation's order: reports first (purpose ``report``, written by
        :meth:`fail_for_good`), then the others oldest first. A report takes the place
        of the row it tells about, which was the oldest pending row when it failed:
        it goes before every row still pending."""
        ...

    async def request_message(self, conversation_id: str, request_id: str) -> RequestMessage | None:
        """The message request ``request_id`` was posted as: its conversation's first row
        with that request id that posts a reply (later ones edit it). The message id
        is the link kept on the request once its post was sent (state ``sent``), else
        the row's own. None if there is no such row (never written, or pruned after
        the request closed and its closing edit settled)."""
        ...

    async def settle_unsent(self, ids: Sequence[int], reason: str) -> None:
        """Pending rows with nothing to send become ``dropped``, ``reason`` kept (2,000 chars)."""
        ...

    async def has_pending_milestone(self, conversation_id: str, *, after: int) -> bool:
        """Whether a pending row other than a note, with an id above ``after``, waits."""
        ...

    async def has_pending_in(self, platform: str, channel: str, *, up_to: int) -> bool:
        """Whether a pending row of ``platform``'s ``channel``, id up to ``up_to``, waits."""
        ...

    async def still_pending(self, ids: Collection[int]) -> set[int]:
        """Which of ``ids`` are still pending."""
        ...

    async def last_outbox_id(self) -> int:
        """The id of the newest row, 0 for an empty outbox."""
        ...

    async def mark_sent(
        self,
        ids: Sequence[int],
        platform_message_id: str | None,
        *,
        rows: Sequence[PendingSend] | None = None,
        earlier: Mapping[int, str | None] = NO_EARLIER,
    ) -> None:
        """Rows delivered as ``platform_message_id`` (several when notes were merged).

        Only pending rows change. A request's own post (purpose ``milestone`` with a
        request id) also links the message to its request, in the same write, so a
        reaction finds the request for as long as the request is kept. ``rows``: the
        rows of ``ids`` (and of ``earlier``) as the caller holds them (the deliverer
        does), so which of them are request posts, and where they went, need not be
        read back; None: the store finds out itself. ``earlier``: rows of the same
        conversation sent before and not marked yet (their sending twice changes
        nothing: the deliverer holds their marks back), by id, each with the
        platform message id it went out as: marked in the same write (``ids`` may
        then be empty).
        """
        ...

    async def record_failure(self, send_id: int, error: str) -> int:
        """Count a failed attempt of ``send_id``, keep ``error`` (2,000 chars); attempts so far."""
        ...

    async def fail_for_good(
        self,
        conversation_id: str,
        ids: Sequence[int],
        error: str,
        report: Outgoing | None = None,
    ) -> bool:
        """Stop retrying ``ids`` (pending ones become ``failed``) and, if any did, write
        ``report`` in the same write. Returns whether any did: a row failed twice (two
        processes) is reported once."""
        ...

    async def rows(self, conversation_id: str | None = None) -> list[OutboxRecord]:
        """Every row as stored (one conversation's or all), oldest first; pruned ones gone."""
        ...
