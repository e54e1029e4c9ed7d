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

An approval for the run or the channel (:class:`core.vocabulary.approvals.ApprovalScope`)
remembers the pattern of each call it names (:func:`core.policy.remembered.pattern_for`)
in the same change, and approves with it the calls of the request still undecided that
a pattern covers. The offered scopes and each call's pattern are in the request's
message (:class:`core.vocabulary.run_events.ToolApprovalRequested`).
"""

from __future__ import annotations

from collections.abc import Sequence

from core.policy.policy import ToolPolicy
from core.policy.remembered import first_covering, pattern_for
from core.policy.summary import summarize_call
from core.requests.call_verdicts import decided_calls
from core.requests.closing import request_closed
from core.requests.common import Opening
from core.tool_state import move, parts
from core.vocabulary import lifecycle
from core.vocabulary.approvals import (
    SCOPE_SAID,
    ApprovalScope,
    CallPattern,
    Remember,
    RememberedRule,
    RuleApplied,
)
from core.vocabulary.entries import DecisionEntry
from core.vocabulary.inputs import Approve, Reject
from core.vocabulary.journal import Change, RequestResolution
from core.vocabulary.requests import RequestState, ToolApproval
from core.vocabulary.run_events import GatedCall, ProgressNote, ToolApprovalRequested
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolCallRecord, ToolState
from core.vocabulary.verdicts import Approved, CallsDecided, CallVerdict, Denied


def open_approval(
    gated: Sequence[ToolCallRecord],
    tool_policy: ToolPolicy,
    opening: Opening,
    scopes: Sequence[ApprovalScope] = (ApprovalScope.ONCE,),
) -> Change:
    """One request for the ``pending_approval`` calls ``gated``, in call order.

    Each call shows its summary and the policy's reason for asking; where ``scopes``
    offer more than once, the pattern a wider approval would remember.
    """
    wider = any(scope is not ApprovalScope.ONCE for scope in scopes)
    calls = tuple(
        GatedCall(
            number=number,
            tool=r.name,
            summary=summarize_call(r.name, r.input),
            reason=tool_policy.check(
                tool_name=r.name, read_only=r.read_only, arguments=r.input, plan_approved=True
            ).reason,
            pattern=pattern_for(r.name, r.input) if wider else None,
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
        events=(
            ToolApprovalRequested(
                request_id=request.id, calls=calls, scopes=tuple(scopes) if wider else ()
            ),
        ),
    )


def by_rules(gated: Sequence[ToolCallRecord], rules: Sequence[RememberedRule]) -> Change | None:
    """The calls of ``gated`` that one of the remembered ``rules`` covers, approved as
    that rule's author's ✅ would: a :class:`RuleApplied` entry and a note each, the
    calls guarded (a decision meanwhile refuses the change). None when none is covered.
    Only calls the policy asks about are ever ``gated``: a rule never answers a ``deny``.
    """
    entries: list[RuleApplied] = []
    records: list[ToolCallRecord] = []
    notes: list[ProgressNote] = []
    for record in gated:
        rule = first_covering(rules, record.name, record.input)
        if rule is None:
            continue
        moved = move(record, ToolState.APPROVED)
        records += moved.records
        entries.append(
            RuleApplied(
                tool_use_id=record.tool_use_id,
                rule_id=rule.id,
                scope=rule.scope,
                pattern=rule.pattern,
                by=rule.by,
            )
        )
        notes.append(
            ProgressNote(
                text=f"{summarize_call(record.name, record.input)} allowed by rule {rule.id}: "
                f"{rule.pattern.said()}, {SCOPE_SAID[rule.scope]} (given by {rule.by.name})",
                mark="✅",
            )
        )
    if not records:
        return None
    return Change(
        entries=tuple(entries),
        tool_calls=tuple(records),
        events=tuple(notes),
        guard_pending=tuple(r.tool_use_id for r in records),
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
    """Decide call ``decision.call`` of ``request``, or every call still undecided; an
    approval wider than once remembers their patterns and decides the calls they cover.

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
    scope = decision.scope if isinstance(decision, Approve) else ApprovalScope.ONCE
    patterns: list[CallPattern] = []
    remember: tuple[Remember, ...] = ()
    if scope is not ApprovalScope.ONCE:
        for i in targets:
            pattern = pattern_for(snap.tool_calls[i].name, snap.tool_calls[i].input)
            if pattern not in patterns:
                patterns.append(pattern)
        targets += [
            i
            for i in pending
            if i not in targets
            and first_covering(patterns, snap.tool_calls[i].name, snap.tool_calls[i].input)
        ]
        remember = tuple(
            Remember(scope=scope, pattern=p, by=by, run=snap.run, request_id=request.id)
            for p in patterns
        )
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
        scope=None if scope is ApprovalScope.ONCE else scope,
        patterns=tuple(patterns),
    )
    if len(targets) < len(pending):
        return Change(
            entries=(entry, *results),
            tool_calls=records,
            guard_pending=tuple(targets),
            remember=remember,
        )
    every = decided_calls(snap, request, (entry,))
    settled = CallsDecided(
        calls={
            i: every[n].verdict for n, i in enumerate(request.tool_use_ids, start=1) if n in every
        }
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
        remember=remember,
    )


def _targets(request: ToolApproval, pending: list[str], call: int | None) -> list[str]:
    """The still pending calls a decision about ``call`` (None: all) decides."""
    if call is None:
        return pending
    if not 1 <= call <= len(request.tool_use_ids):
        return []
    return [i for i in pending if i == request.tool_use_ids[call - 1]]
