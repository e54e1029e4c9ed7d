"""People on the timeline: their messages, their decisions and their stops, who and how.

Who is a platform user id (never a display name). How (a reaction, a button, a reply,
a command) is not journaled: it is read from the audit trail's row of the decision or
stop, written in the same commit with the same time (docs/architecture.md, "The audit
trail"); a row of the same person on the same request nearest in time stands in for a
journal older than the trail, and without one the means is None.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from conversations.inspect.items import Decision, Message, Stop
from conversations.store.audit import AuditEntry
from core.vocabulary.audit import STOP
from core.vocabulary.entries import DecisionEntry, JournalRecord, StopEntry, UserText
from core.vocabulary.requests import PendingRequest, PlanApproval, PlanRevision
from core.vocabulary.verdicts import CallsDecided


def message(record: JournalRecord, redact: Callable[[str], str] = str) -> Message:
    """The item of a person's words (the entry a :class:`UserText`); a file's words are
    cut after ``redact``."""
    said = record.entry
    assert isinstance(said, UserText)
    return Message(
        seq=record.seq,
        at=record.at,
        who=said.author.id,
        role=said.role,
        text=said.text,
        files=tuple(_file(block, redact) for block in said.files),
    )


def _file(block: Mapping[str, Any], redact: Callable[[str], str]) -> str:
    """A shared file's content block in a few words: its kind and, for text, its first line."""
    kind = str(block.get("type", "file"))
    if kind == "text":
        first = redact(str(block.get("text", ""))).strip().splitlines()
        return f"text: {first[0][:80]}" if first else "text"
    return kind


class Means:
    """How people acted, from a conversation's audit trail (its rows, oldest first)."""

    def __init__(self, rows: Sequence[AuditEntry]) -> None:
        self._rows = [r for r in rows if r.outcome != "refused"]

    def of(
        self, user_id: str, at: datetime, *, request_id: str | None = None, stop: bool = False
    ) -> AuditEntry | None:
        """The row of ``user_id``'s decision on ``request_id`` (or stop, with ``stop``)
        journaled at ``at``: the one with that time, else the nearest; None without one."""
        rows = [
            r
            for r in self._rows
            if r.user_id == user_id
            and (r.request_kind == STOP if stop else r.request_id == request_id)
        ]
        if not rows:
            return None
        return min(rows, key=lambda r: abs((r.at - at).total_seconds()))


def decision(
    record: JournalRecord,
    requests: Mapping[str, PendingRequest],
    means: Means,
    names: Mapping[str, str],
) -> Decision:
    """The item of a decision (the entry a :class:`DecisionEntry`): the request's kind and
    plan version from ``requests`` (by id) or the audit row, each call decided named by
    its tool (``names``, by ``tool_use_id``)."""
    entry = record.entry
    assert isinstance(entry, DecisionEntry)
    row = means.of(entry.by.id, record.at, request_id=entry.request_id)
    request = requests.get(entry.request_id)
    version = (
        request.plan_version
        if isinstance(request, PlanApproval | PlanRevision)
        else (row.version if row is not None else None)
    )
    calls: tuple[tuple[str, str], ...] = ()
    if isinstance(entry.verdict, CallsDecided):
        calls = tuple(
            (names.get(call_id, call_id), verdict.kind)
            for call_id, verdict in entry.verdict.calls.items()
        )
    return Decision(
        seq=record.seq,
        at=record.at,
        who=entry.by.id,
        means=row.means if row is not None else None,
        verdict=entry.verdict.kind,
        request_id=entry.request_id,
        request_kind=(
            request.kind.value if request is not None else (row.request_kind if row else None)
        ),
        version=version,
        calls=calls,
        scope=entry.scope.value if entry.scope is not None else None,
        call=entry.call,
    )


def stop(record: JournalRecord, means: Means) -> Stop:
    """The item of a stop (the entry a :class:`StopEntry`)."""
    entry = record.entry
    assert isinstance(entry, StopEntry)
    row = means.of(entry.by.id, record.at, stop=True)
    return Stop(
        seq=record.seq,
        at=record.at,
        who=entry.by.id,
        means=row.means if row is not None else None,
    )
