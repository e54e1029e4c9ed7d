"""Tool approval: the gated calls of one model turn wait for a person, a verdict each.

Opens when the policy asked (``ask``) about calls of a turn (:func:`open_approval`):
one request for all of them, one message with a button per call. While the
turn's allowed calls run, the request stays open; the run then waits
(:func:`wait`, ``waiting(tool_approval)``) if some are still undecided. A
decision (:func:`decide`) names one call or every call still undecided: each
becomes ``approved`` (it runs when the run goes on) or ``denied`` (its result
tells the model not to run it or work around it). The verdicts are keyed by
``tool_use_id`` (:class:`core.vocabulary.verdicts.CallsDecided`); once every call is
decided, the request is decided too and the run goes on.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.policy.policy import ToolPolicy
from core.policy.summary import summarize_call
from core.requests.call_verdicts import decided_calls
from core.requests.closing import request_closed
from core.requests.common import Opening
from core.tool_state import move, parts
from core.vocabulary import lifecycle
from core.vocabulary.entries import DecisionEntry
from core.vocabulary.inputs import Approve, Reject
from core.vocabulary.journal import Change, RequestResolution
from core.vocabulary.requests import RequestState, ToolApproval
from core.vocabulary.run_events import GatedCall, ToolApprovalRequested
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolCallRecord, ToolState
from core.vocabulary.verdicts import Approved, CallsDecided, CallVerdict, Denied


def open_approval(
    gated: Sequence[ToolCallRecord], tool_policy: ToolPolicy, opening: Opening
) -> Change:
    """One request for the ``pending_approval`` calls ``gated``, in call order.

    Each call shows its summary and the policy's reason for asking.
    """
    calls = tuple(
        GatedCall(
            number=number,
            tool=r.name,
            summary=summarize_call(r.name, r.input),
            reason=tool_policy.check(
                tool_name=r.name, read_only=r.read_only, arguments=r.input, plan_approved=True
            ).reason,
        )
        for number, r in enumerate(gated, start=1)
    )
    expires_at, remind_at = opening.times()
    request = ToolApproval(
        id=opening.new_id(),
        tool_use_ids=tuple(r.tool_use_id for r in gated),
        prompt="\n".join(c.summary for c in calls),
        expires_at=expires_at,
        remind_at=remind_at,
    )
    return Change(
        open_request=request,
        events=(ToolApprovalRequested(request_id=request.id, calls=calls),),
    )


def is_open_for(snap: ConversationSnapshot, gated: Sequence[ToolCallRecord]) -> bool:
    """Whether an open tool approval already asks about any of ``gated``."""
    ids = {r.tool_use_id for r in gated}
    return any(
        isinstance(r, ToolApproval) and r.state is RequestState.OPEN and ids & set(r.tool_use_ids)
        for r in snap.requests
    )


def wait(snap: ConversationSnapshot, gated: Sequence[ToolCallRecord]) -> Change:
    """Wait for a person (``waiting(tool_approval)``) if ``gated`` are all still undecided.

    The store refuses the change (:class:`core.vocabulary.errors.RequestConflict`) when one of
    them was decided meanwhile: the run goes on instead.
    """
    return Change(
        status=lifecycle.move(snap.status, lifecycle.waiting(ToolApproval.wait)),
        guard_pending=tuple(r.tool_use_id for r in gated),
    )


def decide(
    snap: ConversationSnapshot, request: ToolApproval, decision: Approve | Reject
) -> Change | None:
    """Decide call ``decision.call`` of ``request``, or every call still undecided.

    Returns None when there is nothing left to decide (the call was decided
    already, or there is no such call).
    """
    pending = [
        i
        for i in request.tool_use_ids
        if (r := snap.tool_calls.get(i)) is not None and r.state is ToolState.PENDING_APPROVAL
    ]
    targets = _targets(request, pending, decision.call)
    if not targets:
        return None
    by = decision.by
    approve = isinstance(decision, Approve)
    verdict: CallVerdict = Approved() if approve else Denied()
    text = f"Denied by {by.name}: do not run this call or work around it."
    results, records = parts(
        move(snap.tool_calls[i], ToolState.APPROVED)
        if approve
        else move(snap.tool_calls[i], ToolState.DENIED, result=text)
        for i in targets
    )
    entry = DecisionEntry(
        request_id=request.id,
        verdict=CallsDecided(calls=dict.fromkeys(targets, verdict)),
        by=by,
        call=decision.call,
    )
    if len(targets) < len(pending):
        return Change(entries=(entry, *results), tool_calls=records, guard_pending=tuple(targets))
    every = decided_calls(snap, request, (entry,))
    settled = CallsDecided(
        calls={i: every[n][0] for n, i in enumerate(request.tool_use_ids, start=1) if n in every}
    )
    waiting = snap.status == lifecycle.waiting(ToolApproval.wait)
    return Change(
        entries=(entry, *results),
        tool_calls=records,
        guard_pending=tuple(targets),
        resolve=(
            RequestResolution(
                request_id=request.id, state=RequestState.DECIDED, verdict=settled, by=by
            ),
        ),
        status=lifecycle.move(snap.status, lifecycle.RUNNING) if waiting else None,
        events=request_closed(snap, request, "decided", decided=records, decision=entry),
    )


def _targets(request: ToolApproval, pending: list[str], call: int | None) -> list[str]:
    """The still pending calls a decision about ``call`` (None: all) decides."""
    if call is None:
        return pending
    if not 1 <= call <= len(request.tool_use_ids):
        return []
    return [i for i in pending if i == request.tool_use_ids[call - 1]]
