"""Run events as chat messages: what a person sees in the thread.

Pure functions, no I/O: :func:`render_event` turns one run event of a
conversation bound to ``binding`` into outbox rows. Wording follows
docs/architecture.md, "What a person sees": few messages, each with one job,
everything in the thread.

A request's message (plan, tool approval, go on?, retry?) is an outbox row with
the request's id, and its first line is ``title — hint``: the hint (after
:data:`HINT`) says how to decide. When the request closes
(:class:`~core.vocabulary.run_events.RequestClosed`), a row of purpose :data:`CLOSED` with
the same request id holds the outcome line; the deliverer, in order after the
request's message, turns it into the edit with
:func:`conversations.closing.closed_message`: the outcome line first, then the message
without its hint and without buttons.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Literal, assert_never

from conversations.actions import ApproveButton, ChooseButton, RejectButton
from conversations.closing import HINT, outcome_line
from conversations.emoji import NUMBERS as NUMBER_REACTIONS
from conversations.emoji import to_unicode
from conversations.events import ANSWER, Button, PlatformRef, PostReply, UpdateMessage
from conversations.feedback import FEEDBACK_BUTTONS
from conversations.plan_cards import plan_message
from conversations.store import Outgoing
from conversations.tool_approvals import BUTTON_LABEL_CHARS, tool_approval_message
from conversations.totals import (
    branch_line,
    calls_said,
    code_text,
    count_said,
    format_stats,
    roles_line,
)
from core.policy.summary import shorten
from core.pricing import dollars
from core.requests.escalation import stuck_line
from core.run.stats import duration_said
from core.vocabulary.run_events import (
    BudgetReached,
    ContinueAsked,
    EscalationAsked,
    Expired,
    PlanProgress,
    PlanProposed,
    ProgressNote,
    QuestionAsked,
    Refused,
    Reminder,
    RequestClosed,
    RunAnswered,
    RunEvent,
    RunFailed,
    Stopped,
    ToolApprovalRequested,
    WorkflowRefused,
)

APPROVE = "white_check_mark"
REJECT = "x"
CLOSED = "closed"
"""``purpose`` of the outbox row that edits a closed request's message (a milestone, not a note)."""
QUEUED = "queued"
"""``purpose`` of the rows of a run's queued message (docs/architecture.md, "Limits and
priorities"): its post, then edits of it, all with the request id :func:`queued_id`."""


def queued_id(wait: str) -> str:
    """The request id the rows of a queued message share (no pending request has it):
    ``queued-`` and 32 hex digits of a digest of ``wait``, what names the waiting run
    in its conversation however often its process restarts (see
    :mod:`conversations.hub._queued`), within the column's 64 characters."""
    return "queued-" + hashlib.sha256(wait.encode()).hexdigest()[:32]


def queued_text(ahead: int) -> str:
    """``⏳ Queued: 3 runs ahead of this one.``: a run waiting for its slot."""
    runs = "1 run" if ahead == 1 else f"{ahead} runs"
    return f"⏳ Queued: {runs} ahead of this one."


def is_queued_count(text: str) -> bool:
    """Whether ``text`` is a count :func:`queued_text` wrote (the run still waits), not
    the started or left line."""
    return text.startswith("⏳ Queued: ")


def started_text(waited: float) -> str:
    """``▶️ Started after waiting 1m 05s in the queue.``: the queued message once it ran."""
    return f"▶️ Started after waiting {duration_said(waited)} in the queue."


LEFT_QUEUE = "⏹ Left the queue before it started."
"""The queued message of a run stopped (or cut by a shutdown) while it waited."""


@dataclass(frozen=True, kw_only=True)
class RenderSettings:
    """Reactions the bot seeds on a plan (normalized names) and shows in its hints."""

    approve_emoji: str = APPROVE
    reject_emoji: str = REJECT


