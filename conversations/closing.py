"""What a closed request's message says: its outcome line, and the edit that puts it first.

When a request closes (:class:`~core.vocabulary.run_events.RequestClosed`), its message
is edited (docs/architecture.md, "What a person sees"): :func:`outcome_line` says what
became of it and who decided (``✅ Approved by alice``), and :func:`closed_message` makes
the edit: the outcome line first, then the message without its hint and its buttons.
Pure functions, no I/O, like :mod:`conversations.render`.
"""

from __future__ import annotations

from typing import assert_never

from conversations.events import PostReply, UpdateMessage
from core.policy.summary import shorten
from core.vocabulary.approvals import SCOPE_SAID, ApprovalScope
from core.vocabulary.run_events import CallOutcome, RequestClosed

HINT = " — "
"""Between a request message's title and its hint, on its first line (the hint has none)."""

_VERDICTS = {
    ("plan", "approved"): "✅ Approved",
    ("plan", "rejected"): "❌ Rejected",
    ("plan", "revised"): "✏️ Change asked",
    ("continue", "approved"): "▶️ Continued",
    ("continue", "rejected"): "⏹ Stopped here",
    ("budget", "approved"): "💰 Budget raised",
    ("budget", "rejected"): "⏹ Stopped here",
    ("retry", "approved"): "🔁 Retried",
    ("retry", "rejected"): "⏹ Not retried, stopped",
}
"""Words of a decision ``(request, outcome)`` before ``by <name>``."""

ANSWER_CHARS = 200
"""Characters of a question's answer in words shown on its closed message, at most."""


def outcome_line(event: RequestClosed) -> str:
    """The first line of a closed request's message: what became of it, and who.

    A plan: ``✅ Approved by alice (plan v2)``, ``❌ Rejected by bob (plan v1)``,
    ``✏️ Change asked by bob (plan v1)``, ``↻ Replaced by plan v3``. Go on?:
    ``▶️ Continued by alice`` or ``⏹ Stopped here by alice``; a budget: ``💰 Budget
    raised by alice``; retry?: ``🔁 Retried by
    alice`` or ``⏹ Not retried, stopped by alice``. A tool approval: ``✅ Allowed by
    alice`` (``❌ Denied by ...``) when one person gave every call the same verdict,
    else each call: ``✅ call 1 allowed by alice · ❌ call 2 denied by bob``; an
    approval wider than once says its scope and what it covers (``✅ Allowed by alice
    always in this channel: commands starting with `make test```). Any
    request: ``⏹ Stopped by alice``, ``⌛ Expired``, followed for a tool approval by
    the calls decided before (``· ✅ call 1 allowed by alice · call 2 not decided``).
    A question with options: ``✅ <@U1> chose 2) shared, with a lock``, or for an answer
    in words ``💬 <@U1> answered: <its first line, cut to 200 characters>``.
    Names are the names the thread shows: on Slack and Discord the person's mention
    (``<@U1>``), which the platform shows as their name.
    """
    by = event.by_name or "someone"
    match event.outcome:
        case "stopped":
            line = f"⏹ Stopped by {by}"
        case "expired":
            line = "⌛ Expired"
        case "replaced":
            return f"↻ Replaced by plan v{event.replaced_by}"
        case "decided":
            line = _decided_calls(event.calls)
        case "answered" if event.option is not None:
            return f"✅ {by} chose {event.option}) {event.answer or ''}".rstrip()
        case "answered":
            said = (event.answer or "").strip().split("\n", 1)[0]
            return f"💬 {by} answered: {shorten(said, ANSWER_CHARS)}"
        case _:
            line = f"{_VERDICTS.get((event.request, event.outcome), '☑️ Decided')} by {by}"
    if event.plan_version is not None:
        line += f" (plan v{event.plan_version})"
    if event.outcome in ("stopped", "expired") and any(
        c.outcome != "undecided" for c in event.calls
    ):
        line += " · " + " · ".join(_call_outcome(c) for c in event.calls)
    return line


def closed_message(original: PostReply, closing: UpdateMessage, message_id: str) -> UpdateMessage:
    """The edit of a closed request's message ``message_id``: outcome first, no hint, no buttons.

    ``original`` is the request's message as posted, ``closing`` the row written
    for :class:`~core.vocabulary.run_events.RequestClosed` (its text is :func:`outcome_line`).
    The text is the outcome line, then the original text with the hint cut from its
    first line (``📋 Plan (v1) — reply here ...`` becomes ``📋 Plan (v1)``) and without
    the last line that mentioned who it waited for (``original.mentions``); the
    buttons are removed (``buttons=()``). The seeded reactions stay: a reaction
    after the close is answered as too late.

    A long message posted in parts stores only its last part's id (the part with
    the buttons): that part becomes this whole text, which the adapter cuts to one
    message (Slack 3,900, Discord 2,000 characters, ending in ``…``); the outcome
    line, first, survives the cut, and the earlier parts stay as they were.

    A plan's card (:class:`~conversations.events.PlanCard`) stays, the outcome line as
    its note; an edit of its steps (:mod:`conversations.plan_cards`) brings its own
    card, with the steps as they stand now.
    """
    whole = original.text
    if original.mentions:  # the line that named who it waited for: nobody waits now
        whole = whole.rpartition("\n")[0]
    first, newline, rest = whole.partition("\n")
    title = first.rsplit(HINT, 1)[0]
    text = f"{closing.text}\n{title}{newline}{rest}"
    ref = original.ref.model_copy(update={"message": message_id})
    card = closing.plan or original.plan
    if card is not None:
        card = card.model_copy(update={"note": closing.text})
    return UpdateMessage(ref=ref, text=text, buttons=(), plan=card)


def _decided_calls(calls: tuple[CallOutcome, ...]) -> str:
    """``✅ Allowed by alice`` for one verdict by one person (``✅ Allowed by alice for
    this run: commands starting with `make test```, one scope wider than once), else
    each call's outcome."""
    verdicts = {(c.outcome, c.by_name, _scope(c, ": ")) for c in calls}
    if len(verdicts) == 1:
        outcome, name, scope = verdicts.pop()
        if outcome != "undecided":
            verdict = "✅ Allowed" if outcome == "allowed" else "❌ Denied"
            return f"{verdict} by {name or 'someone'}{scope}"
    return " · ".join(_call_outcome(c) for c in calls)


def _scope(call: CallOutcome, before: str) -> str:
    """`` for this run: commands starting with `make test``` (``before`` between the scope
    and the pattern), or ``""`` for an approval of this call once."""
    if call.scope is None or call.scope is ApprovalScope.ONCE:
        return ""
    pattern = f"{before}{call.pattern.said()}" if call.pattern is not None else ""
    return f" {SCOPE_SAID[call.scope]}{pattern}"


def _call_outcome(call: CallOutcome) -> str:
    match call.outcome:
        case "allowed":
            scope = _scope(call, ", ")
            return f"✅ call {call.number} allowed by {call.by_name or 'someone'}{scope}"
        case "denied":
            return f"❌ call {call.number} denied by {call.by_name or 'someone'}"
        case "undecided":
            return f"call {call.number} not decided"
        case _:
            assert_never(call.outcome)
