"""Closing the calls left open when a run ends early: a stop, a failure, an expiry, a shutdown.

A stop and an expiry end the conversation ``cancelled`` in one change
(:func:`stopped`, :func:`expired`): every open call gets its result, every open
request is closed, and the requests' messages are edited.

Every ``tool_use`` of the journal gets exactly one ``tool_result`` (the Messages
API rejects anything else), so each call still without one gets a result and a
final record, made by :func:`core.tool_state.move`: ``interrupted`` if it was
running (its effects may be partial), ``cancelled`` if it never started,
``failed`` when the run failed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.requests.audit import stopped_by
from core.requests.closing import requests_closed
from core.tool_state import Moved, answered_calls, move, parts, unrecorded
from core.tools import control
from core.vocabulary import lifecycle
from core.vocabulary.audit import Means
from core.vocabulary.entries import AssistantTurn, StopEntry, ToolCall, ToolResultEntry, UserText
from core.vocabulary.inputs import StopOutcome, ThreadMessage, delivery_keys, said_to_run
from core.vocabulary.journal import Change, RequestResolution
from core.vocabulary.people import Person
from core.vocabulary.requests import RequestState
from core.vocabulary.run_events import Expired, Stopped
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolCallRecord, ToolState


@dataclass(frozen=True)
class Closing:
    """Results and records that close open calls, with counts for the stop message."""

    results: tuple[ToolResultEntry, ...]
    records: tuple[ToolCallRecord, ...]
    cancelled: int
    interrupted: int


def close_open_calls(
    snap: ConversationSnapshot,
    by_name: str,
    read_only: Callable[[str], bool],
    *,
    failed: bool = False,
) -> Closing:
    """One result and a final record for every call of the journal that has no result.

    ``by_name``: who or what stopped the run, as the results say it (``alice``,
    ``expiry of the request``, ``the failure``); ``failed``: the run failed, every
    call ends ``failed``. ``read_only(name)`` tells a tool's kind, for a call with
    no record.
    """
    moves: list[Moved] = []
    cancelled = interrupted = 0
    for call, record in _all_open(snap, read_only):
        is_control = control.is_control(call.name)
        was_running = record.state is ToolState.RUNNING and not is_control
        if failed:
            to, text = ToolState.FAILED, f"Not run: the run ended with {by_name}."
        elif was_running:
            to = ToolState.INTERRUPTED
            text = f"Stopped by {by_name} while it ran; its effects may be partial."
        else:
            to, text = ToolState.CANCELLED, f"Stopped by {by_name} before it ran."
        if not is_control:
            interrupted += was_running
            cancelled += not was_running
        moves.append(move(record, to, result=text))
    results, records = parts(moves)
    return Closing(results, records, cancelled, interrupted)


def interrupt_running(
    snap: ConversationSnapshot, reason: str, read_only: Callable[[str], bool]
) -> Closing:
    """An ``interrupted`` result and record for every call that was running.

    For a process that stops while a command runs (``reason`` says why): the
    conversation stays ``running``, and the next start goes on with the model
    reading these results. Calls not yet started are left to run then.
    """
    text = (
        f"Interrupted while it ran: {reason}. Its effects may be partial; check "
        "the workspace before retrying it."
    )
    results, records = parts(
        move(record, ToolState.INTERRUPTED, result=text)
        for call, record in _all_open(snap, read_only)
        if record.state is ToolState.RUNNING and not control.is_control(call.name)
    )
    return Closing(results, records, 0, len(records))


def _all_open(
    snap: ConversationSnapshot, read_only: Callable[[str], bool]
) -> list[tuple[ToolCall, ToolCallRecord]]:
    answered = answered_calls(snap)
    return [
        (call, unrecorded(snap, read_only(call.name), call, rec.seq, index))
        for rec in snap.journal
        if isinstance(rec.entry, AssistantTurn)
        for index, call in enumerate(rec.entry.tool_calls)
        if call.id not in answered
    ]


def stopped(
    snap: ConversationSnapshot,
    by: Person,
    read_only: Callable[[str], bool],
    notes: Sequence[ThreadMessage] = (),
    means: Means | None = None,
) -> Change:
    """``by`` stopped the conversation: every open call closed (:func:`close_open_calls`),
    every open request ``cancelled``, and the conversation ``cancelled``. ``notes``: the
    messages sent while the run worked that it had not read yet (steered, queued or
    interrupting), kept as notes and their deliveries handled, so no restart runs them
    (what a later message starts reads them). The stop, by ``means``, is in the audit
    trail (:func:`core.requests.audit.stopped_by`)."""
    closing = close_open_calls(snap, by.name, read_only)
    said, keys = said_to_run(notes, instructions=False)
    return Change(
        entries=(StopEntry(by=by), *closing.results, *said),
        handled=keys,
        tool_calls=closing.records,
        resolve=tuple(
            RequestResolution(request_id=r.id, state=RequestState.CANCELLED, by=by)
            for r in snap.open_requests
        ),
        status=lifecycle.move(snap.status, lifecycle.CANCELLED),
        events=(
            *requests_closed(snap, snap.open_requests, "stopped", by=by),
            Stopped(
                by_name=by.name,
                cancelled_calls=closing.cancelled,
                interrupted_calls=closing.interrupted,
            ),
        ),
        audit=(stopped_by(by, means),),
    )


def aimed_outcome(snap: ConversationSnapshot, run: int | None) -> StopOutcome | None:
    """What a stop aimed at ``run`` does to ``snap``: None when it stops the run active
    now (it is the one aimed at, or the stop named none); else why it stops nothing:
    ``NOTHING_ACTIVE`` (no run named and none ever ran), ``ALREADY_STOPPED`` (the run
    aimed at, or with none named the newest, ended by a stop: a ``StopEntry`` comes
    after it), ``ENDED`` (it ended otherwise, a later run maybe active:
    docs/architecture.md, "One mention, one approval, one stop")."""
    if run is None:
        if snap.status.active:
            return None
        if snap.run == 0:
            return StopOutcome.NOTHING_ACTIVE
        run = snap.run
    elif snap.run == run and snap.status.active:
        return None
    after = (r.entry for r in snap.journal if r.seq > run)
    if any(isinstance(entry, StopEntry) for entry in after):
        return StopOutcome.ALREADY_STOPPED
    return StopOutcome.ENDED


def stopped_before_start(message: ThreadMessage, by: Person, means: Means | None = None) -> Change:
    """``by`` stopped a request that waited for its run's slot and never started
    (docs/architecture.md, "Limits and priorities"): ``message`` kept as a note, its
    delivery handled (no restart runs it), the thread told ``Stopped``, the stop (by
    ``means``) in the audit trail; the conversation's status is left as it is (a later
    message starts it again)."""
    note = UserText(author=message.author, text=message.text, role="note", files=message.blocks)
    return Change(
        entries=(note,),
        handled=delivery_keys(message),
        events=(Stopped(by_name=by.name),),
        audit=(stopped_by(by, means, "left the queue before it started"),),
    )


def expired(
    snap: ConversationSnapshot, request_id: str, read_only: Callable[[str], bool]
) -> Change:
    """The request ``request_id`` waited too long: every open call closed, every open
    request ``expired`` (compare-and-set), and the conversation ``cancelled``."""
    closing = close_open_calls(snap, "expiry of the request", read_only)
    return Change(
        entries=closing.results,
        tool_calls=closing.records,
        resolve=tuple(
            RequestResolution(request_id=r.id, state=RequestState.EXPIRED)
            for r in snap.open_requests
        ),
        status=lifecycle.move(snap.status, lifecycle.CANCELLED),
        events=(
            *requests_closed(snap, snap.open_requests, "expired"),
            Expired(request_id=request_id),
        ),
    )