def render_event(
    binding: PlatformRef, event: RunEvent, settings: RenderSettings | None = None
) -> list[Outgoing]:
    """Outbox rows for ``event`` in the thread of ``binding``; a plan, a question or an
    answer for someone (its ``mention``) names them in a last line of its own
    (:func:`mention_line`)."""
    return _mentioned(_rows(binding, event, settings or RenderSettings()), event)


def mention_line(event: RunEvent) -> str | None:
    """``<@U0ALICE001>, this plan waits for your approval.`` (the question: ``... waits
    for your answer.``; the answer: ``..., here is the answer.``): the line that mentions
    the person an event is for, in the platform's markup (their name as the adapter
    gave it); None for an event for nobody."""
    match event:
        case PlanProposed(mention=who) if who is not None:
            return f"{who.name}, this plan waits for your approval."
        case QuestionAsked(mention=who) if who is not None:
            return f"{who.name}, this question waits for your answer."
        case RunAnswered(mention=who) if who is not None:
            return f"{who.name}, here is the answer."
        case _:
            return None


def _mentioned(rows: list[Outgoing], event: RunEvent) -> list[Outgoing]:
    """``rows`` with :func:`mention_line` added to the post (the person's id in its
    ``mentions``: the adapter lets that mention notify), and to its card's note."""
    line = mention_line(event)
    mention = getattr(event, "mention", None)
    if line is None or mention is None or not rows:
        return rows
    first, *rest = rows
    post = first.action
    if not isinstance(post, PostReply):
        return rows
    text = f"{post.text}\n{line}"
    card = post.plan and post.plan.model_copy(update={"note": f"{post.plan.note}\n{line}"})
    update = {"text": text, "mentions": (*post.mentions, mention.id), "plan": card}
    addressed = post.model_copy(update=update)
    return [dataclasses.replace(first, action=addressed), *rest]


def _rows(binding: PlatformRef, event: RunEvent, settings: RenderSettings) -> list[Outgoing]:
    match event:
        case ProgressNote():
            mark = event.mark or "⏳"
            prefix = f"{mark} {event.step} · " if event.step else f"{mark} "
            status = format_stats(event.totals) if event.totals else None
            post = PostReply(ref=binding, text=prefix + event.text, status=status)
            return [Outgoing(post, purpose="note")]
        case PlanProposed():
            return [plan_message(binding, event, settings.approve_emoji, settings.reject_emoji)]
        case QuestionAsked():
            return [_question(binding, event)]
        case EscalationAsked():
            return [_escalation(binding, event)]
        case RunAnswered():
            branch = branch_line(event.stats)
            named = f" · workflow {event.workflow}" if event.workflow else ""
            footer = format_stats(event.stats) + named + roles_line(event.stats)
            text = f"{event.mark} {event.text}\n{branch}— {footer}"
            post = PostReply(ref=binding, text=text, buttons=FEEDBACK_BUTTONS)
            return [Outgoing(post, purpose=ANSWER)]
        case RunFailed():
            return [_failure(binding, event, settings)]
        case ContinueAsked():
            return [_continue(binding, event, settings)]
        case BudgetReached():
            return [_budget(binding, event, settings)]
        case Stopped():
            return [Outgoing(PostReply(ref=binding, text=stop_text(event)))]
        case ToolApprovalRequested():
            approve, reject = settings.approve_emoji, settings.reject_emoji
            return [tool_approval_message(binding, event, approve, reject)]
        case Reminder():
            text = f"⏰ Still waiting for an answer here: {event.prompt.splitlines()[0]}"
            return [Outgoing(PostReply(ref=binding, text=text))]
        case Expired():
            text = (
                "⌛ This request expired and the run stopped here; "
                "reply in this thread to start again."
            )
            return [Outgoing(PostReply(ref=binding, text=text))]
        case Refused():
            return [Outgoing(PostReply(ref=binding, text=_refused(event, settings)))]
        case WorkflowRefused():
            return [Outgoing(PostReply(ref=binding, text=workflow_refusal(event)))]
        case RequestClosed():
            action = UpdateMessage(ref=binding, text=outcome_line(event))
            return [Outgoing(action, purpose=CLOSED, request_id=event.request_id)]
        case PlanProgress():  # the plan card's edits, where there are cards: plan_cards
            return []
        case _:
            assert_never(event)


