"""The deliverer: sends outbox rows through the adapters, at least once, in order.

Rows of one conversation go out in the order they were written. Progress notes
(``purpose == "note"``) are shown in one of two modes (DESIGN.md, "Progress
notes"):

- ``replies``: pending notes are merged into one new threaded reply, at most one
  reply per ``note_interval`` seconds per conversation; a milestone flushes the
  notes before it at once, so the order in the thread never changes.
- ``status``: notes go into one reply per run, edited in place
  (:class:`conversations.events.UpdateMessage`); a milestone starts a new one.

The outbox row id is the idempotency key handed to the adapter, and the platform
message id it returns is stored, so a reaction on that message finds its
conversation and request. A failed send is retried with backoff; after
``max_attempts`` (or a permanent error) the row is marked failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from conversations.adapter import Sender
from conversations.errors import DeliveryError, RateLimited
from conversations.events import PostReply, UpdateMessage
from conversations.store import PendingSend, Store
from core.faults import NO_FAULTS, Faults

log = logging.getLogger(__name__)

ProgressMode = Literal["replies", "status"]


class Deliverer:
    """One task that drains the outbox; :meth:`wake` after a commit that wrote rows."""

    def __init__(
        self,
        *,
        store: Store,
        senders: Mapping[str, Sender],
        progress_mode: ProgressMode = "replies",
        note_interval: float = 3.0,
        max_attempts: int = 5,
        clock: Callable[[], float] = time.monotonic,
        faults: Faults = NO_FAULTS,
    ) -> None:
        self._store = store
        self._senders = dict(senders)
        self._mode = progress_mode
        self._interval = note_interval
        self._max_attempts = max_attempts
        self._clock = clock
        self._faults = faults
        self._wake = asyncio.Event()
        self._last_note: dict[str, float] = {}
        self._status: dict[str, tuple[str, list[str]]] = {}
        self._lock = asyncio.Lock()
        self._retry_at: dict[int, float] = {}
        self._suspect_up_to: int | None = None
        self._attempts: defaultdict[int, int] = defaultdict(int)

    def add_sender(self, sender: Sender) -> None:
        """Route rows of ``sender.platform`` to ``sender``."""
        self._senders[sender.platform] = sender

    def wake(self) -> None:
        """Deliver soon (called by the store after a commit that wrote outbox rows)."""
        self._wake.set()

    async def run(self) -> None:
        """Deliver until cancelled, sleeping until woken or until notes fall due."""
        while True:
            self._wake.clear()
            delay = await self.deliver_once()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=delay)

    async def send_now(self, action: PostReply) -> None:
        """Send a reply that belongs to no conversation (e.g. "nothing to stop"), once.

        Failures are logged, not raised: the person can simply ask again.
        """
        sender = self._senders.get(action.ref.platform)
        if sender is None:
            return
        try:
            await sender.send(action, idempotency_key=f"tb-now-{uuid.uuid4().hex}")
        except DeliveryError as exc:
            log.warning("could not send a notice: %s", exc)

    async def pass_over(self) -> None:
        """Return once no delivery pass is in progress (its message ids are stored)."""
        async with self._lock:
            return

    async def drain(self) -> None:
        """Deliver everything pending now, notes included, ignoring the note interval."""
        await self.deliver_once(flush_notes=True)

    async def deliver_once(self, *, flush_notes: bool = False) -> float | None:
        """One pass over the outbox; returns seconds until held notes fall due, if any."""
        async with self._lock:
            if self._suspect_up_to is None:  # rows from before this process may be half-sent
                self._suspect_up_to = await self._store.last_outbox_id()
            rows = await self._store.pending_sends()
            by_conversation: dict[str, list[PendingSend]] = defaultdict(list)
            for row in rows:
                by_conversation[row.conversation_id].append(row)
            delays = [
                await self._deliver_conversation(cid, conv_rows, flush_notes)
                for cid, conv_rows in by_conversation.items()
            ]
        due = [d for d in delays if d is not None]
        return min(due) if due else None

    async def _deliver_conversation(
        self, conversation_id: str, rows: Sequence[PendingSend], flush_notes: bool
    ) -> float | None:
        notes: list[PendingSend] = []
        for row in rows:
            if self._retry_at.get(row.id, 0.0) > self._clock():
                return self._retry_at[row.id] - self._clock()
            if row.purpose == "note":
                notes.append(row)
                continue
            if notes and not await self._send_notes(conversation_id, notes):
                return self._retry_delay(notes[0])
            notes = []
            ok, _ = await self._send([row], row)
            if not ok:
                return self._retry_delay(row)
            self._status.pop(conversation_id, None)
        if not notes:
            return None
        wait = self._last_note.get(conversation_id, -1e9) + self._interval - self._clock()
        if wait > 0 and not flush_notes:
            return wait
        await self._send_notes(conversation_id, notes)
        return None

    def _retry_delay(self, row: PendingSend) -> float:
        """Seconds until ``row`` may be tried again."""
        return max(self._retry_at.get(row.id, self._clock() + 1.0) - self._clock(), 0.0)

    async def _send_notes(self, conversation_id: str, notes: list[PendingSend]) -> bool:
        texts = [n.action.text for n in notes if isinstance(n.action, PostReply)]
        first = notes[0].action
        assert isinstance(first, PostReply)
        if self._mode == "status":
            message_id, lines = self._status.get(conversation_id, ("", []))
            lines = [*lines, *texts][-12:]
            if message_id:
                update = UpdateMessage(
                    ref=first.ref.model_copy(update={"message": message_id}), text="\n".join(lines)
                )
                action: PostReply | UpdateMessage = update
            else:
                action = first.model_copy(update={"text": "\n".join(lines)})
        else:
            action = first.model_copy(update={"text": "\n".join(texts)})
        ok, sent_id = await self._send(
            notes, notes[0], action, mergeable=isinstance(action, UpdateMessage)
        )
        if ok:
            self._last_note[conversation_id] = self._clock()
            if self._mode == "status":
                known = self._status.get(conversation_id, ("", []))[0]
                self._status[conversation_id] = (known or sent_id or "", lines)
        return ok

    async def _send(
        self,
        rows: Sequence[PendingSend],
        head: PendingSend,
        action: PostReply | UpdateMessage | None = None,
        *,
        mergeable: bool = False,
    ) -> tuple[bool, str | None]:
        """Send one action for ``rows``; ``(False, None)`` means retry later.

        A ``mergeable`` status edit refused for rate limits is not waited for: its
        lines stay in the status text and go out with the next edit, so a status
        edit never holds back the messages after it (Slack answers ``chat.update``
        with 429 and ``Retry-After``: docs.slack.dev/apis/web-api/rate-limits).
        """
        outbound = action or head.action
        sender = self._senders.get(outbound.ref.platform)
        if sender is None:
            await self._store.mark_failed(head.id, "no adapter for this platform", final=True)
            return True, None
        try:
            message_id = await sender.send(
                outbound,
                idempotency_key=f"tb-{head.id}",
                maybe_sent=head.id <= (self._suspect_up_to or 0),
            )
        except RateLimited as exc:
            if mergeable:
                log.info("status edit rate-limited for %s s; merged into the next", exc.retry_after)
                await self._store.mark_sent([r.id for r in rows], None)
                return True, None
            return await self._failed(head, exc), None
        except DeliveryError as exc:
            return await self._failed(head, exc), None
        except Exception as exc:  # an adapter's bug must not stop every delivery
            log.exception("sending outbox row %s failed unexpectedly", head.id)
            return await self._failed(head, DeliveryError(repr(exc))), None
        self._faults.hit("after_platform_accept")
        await self._store.mark_sent([r.id for r in rows], message_id)
        self._retry_at.pop(head.id, None)
        return True, message_id

    async def _failed(self, row: PendingSend, exc: DeliveryError) -> bool:
        self._attempts[row.id] += 1
        attempts = self._attempts[row.id]
        final = exc.permanent or attempts >= self._max_attempts
        log.warning("delivery of outbox row %s failed (attempt %s): %s", row.id, attempts, exc)
        await self._store.mark_failed(row.id, str(exc), final=final)
        if final:
            return True
        backoff = exc.retry_after if isinstance(exc, RateLimited) else min(2.0**attempts, 60.0)
        self._retry_at[row.id] = self._clock() + backoff
        return False
