"""A tool approval's message: the calls the policy asks about, and how far a ✅ may reach.

One message per model turn's gated calls (:class:`core.vocabulary.run_events.
ToolApprovalRequested`): a line per call with its summary and why the policy asks, the
bot's ✅ and ❌ seeded, an Allow and a Deny button per call; where the settings offer
approvals wider than once (``approval_scopes``: for the run, always in the channel;
:mod:`core.vocabulary.approvals`), a line saying what each call's wider approval would
remember, and a button per call and scope whose label shows the command prefix. Pure,
like :mod:`conversations.render`, which calls it (docs/architecture.md, "What a person
sees").
"""

from __future__ import annotations

from typing import Literal

from conversations.actions import ApproveButton, RejectButton, WiderApproveButton
from conversations.closing import HINT
from conversations.events import Button, PlatformRef, PostReply
from conversations.store import Outgoing
from core.policy.summary import shorten
from core.vocabulary.approvals import ApprovalScope
from core.vocabulary.run_events import ToolApprovalRequested

BUTTON_LABEL_CHARS = 75
"""Characters of a button's label at most: Slack's limit for a button's text
(https://docs.slack.dev/reference/block-kit/block-elements/button-element, 75), under
Discord's 80 (https://discord.com/developers/docs/components/reference#button)."""


def tool_approval_message(
    binding: PlatformRef, event: ToolApprovalRequested, approve_emoji: str, reject_emoji: str
) -> Outgoing:
    """``🔐 May I run this? — react ✅ to allow, ❌ to deny, or use the buttons``, a line
    per call (its summary and why the policy asks), and, where approvals wider than once
    are offered, a line saying how far and what each would cover. Buttons: Allow and
    Deny per call, then per call one for each wider scope, its label showing the command
    prefix it would remember (:func:`_wider_buttons`)."""
    several = len(event.calls) > 1
    lines = [
        f"🔐 May I run {'these' if several else 'this'}?{HINT}react "
        f":{approve_emoji}: to allow, :{reject_emoji}: to deny"
        + (" every call still undecided" if several else "")
        + ", or use the buttons"
    ]
    lines += [f"{c.number}. {c.summary} — {c.reason}" for c in event.calls]
    wider = scopes_said(event.scopes)
    if wider:
        covered = [(c.number, c.pattern.said()) for c in event.calls if c.pattern is not None]
        if several:
            listed = " · ".join(f"{number}. {said}" for number, said in covered)
            lines.append(f"↳ The buttons also allow a call {wider}: {listed}")
        elif covered:
            lines.append(f"↳ The buttons also allow it {wider}: {covered[0][1]}")
    buttons: list[Button] = []
    for c in event.calls:
        suffix = f" {c.number}" if len(event.calls) > 1 else ""
        allow = ApproveButton(request=event.request_id, call=c.number)
        deny = RejectButton(request=event.request_id, call=c.number)
        buttons.append(Button(label=f"Allow{suffix}", action=allow, style="primary"))
        buttons.append(Button(label=f"Deny{suffix}", action=deny, style="danger"))
    buttons += _wider_buttons(event)
    action = PostReply(
        ref=binding,
        text="\n".join(lines),
        buttons=tuple(buttons),
        reactions=(approve_emoji, reject_emoji),
    )
    return Outgoing(action, request_id=event.request_id)


def scopes_said(scopes: tuple[ApprovalScope, ...]) -> str:
    """``for this run (until it ends) or always in this channel``: the approval scopes
    wider than once among ``scopes``; empty when there are none."""
    said = {
        ApprovalScope.RUN: "for this run (until it ends)",
        ApprovalScope.CHANNEL: "always in this channel",
    }
    return " or ".join(said[s] for s in scopes if s in said)


def _wider_buttons(event: ToolApprovalRequested) -> list[Button]:
    """A button per call and wider scope offered: ``Allow 2 for this run: git push …``,
    ``Always allow 2 here: git push …`` (the prefix a command's approval remembers; none
    shown for exact arguments), cut to :data:`BUTTON_LABEL_CHARS`."""
    buttons: list[Button] = []
    for c in event.calls:
        if c.pattern is None:
            continue
        suffix = f" {c.number}" if len(event.calls) > 1 else ""
        prefix = c.pattern.command_prefix
        shown = f": {prefix} …" if prefix is not None else ""
        for scope in event.scopes:
            if scope is ApprovalScope.ONCE:
                continue
            run = scope is ApprovalScope.RUN
            label = (
                f"Allow{suffix} for this run{shown}" if run else f"Always allow{suffix} here{shown}"
            )
            kind: Literal["run", "channel"] = "run" if run else "channel"
            action = WiderApproveButton(kind=kind, request=event.request_id, call=c.number)
            buttons.append(Button(label=shorten(label, BUTTON_LABEL_CHARS), action=action))
    return buttons
