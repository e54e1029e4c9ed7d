"""The outbox in memory: rows in id order, the same states and rules as in SQL."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence

from conversations.events import PostReply
from conversations.store.claims import ClaimLost, current_claim
from conversations.store.memory._tables import OutboxRow, Tables, checkpoint
from conversations.store.records import (
    NO_EARLIER,
    OutboxRecord,
    Outgoing,
    PendingSend,
    RequestMessage,
)

ERROR_CHARS = 2000
"""Characters of an error kept in ``last_error``."""
REQUEST_POST = "milestone"
"""``purpose`` of a request's own post, the row whose message is linked to its request."""


class MemoryOutbox:
    """:class:`conversations.store.interfaces.Outbox` in memory."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    async def enqueue(self, conversation_id: str, items: Sequence[Outgoing]) -> None:
        """Write outbox rows that no state change goes with (notices to people)."""
        await checkpoint()
        added = [
            self._t.add_outbox(conversation_id, out.action, out.purpose, out.request_id)
            for out in items
        ]
        if added:
            self._t.on_outbox([row.record() for row in added])

    async def pending_conversations(self, limit: int) -> list[tuple[str, bool]]:
        """Conversations with pending rows, oldest pending row first:
        ``(id, whether a non-note row is pending)``; at most ``limit``."""
        await checkpoint()
        found: dict[str, bool] = {}
        for row in self._pending():
            found[row.conversation_id] = found.get(row.conversation_id, False) or (
                row.purpose != "note"
            )
        return list(found.items())[: max(0, limit)]

    async def pending_rows(
        self, conversation_id: str, *, after: int = 0, limit: int = 100
    ) -> list[PendingSend]:
        """Pending rows of one conversation with an id above ``after``: reports first, then
        the others oldest first (the interface says why)."""
        await checkpoint()
        rows = [r for r in self._pending() if r.conversation_id == conversation_id and r.id > after]
        rows.sort(key=lambda r: (r.purpose != "report", r.id))
        return [
            PendingSend(
                id=r.id,
                conversation_id=r.conversation_id,
                purpose=r.purpose,
                action=r.action,
                request_id=r.request_id,
            )
            for r in rows[: max(0, limit)]
        ]

    async def request_message(self, conversation_id: str, request_id: str) -> RequestMessage | None:
        """The message a request was posted as (see the interface); None if none."""
        await checkpoint()
        request = self._t.requests.get(request_id)
        linked = request.message[2] if request is not None and request.message else None
        for row in self._t.outbox.values():
            if (row.conversation_id, row.request_id) != (conversation_id, request_id):
                continue
            if isinstance(row.action, PostReply) and linked is not None:
                return RequestMessage(row.action, "sent", linked)
            if isinstance(row.action, PostReply):
                return RequestMessage(row.action, row.state, row.platform_message_id)
        return None

    async def settle_unsent(self, ids: Sequence[int], reason: str) -> None:
        """Pending rows of ``ids`` become ``dropped``; ``reason`` is kept in ``last_error``."""
        await checkpoint()
        for row in self._rows(ids, pending=True):
            row.state, row.last_error = "dropped", reason[:ERROR_CHARS]

    async def has_pending_milestone(self, conversation_id: str, *, after: int) -> bool:
        """Whether a pending row other than a note, with an id above ``after``, waits."""
        await checkpoint()
        return any(
            r.conversation_id == conversation_id and r.id > after and r.purpose != "note"
            for r in self._pending()
        )

    async def has_pending_in(self, platform: str, channel: str, *, up_to: int) -> bool:
        """Whether a pending row of ``platform``'s ``channel`` with an id up to ``up_to`` waits."""
        await checkpoint()
        return any(
            (r.platform, r.channel) == (platform, channel) and r.id <= up_to
            for r in self._pending()
        )

    async def still_pending(self, ids: Collection[int]) -> set[int]:
        """Which of ``ids`` are still pending."""
        await checkpoint()
        return {row.id for row in self._rows(ids, pending=True)}

    async def last_outbox_id(self) -> int:
        """The id of the newest row, 0 for an empty outbox."""
        await checkpoint()
        return max(self._t.outbox, default=0)

    async def mark_sent(
        self,
        ids: Sequence[int],
        platform_message_id: str | None,
        *,
        rows: Sequence[PendingSend] | None = None,
        earlier: Mapping[int, str | None] = NO_EARLIER,
    ) -> None:
        """Pending rows of ``ids`` are sent, and those of ``earlier`` with their own message
        ids; a request's own post links its message. ``rows`` changes nothing here: the
        rows are at hand anyway. Fenced by the delivery claim it is made under, if any
        (raises :class:`~conversations.store.claims.ClaimLost`, changing nothing)."""
        await checkpoint()
        found = self._rows([*ids, *earlier], pending=True)
        claim = current_claim(found[0].conversation_id) if found else None
        if claim is not None:
            held = self._t.conversations.get(claim.conversation_id)
            if held is None or (held.delivery_owner, held.delivery_epoch) != (
                claim.owner,
                claim.epoch,
            ):
                raise ClaimLost(claim)
        for row in found:
            request = self._t.requests.get(row.request_id or "")
            message_id = earlier.get(row.id, platform_message_id)
            if message_id is not None and row.purpose == REQUEST_POST and request:
                request.message = (row.platform, row.channel, message_id)
        now = self._t.clock()
        for row in found:
            message_id = earlier.get(row.id, platform_message_id)
            row.state, row.platform_message_id, row.sent_at = "sent", message_id, now

    async def record_failure(self, send_id: int, error: str) -> int:
        """Count a failed attempt of a row and keep its error; the attempts so far."""
        await checkpoint()
        row = self._t.outbox.get(send_id)
        if row is None:
            return 0
        row.attempts, row.last_error = row.attempts + 1, error[:ERROR_CHARS]
        return row.attempts

    async def fail_for_good(
        self,
        conversation_id: str,
        ids: Sequence[int],
        error: str,
        report: Outgoing | None = None,
    ) -> bool:
        """Pending rows of ``ids`` fail for good; ``report`` is written if any did."""
        await checkpoint()
        rows = self._rows(ids, pending=True)
        for row in rows:
            row.state, row.last_error = "failed", error[:ERROR_CHARS]
        if rows and report is not None:
            added = self._t.add_outbox(
                conversation_id, report.action, report.purpose, report.request_id
            )
            self._t.on_outbox([added.record()])
        return bool(rows)

    async def rows(self, conversation_id: str | None = None) -> list[OutboxRecord]:
        """Every row as stored, of one conversation or all, oldest first."""
        await checkpoint()
        return [
            row.record()
            for row in self._t.outbox.values()
            if conversation_id in (None, row.conversation_id)
        ]

    def _pending(self) -> Iterator[OutboxRow]:
        return (row for row in self._t.outbox.values() if row.state == "pending")

    def _rows(self, ids: Collection[int], *, pending: bool) -> list[OutboxRow]:
        found = (self._t.outbox.get(i) for i in sorted(set(ids)))
        return [r for r in found if r is not None and (r.state == "pending" or not pending)]
