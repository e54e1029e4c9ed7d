"""``Change``, the one way state moves, and the ``Journal`` protocol that commits it.

A run never writes piecemeal: it hands the store one :class:`Change` at a time,
which the store applies in a single transaction together with the run events
that the change emits (the outbox). What a waiting conversation waits for is a
:data:`core.vocabulary.requests.PendingRequest`, decided once by compare-and-set
(:class:`RequestResolution`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from core.vocabulary.approvals import Remember
from core.vocabulary.audit import Audited
from core.vocabulary.entries import Entry
from core.vocabulary.lifecycle import Status
from core.vocabulary.people import Person
from core.vocabulary.requests import PendingRequest, RequestState
from core.vocabulary.run_events import RunEvent
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolCallRecord
from core.vocabulary.verdicts import Verdict


class RequestResolution(BaseModel):
    """Close a pending request with a state and, for a decision, the verdict and who gave it."""

    model_config = ConfigDict(frozen=True)

    request_id: str
    state: RequestState
    verdict: Verdict | None = None
    by: Person | None = None
    only_if_open: bool = True
    """Compare-and-set: when the request is no longer open, the store raises
    :class:`core.vocabulary.errors.RequestConflict` and applies nothing of the change."""


class Change(BaseModel):
    """One atomic step of a run. Every field is optional; empty lists change nothing.

    The store applies it in one transaction, in this order: journal entries
    (numbered after the last ``seq``), tool records (upserted by ``tool_use_id``),
    request resolutions, the new request, status, position, plan version, and
    the run events (written to the outbox), and the audit trail's entries (``audit``:
    the decisions and refused attempts the change records, written in its transaction).
    """

    model_config = ConfigDict(frozen=True)

    entries: tuple[Entry, ...] = ()
    tool_calls: tuple[ToolCallRecord, ...] = ()
    resolve: tuple[RequestResolution, ...] = ()
    open_request: PendingRequest | None = None
    status: Status | None = None
    position: str | None = None
    plan_version: int | None = None
    events: tuple[RunEvent, ...] = ()
    handled: tuple[str, ...] = ()
    """Delivery keys of inbound messages whose effect this change records; the
    store marks them handled in the same transaction (a crash before it leaves
    them to be handled again at start)."""
    guard_pending: tuple[str, ...] = ()
    """Compare-and-set on tool calls: when any of these records is no longer
    ``pending_approval``, the store raises :class:`core.vocabulary.errors.RequestConflict`."""
    audit: tuple[Audited, ...] = ()
    remember: tuple[Remember, ...] = ()
    """Approvals to remember (:mod:`core.vocabulary.approvals`), kept with the
    conversation's channel in the same transaction as the decision that gave them."""

    def then(self, later: Change) -> Change:
        """This change and ``later`` (computed from the snapshot after this one) as one.

        Committing the result is committing this change, then ``later``, in one
        transaction: entries, run events, resolutions, delivery keys, guards, audit
        entries and approvals to remember in order; a tool record ``later`` gives again
        replaces this change's (in its place); ``later``'s request, status, position and
        plan version win where it sets them. Raises ``ValueError`` when both open a
        request (a commit opens at most one).
        """
        if self.open_request is not None and later.open_request is not None:
            raise ValueError("two changes that each open a request cannot be one commit")
        records = {r.tool_use_id: r for r in self.tool_calls}
        records.update((r.tool_use_id, r) for r in later.tool_calls)
        latest = {
            name: value for name in _LATER_WINS if (value := getattr(later, name)) is not None
        }
        return self.model_copy(
            update={
                "entries": self.entries + later.entries,
                "tool_calls": tuple(records.values()),
                "resolve": self.resolve + later.resolve,
                "events": self.events + later.events,
                "handled": self.handled + later.handled,
                "guard_pending": self.guard_pending + later.guard_pending,
                "audit": self.audit + later.audit,
                "remember": self.remember + later.remember,
                **latest,
            }
        )


_LATER_WINS = ("open_request", "status", "position", "plan_version")
"""The fields of a :class:`Change` that :meth:`Change.then` takes from the later change
when it sets them (the status as that change's ``lifecycle.move`` computed it)."""


class Committed(BaseModel):
    """What a commit gave a change: the ``seq`` of each new entry, in order, and the time
    (UTC) the store stamped on them."""

    model_config = ConfigDict(frozen=True)

    seqs: tuple[int, ...]
    at: datetime


class Journal(Protocol):
    """Durable state of conversations, as the engine needs it.

    Implemented by ``conversations.store``; raises
    :class:`core.vocabulary.errors.ConversationNotFound` for an unknown id.
    """

    async def load(self, conversation_id: str) -> ConversationSnapshot:
        """Everything about one conversation, read in one transaction."""
        ...

    async def commit(
        self, conversation_id: str, change: Change, *, after_seq: int | None = None
    ) -> Committed:
        """Apply ``change`` atomically; return the ``seq`` given to each new entry and their time.

        ``after_seq``: the ``seq`` of the newest entry the caller knows of; the new
        entries are numbered from the next one, and :class:`core.vocabulary.errors.StaleSnapshot`
        is raised (nothing written) when those numbers are taken. None: the store
        reads the newest ``seq`` itself.
        """
        ...
