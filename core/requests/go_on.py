"""Go on? The run stopped short (the turn cap, a model failure a retry may mend).

Two kinds of request ask it, each with its own message:

- :class:`~core.vocabulary.requests.ContinueRequest`: the run used the model turns of
  its workflow step (``waiting(continue)``, :func:`open_continue`), or a budget
  (:func:`open_budget`; approving it raises the budget by one more of its size,
  :mod:`core.pricing`);
- :class:`~core.vocabulary.requests.RetryRequest`: the model API failed and trying
  again may help (``waiting(retry)``, :func:`open_retry`).

A decision (:func:`decide`) goes on (approve) or stops here (reject: the
conversation ends ``cancelled``). A reply from the requester or an approver goes
on too (:func:`reply`); anyone else's is kept as a note and refused in the thread.
Neither request has a control call: the model reads nothing new, the next turn
simply goes on from the journal.
"""

from __future__ import annotations

from core.pricing import Reached
from core.requests.closing import request_closed
from core.requests.common import Opening
from core.vocabulary import lifecycle
from core.vocabulary.entries import DecisionEntry, StopEntry, UserText
from core.vocabulary.inputs import Approve, Reject, ThreadMessage
from core.vocabulary.journal import Change, RequestResolution
from core.vocabulary.requests import ContinueRequest, RequestState, RetryRequest
from core.vocabulary.run_events import BudgetReached, ContinueAsked, Refused, RunFailed, Stopped
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.verdicts import Approved, Rejected


def open_continue(
    snap: ConversationSnapshot, turns: int, opening: Opening, *, cap: int | None = None
) -> Change:
    """The run used ``turns`` model turns in its workflow step (``snap.position``), its
    turn cap ``cap`` (None: ``turns``): ask whether to go on. Going on is a decision,
    so the count starts again (:func:`core.run.agent.turns_in_step`)."""
    cap = turns if cap is None else cap
    expires_at, remind_at = opening.times()
    request = ContinueRequest(
        id=opening.new_id(),
        prompt=f"{turns} model turns in the {snap.position} step (its cap: {cap}); go on?",
        expires_at=expires_at,
        remind_at=remind_at,
    )
    asked = ContinueAsked(request_id=request.id, turns=turns, step=snap.position, cap=cap)
    return Change(
        open_request=request,
        status=lifecycle.move(snap.status, lifecycle.waiting(request.wait)),
        events=(asked,),
    )


def open_budget(snap: ConversationSnapshot, reached: Reached, opening: Opening) -> Change:
    """A budget is used up (``reached``): ask whether to raise it and go on."""
    expires_at, remind_at = opening.times()
    request = ContinueRequest(
        id=opening.new_id(),
        prompt=f"The {reached.scope.replace('_', ' ')} budget is used up; raise it?",
        budget=reached.scope,
        expires_at=expires_at,
        remind_at=remind_at,
    )
    event = BudgetReached(
        request_id=request.id,
        scope=reached.scope,
        spent_tokens=reached.spent.tokens,
        spent_micro_usd=reached.spent.micro_usd,
        limit_tokens=reached.limit.tokens,
        limit_micro_usd=reached.limit.micro_usd,
        budget_tokens=reached.budget.tokens,
        budget_micro_usd=reached.budget.micro_usd,
    )
    return Change(
        open_request=request,
        status=lifecycle.move(snap.status, lifecycle.waiting(request.wait)),
        events=(event,),
    )


def open_retry(snap: ConversationSnapshot, error: str, opening: Opening) -> Change:
    """The model call failed with ``error`` (safe to show): ask whether to try again."""
    expires_at, remind_at = opening.times()
    request = RetryRequest(
        id=opening.new_id(), prompt=error, expires_at=expires_at, remind_at=remind_at
    )
    return Change(
        open_request=request,
        status=lifecycle.move(snap.status, lifecycle.waiting(request.wait)),
        events=(RunFailed(error=error, request_id=request.id),),
    )


def decide(
    snap: ConversationSnapshot,
    request: ContinueRequest | RetryRequest,
    decision: Approve | Reject,
) -> Change:
    """Go on (approve: the run goes on) or stop here (reject: ``cancelled``)."""
    by = decision.by
    verdict = Approved() if isinstance(decision, Approve) else Rejected()
    resolve = (
        RequestResolution(
            request_id=request.id, state=RequestState.DECIDED, verdict=verdict, by=by
        ),
    )
    entry = DecisionEntry(request_id=request.id, verdict=verdict, by=by)
    closed = request_closed(snap, request, verdict.kind, by=by)
    if isinstance(verdict, Rejected):
        return Change(
            entries=(entry, StopEntry(by=by)),
            resolve=resolve,
            status=lifecycle.move(snap.status, lifecycle.CANCELLED),
            events=(*closed, Stopped(by_name=by.name)),
        )
    return Change(
        entries=(entry,),
        resolve=resolve,
        status=lifecycle.move(snap.status, lifecycle.RUNNING),
        events=closed,
    )


def reply(
    snap: ConversationSnapshot, request: ContinueRequest | RetryRequest, message: ThreadMessage
) -> Change:
    """A reply to "go on?": the requester or an approver goes on, in words.

    Anyone else's reply is kept as a note and answered in the thread with the
    words a reaction of theirs gets (:class:`core.vocabulary.run_events.Refused`); the
    request stays open. A budget is not raised in words, not even by them: the
    reply is kept as a note and the thread says how to raise it (a "no, don't"
    must not spend money).
    """
    note = UserText(author=message.author, text=message.text, role="note", files=message.blocks)
    if isinstance(request, ContinueRequest) and request.budget and message.may_continue:
        return Change(
            entries=(note,), events=(Refused(action="raise_in_words", by_name=message.author.name),)
        )
    if not message.may_continue:
        refused = Refused(action="decide", by_name=message.author.name)
        return Change(entries=(note,), events=(refused,))
    return Change(
        entries=(note, DecisionEntry(request_id=request.id, verdict=Approved(), by=message.author)),
        resolve=(
            RequestResolution(
                request_id=request.id,
                state=RequestState.DECIDED,
                verdict=Approved(),
                by=message.author,
            ),
        ),
        status=lifecycle.move(snap.status, lifecycle.RUNNING),
        events=request_closed(snap, request, "approved", by=message.author),
    )