def _refused(event: Refused, settings: RenderSettings) -> str:
    if event.action == "raise_in_words":
        return (
            f"A reply does not raise a budget, {event.by_name}: react "
            f":{settings.approve_emoji}: or press Raise budget to raise it, "
            f":{settings.reject_emoji}: to stop here."
        )
    return refusal(event.action, event.by_name)


def workflow_refusal(event: WorkflowRefused) -> str:
    """``Workflow `deploy` is not allowed in this channel; ask for one of: default, chat
    (workflow=NAME in the mention).``, or the setting it needs and does not have. The name
    asked for is shown as code text (:func:`conversations.totals.code_text`), at most
    :data:`ASKED_SHOWN` characters of it."""
    if event.missing:
        return (
            f"Workflow `{event.asked}` needs the `{event.missing}` setting, which is not set "
            "for this channel. Nothing was started."
        )
    allowed = ", ".join(event.allowed) or "none"
    asked = code_text(event.asked)
    if len(asked) > ASKED_SHOWN:
        asked = asked[:ASKED_SHOWN] + "…"
    said = (
        f"Workflow `{asked}` is not allowed in this channel"
        if asked
        else "`workflow=` names no workflow"
    )
    return f"{said}; ask for one of: {allowed} (workflow=NAME in the mention). Nothing was started."


ASKED_SHOWN = 64
"""Characters of the name a refused ``workflow=NAME`` asked for that its refusal shows."""


def refusal(action: Literal["decide", "stop", "restart"], name: str) -> str:
    """``Only the requester or an approver can decide this, bob.`` (or ``stop this``,
    ``restart this``)."""
    return f"Only the requester or an approver can {action} this, {name}."


def stop_text(event: Stopped) -> str:
    """``⏹ Stopped by alice. 2 tool calls were cancelled.`` (counts only when non-zero)."""
    parts = [f"⏹ Stopped by {event.by_name}."]
    if event.interrupted_calls:
        parts.append(f"{calls_said(event.interrupted_calls)} interrupted while running.")
    if event.cancelled_calls:
        verb = "was" if event.cancelled_calls == 1 else "were"
        parts.append(f"{calls_said(event.cancelled_calls)} {verb} cancelled.")
    return " ".join(parts)


def _failure(binding: PlatformRef, event: RunFailed, settings: RenderSettings) -> Outgoing:
    if event.request_id is None:
        text = f"⚠️ {event.error}\nReply in this thread to start again."
        return Outgoing(PostReply(ref=binding, text=text))
    first, *rest = event.error.split("\n")
    text = "\n".join(
        [
            f"⚠️ {first}{HINT}react :repeat: or :{settings.approve_emoji}:, press Retry, "
            'or reply "retry" to continue from where it stopped.',
            *rest,
        ]
    )
    retry = Button(label="Retry", action=ApproveButton(request=event.request_id), style="primary")
    action = PostReply(ref=binding, text=text, buttons=(retry,))
    return Outgoing(action, request_id=event.request_id)


def _continue(binding: PlatformRef, event: ContinueAsked, settings: RenderSettings) -> Outgoing:
    """``⏸ I've used 24 model turns in the executing step without finishing (its turn cap:
    24) — react ✅ ...``: the step's turn cap reached."""
    where = f"in the {event.step} step" if event.step else "on this"
    cap = "" if event.cap is None else f" (its turn cap: {event.cap})"
    text = (
        f"⏸ I've used {event.turns} model turns {where} without finishing{cap}{HINT}react "
        f":{settings.approve_emoji}: or press Continue to go on, "
        f":{settings.reject_emoji}: to stop here."
    )
    return _go_on(binding, text, event.request_id, "Continue")


