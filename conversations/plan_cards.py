"""Plan cards: a plan's message, and its approved steps edited in place as the run works.

:func:`plan_message` is the plan's message on every platform: its text (title and hint,
the steps numbered, the tools), the Approve and Reject buttons, the seeded reactions,
and its card (:class:`~conversations.events.PlanCard`, every step pending), which the
platforms that draw cards draw instead of the text.

Where a platform draws a plan as a card (Slack's ``plan`` block of ``task_card`` blocks:
https://docs.slack.dev/reference/block-kit/blocks/plan-block; Discord's Components V2
message: https://discord.com/developers/docs/components/using-message-components), each
:class:`~core.vocabulary.run_events.PlanProgress` of a change (a step moved:
:mod:`core.run.plan_progress`) becomes one outbox row of purpose :data:`PLAN_STEPS`:
an :class:`~conversations.events.UpdateMessage` with the plan's request id, holding the
outcome line (``✅ Approved by alice (plan v1)``) and the card with the steps as they
stand. The store writes it in the change's commit, after the change's own rows, like a
session's status (:class:`PlanCardRows` is one of the thread's surface renderers,
:class:`conversations.sessions.Surfaces`). The deliverer makes it the edit of the plan's
message (:func:`conversations.closing.closed_message`), keeps only the newest of
several waiting for one message, and edits one message at most once per
``plan_interval`` (docs/architecture.md, "Plan cards"). Elsewhere the plan is a message
and the progress notes say where the run is: no rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from conversations.actions import ApproveButton, RejectButton
from conversations.closing import HINT, outcome_line
from conversations.events import Button, PlanCard, PlanTask, PlatformRef, PostReply, UpdateMessage
from conversations.store import Outgoing
from core.vocabulary.journal import Change
from core.vocabulary.run_events import PlanProgress, PlanProposed, RequestClosed

PLAN_STEPS = "plan_steps"
"""``purpose`` of the row that edits a plan's card with its steps as they stand."""


def plan_message(binding: PlatformRef, event: PlanProposed, approve: str, reject: str) -> Outgoing:
    """The message of plan ``event`` (``📋 Plan (v1) — reply here to change it, or react
    :white_check_mark: to approve / :x: to reject``, the steps numbered, the tools), with
    the request's id; ``approve`` and ``reject`` are the reactions it seeds and names
    (normalized names). A workflow's own plan (``fixed``) is not changed by a reply."""
    change = "" if event.fixed else "reply here to change it, or "
    hint = f"{change}react :{approve}: to approve / :{reject}: to reject"
    lines = [f"📋 Plan (v{event.version}){HINT}{hint}"]
    lines += [f"{n}. {step}" for n, step in enumerate(event.steps, start=1)]
    tools = "Tools this plan needs: " + ", ".join(event.tools) if event.tools else ""
    if tools:
        lines.append(tools)
    card = PlanCard(
        title=f"Plan (v{event.version})",
        version=event.version,
        tasks=tuple(PlanTask(title=step) for step in event.steps),
        note=" · ".join(part for part in (hint, tools) if part),
    )
    buttons = (
        Button(label="Approve", action=ApproveButton(request=event.request_id), style="primary"),
        Button(label="Reject", action=RejectButton(request=event.request_id), style="danger"),
    )
    action = PostReply(
        ref=binding,
        text="\n".join(lines),
        plan=card,
        buttons=buttons,
        reactions=(approve, reject),
    )
    return Outgoing(action, request_id=event.request_id)


def plan_card_edit(binding: PlatformRef, event: PlanProgress) -> Outgoing:
    """The :data:`PLAN_STEPS` row for ``event``: the outcome line as its text, the card."""
    approved = RequestClosed(
        request_id=event.request_id,
        request="plan",
        outcome="approved",
        by_name=event.approved_by,
        plan_version=event.version,
    )
    line = outcome_line(approved)
    card = PlanCard(
        title=f"Plan (v{event.version})",
        version=event.version,
        tasks=tuple(
            PlanTask(title=step, status=status)
            for step, status in zip(event.steps, event.statuses, strict=True)
        ),
        note=line,
    )
    action = UpdateMessage(ref=binding, text=line, plan=card)
    return Outgoing(action, purpose=PLAN_STEPS, request_id=event.request_id)


@dataclass(frozen=True, kw_only=True)
class PlanCardRows:
    """A :data:`~conversations.store.SessionRenderer` giving the :data:`PLAN_STEPS` rows of
    a change in the threads of ``platforms`` (platform names, e.g. ``{"slack"}``)."""

    platforms: frozenset[str]

    def __call__(self, binding: PlatformRef, change: Change) -> Sequence[Outgoing]:
        """A row per :class:`PlanProgress` of ``change``, when ``binding`` is one of
        :attr:`platforms`'s threads; else none."""
        if binding.platform not in self.platforms:
            return ()
        return tuple(
            plan_card_edit(binding, event)
            for event in change.events
            if isinstance(event, PlanProgress)
        )
