"""Core's ``Journal`` in memory: the same checks as the SQL commit, then the same changes.

A commit first checks everything that can refuse it (the lease fence, the
conversation, the compare-and-sets, the new request's id) and renders its run
events, then applies all of it with no ``await`` in between: a refused commit
writes nothing, as a rolled-back transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from conversations.store import leases
from conversations.store.memory._tables import (
    Conversation,
    OutboxRow,
    Request,
    Tables,
    checkpoint,
)
from conversations.store.records import Outgoing
from core.vocabulary import fold
from core.vocabulary.errors import AlreadyHandled, LeaseLost, RequestConflict, StaleSnapshot
from core.vocabulary.journal import Change, Committed, RequestResolution
from core.vocabulary.requests import RequestState
from core.vocabulary.run_events import RunEvent, Stopped
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolState


class MemoryJournal:
    """:class:`core.vocabulary.journal.Journal` in memory."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    async def load(self, conversation_id: str) -> ConversationSnapshot:
        """Everything about one conversation; raises :class:`ConversationNotFound`."""
        await checkpoint()
        conversation = self._t.conversation(conversation_id)
        return ConversationSnapshot(
            id=conversation.id,
            requester=conversation.requester,
            status=conversation.status,
            position=conversation.position,
            plan_version=conversation.plan_version,
            workspace=conversation.workspace_dir,
            journal=tuple(conversation.journal),
            tool_calls=dict(conversation.tool_calls),
            requests=tuple(
                r.request for r in self._t.requests.values() if r.conversation_id == conversation.id
            ),
        )

    async def commit(
        self, conversation_id: str, change: Change, *, after_seq: int | None = None
    ) -> Committed:
        """Apply ``change`` and write its events to the outbox, all or nothing.

        Raises :class:`LeaseLost` for a commit under a lease taken over since,
        :class:`StaleSnapshot` when ``after_seq`` is not the newest entry's ``seq``
        and the change has entries, :class:`RequestConflict` when a compare-and-set
        finds its request no longer open or a guarded call decided,
        :class:`AlreadyHandled` when an input it journals was journaled already,
        :class:`ConversationNotFound`, and ``ValueError`` for a new request whose id
        is taken; each writes nothing. A commit that ends the run while its worker
        has nothing queued gives the lease up (:func:`conversations.store.leases.releases_with`).
        """
        releasing = leases.releases_with(conversation_id, change)
        await checkpoint()
        conversation = self._fenced(conversation_id)
        last = conversation.journal[-1].seq if conversation.journal else 0
        if change.entries and after_seq is not None and after_seq != last:
            raise StaleSnapshot(f"conversation {conversation_id}: seq {after_seq + 1} is taken")
        _check_pending(conversation, change.guard_pending)
        self._check_resolutions(change.resolve)
        if any(
            key in self._t.deliveries and self._t.deliveries[key].handled_at is not None
            for key in change.handled
        ):
            raise AlreadyHandled(f"an input of {sorted(change.handled)} was journaled already")
        if change.open_request is not None and change.open_request.id in self._t.requests:
            raise ValueError(f"request id {change.open_request.id} is taken")
        rendered = [(e, self._t.render(conversation.binding, e)) for e in change.events]
        session = self._t.sessions(conversation.binding, change)
        committed = self._apply(conversation, change, rendered, session)
        if releasing is not None:
            conversation.lease_owner, conversation.lease_until = None, None
            releasing.released = True
        return committed

    def _fenced(self, conversation_id: str) -> Conversation:
        lease = leases.current_lease(conversation_id)
        found = self._t.conversations.get(conversation_id)
        if lease is not None and (
            found is None or (found.lease_owner, found.lease_epoch) != (lease.owner, lease.epoch)
        ):
            raise LeaseLost(
                f"conversation {conversation_id}: this process ({lease.owner}, epoch "
                f"{lease.epoch}) no longer holds its lease; nothing was written"
            )
        return self._t.conversation(conversation_id)

    def _check_resolutions(self, resolutions: Sequence[RequestResolution]) -> None:
        states: dict[str, RequestState] = {}
        for res in resolutions:
            found = self._t.requests.get(res.request_id)
            state = states.get(res.request_id, found.request.state if found else None)
            if res.only_if_open and state is not RequestState.OPEN:
                raise RequestConflict(f"request {res.request_id} is no longer open")
            if found is not None:
                states[res.request_id] = res.state

    def _apply(
        self,
        conversation: Conversation,
        change: Change,
        rendered: list[tuple[RunEvent, Sequence[Outgoing]]],
        session: Sequence[Outgoing] = (),
    ) -> Committed:
        t, now = self._t, self._t.clock()
        for key in change.handled:
            if key in t.deliveries:
                t.deliveries[key].handled_at = now
                t.deliveries[key].event = None  # journaled (redacted): not kept twice
        last = conversation.journal[-1].seq if conversation.journal else 0
        committed = Committed(seqs=tuple(range(last + 1, last + 1 + len(change.entries))), at=now)
        conversation.journal.extend(fold.records(committed.seqs, change.entries, committed))
        conversation.tool_calls = fold.upserted(conversation.tool_calls, change.tool_calls)
        for res in change.resolve:
            _resolve(t.requests.get(res.request_id), res, now)
        if change.open_request is not None:
            opened = fold.opened(change.open_request)
            t.requests[opened.id] = Request(conversation.id, opened, created_at=now)
        for remember in change.remember:
            t.add_rule(conversation, remember, now)
        if change.status is not None:
            conversation.status = change.status
        if change.position is not None:
            conversation.position = change.position
        if change.plan_version is not None:
            conversation.plan_version = change.plan_version
        conversation.updated_at = now
        written: dict[int, OutboxRow] = {}  # new rows, and notes a stop dropped
        for event, outgoing in rendered:
            if isinstance(event, Stopped):
                written |= {row.id: row for row in _drop_pending_notes(t, conversation.id)}
            for out in outgoing:
                row = t.add_outbox(conversation.id, out.action, out.purpose, out.request_id)
                written[row.id] = row
        for out in session:  # after the change's own rows (conversations.sessions)
            row = t.add_outbox(conversation.id, out.action, out.purpose, out.request_id)
            written[row.id] = row
        for audited in change.audit:
            t.add_audit(conversation.id, conversation.binding, audited, now)
        if written:
            t.on_outbox([written[i].record() for i in sorted(written)])
        return committed


def _check_pending(conversation: Conversation, tool_use_ids: Sequence[str]) -> None:
    wanted = set(tool_use_ids)
    calls = conversation.tool_calls
    pending = [i for i in wanted if i in calls and calls[i].state is ToolState.PENDING_APPROVAL]
    if len(pending) != len(wanted):
        raise RequestConflict("a gated tool call was decided meanwhile")


def _resolve(found: Request | None, res: RequestResolution, now: datetime) -> None:
    if found is None:
        return
    found.request = fold.resolved(found.request, res)
    found.decided_at = now


def _drop_pending_notes(t: Tables, conversation_id: str) -> list[OutboxRow]:
    dropped = []
    for row in t.outbox.values():
        if (row.conversation_id, row.state, row.purpose) == (conversation_id, "pending", "note"):
            row.state = "dropped"
            dropped.append(row)
    return dropped
