"""Folding a committed :class:`~core.vocabulary.journal.Change` into a conversation's snapshot.

A run keeps its conversation in memory while it holds the lease
(:mod:`core.run.live`): after each commit it applies the change to its snapshot
with :func:`apply_change` instead of reading the conversation back. For that to be
the truth, the snapshot after the fold must equal what the store would load, so
the stores build what they keep and load from the same pieces: a new request as
it is kept (:func:`opened`), a resolution as it reads back (:func:`resolved`),
journal records stamped with the commit's time (:func:`records`). The store
contract suite (``tests/test_store_contract.py``) checks ``apply_change`` against
a reload on every backend.

Pure functions: no I/O, no clock (the time comes from the store's
:class:`~core.vocabulary.journal.Committed`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from core.vocabulary.entries import Entry, JournalRecord
from core.vocabulary.journal import Change, Committed, RequestResolution
from core.vocabulary.people import Person
from core.vocabulary.requests import PendingRequest
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolCallRecord


def opened(request: PendingRequest) -> PendingRequest:
    """A new request as the store keeps it: nobody has decided it yet."""
    if request.decided_by is None:
        return request
    return request.model_copy(update={"decided_by": None})


def decider(by: Person | None) -> Person | None:
    """Who decided, as read back: a nameless decider is named by their id."""
    if by is not None and not by.name:
        return Person(id=by.id, name=by.id)
    return by


def resolved(request: PendingRequest, res: RequestResolution) -> PendingRequest:
    """``request`` closed by ``res``: its new state, the verdict and who gave it."""
    return request.model_copy(
        update={"state": res.state, "verdict": res.verdict, "decided_by": decider(res.by)}
    )


def records(
    seqs: Sequence[int], entries: Sequence[Entry], committed: Committed
) -> tuple[JournalRecord, ...]:
    """Journal records for ``entries`` numbered ``seqs``, stamped with the commit's time."""
    return tuple(
        JournalRecord(seq=seq, at=committed.at, entry=entry)
        for seq, entry in zip(seqs, entries, strict=True)
    )


def upserted(
    calls: Mapping[str, ToolCallRecord], changed: Iterable[ToolCallRecord]
) -> dict[str, ToolCallRecord]:
    """``calls`` with ``changed`` put in place by ``tool_use_id`` (new ones added)."""
    merged = dict(calls)
    for record in changed:
        merged[record.tool_use_id] = record
    return merged


def apply_change(
    snap: ConversationSnapshot, change: Change, committed: Committed
) -> ConversationSnapshot:
    """The snapshot after ``change`` was committed as ``committed``.

    Applied in the order the store applies a change (:class:`~core.vocabulary.journal.Change`):
    entries, tool records, resolutions, the new request, status, position, plan
    version. Run events and delivery keys do not show in a snapshot. Costs the
    size of the change plus one copy of the journal's tuple of references.
    """
    requests = snap.requests
    if change.resolve:
        by_id = {res.request_id: res for res in change.resolve}
        requests = tuple(resolved(r, by_id[r.id]) if r.id in by_id else r for r in requests)
    if change.open_request is not None:
        requests = (*requests, opened(change.open_request))
    update: dict[str, object] = {"requests": requests}
    if change.entries:
        update["journal"] = snap.journal + records(committed.seqs, change.entries, committed)
    if change.tool_calls:
        update["tool_calls"] = upserted(snap.tool_calls, change.tool_calls)
    if change.status is not None:
        update["status"] = change.status
    if change.position is not None:
        update["position"] = change.position
    if change.plan_version is not None:
        update["plan_version"] = change.plan_version
    return snap.model_copy(update=update)