def _budget(binding: PlatformRef, event: BudgetReached, settings: RenderSettings) -> Outgoing:
    """``💰 This conversation has spent 201.3k tokens ($1.23), reaching its budget of
    200.0k tokens — ... react ✅ ... to allow another 200.0k tokens and go on ...``."""
    who, kind = ("This conversation", "budget")
    if event.scope == "channel_day":
        who, kind = ("This channel", "daily budget")
    spent = f"{count_said(event.spent_tokens)} tokens"
    if event.spent_micro_usd or event.limit_micro_usd is not None:  # else: no call priced
        spent += f" ({dollars(event.spent_micro_usd)})"
    limit = _amounts(event.limit_tokens, event.limit_micro_usd)
    more = _amounts(event.budget_tokens, event.budget_micro_usd)
    text = (
        f"💰 {who} has spent {spent}, reaching its {kind} of {limit}{HINT}the requester "
        f"or an approver may react :{settings.approve_emoji}: or press Raise budget to "
        f"allow another {more} and go on, :{settings.reject_emoji}: to stop here."
    )
    return _go_on(binding, text, event.request_id, "Raise budget")


def _go_on(binding: PlatformRef, text: str, request_id: str, go: str) -> Outgoing:
    """A "go on?" request's message: ``text``, a ``go`` button and a Stop here button."""
    buttons = (
        Button(label=go, action=ApproveButton(request=request_id), style="primary"),
        Button(label="Stop here", action=RejectButton(request=request_id), style="danger"),
    )
    return Outgoing(PostReply(ref=binding, text=text, buttons=buttons), request_id=request_id)


def _amounts(tokens: int | None, micro_usd: int | None) -> str:
    """``200.0k tokens``, ``$5.00``, or both joined by `` or ``."""
    parts = [f"{count_said(tokens)} tokens" if tokens is not None else ""]
    parts.append(dollars(micro_usd) if micro_usd is not None else "")
    return " or ".join(p for p in parts if p)


def _question(binding: PlatformRef, event: QuestionAsked) -> Outgoing:
    """``❓ <question>``, then ``(reply in this thread)``; with options, the hint on the
    first line (``❓ Which one? — press a button, react 1️⃣-2️⃣ or reply in this thread``),
    the options numbered, whole, one a line, and a button each (its label cut to
    :data:`BUTTON_LABEL_CHARS`), so the message is edited once answered."""
    if not event.options:
        text = f"❓ {event.question}\n(reply in this thread)"
        return Outgoing(PostReply(ref=binding, text=text), request_id=event.request_id)
    first, newline, rest = event.question.partition("\n")
    last = to_unicode(NUMBER_REACTIONS[len(event.options) - 1])
    numbers = f"{to_unicode(NUMBER_REACTIONS[0])}-{last}" if len(event.options) > 1 else last
    lines = [
        f"❓ {first}{HINT}press a button, react {numbers} or reply in this thread{newline}{rest}"
    ]
    lines += [f"{n}) {o}" for n, o in enumerate(event.options, start=1)]
    buttons = tuple(
        Button(
            label=shorten(f"{n}) {o}", BUTTON_LABEL_CHARS),
            action=ChooseButton(request=event.request_id, option=n),
        )
        for n, o in enumerate(event.options, start=1)
    )
    post = PostReply(ref=binding, text="\n".join(lines), buttons=buttons)
    return Outgoing(post, request_id=event.request_id)


def _escalation(binding: PlatformRef, event: EscalationAsked) -> Outgoing:
    """``🆘 I'm stuck: the last 2 commands failed`` (or the escalation's own reason), then
    each failed call and the end of its output in a code block, and how to answer (a
    reply, as to a question)."""
    lines = [f"🆘 {stuck_line(event.failures, event.reason)}"]
    for number, failed in enumerate(event.failures, start=1):
        lines.append(f"{number}. {failed.call}")
        if failed.output:
            lines.append("```\n" + failed.output.replace("```", "ˋˋˋ") + "\n```")
    lines.append("(reply in this thread with what to do next)")
    return Outgoing(PostReply(ref=binding, text="\n".join(lines)), request_id=event.request_id)
