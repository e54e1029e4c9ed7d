"""The last edge before a platform: every posted or edited text loses the bot's secrets.

Why here, at the deliverer's senders, and not where rows are written: every message
threadbot shows a person leaves through :meth:`Sender.send`, called by the deliverer
and by nothing else in ``conversations``: rows rendered from run events, the hub's
notices, the "could not deliver" reports, and the answers sent at once outside the
outbox (:meth:`conversations.outbox.Deliverer.send_now`). Some texts exist only at
delivery: merged progress notes, the status message edited in place, a closed
request's edit (built from the stored message), a report quoting a platform's error.
The outbox's write paths (a commit's rendered events, ``enqueue``,
``fail_for_good``) would see none of those, and ``send_now`` skips the outbox. Tool
output is redacted earlier as well, where it is stored (:mod:`core.run.tool_calls`).
"""

from __future__ import annotations

from typing import assert_never

from conversations.adapter import Sender
from conversations.events import (
    AddReaction,
    Button,
    OutboundAction,
    PlanCard,
    PostReply,
    SetSessionStatus,
    StartThread,
    UpdateMessage,
)
from core.secrets import Redactor


def redact_action(action: OutboundAction, redactor: Redactor) -> OutboundAction:
    """``action`` with its words redacted (the same object when nothing changed): the
    text, the buttons' labels (a question's options are the model's words) and a plan
    card's title, steps and note. Emoji names and the buttons' values (ids) are
    threadbot's own."""
    match action:
        case PostReply() | UpdateMessage():
            changed: dict[str, object] = {}
            if (text := redactor.redact(action.text)) != action.text:
                changed["text"] = text
            buttons = tuple(_button(b, redactor) for b in action.buttons)
            if buttons != action.buttons:
                changed["buttons"] = buttons
            if action.plan is not None and (plan := _card(action.plan, redactor)) != action.plan:
                changed["plan"] = plan
            return action.model_copy(update=changed) if changed else action
        case StartThread():
            text = redactor.redact(action.text)
            return action if text == action.text else action.model_copy(update={"text": text})
        case AddReaction():
            return action
        case SetSessionStatus():  # the title is the request's words
            title = redactor.redact(action.title)
            return action if title == action.title else action.model_copy(update={"title": title})
        case _:
            assert_never(action)


def _button(button: Button, redactor: Redactor) -> Button:
    """``button`` with its label redacted (itself when nothing changed)."""
    label = redactor.redact(button.label)
    return button if label == button.label else button.model_copy(update={"label": label})


def _card(card: PlanCard, redactor: Redactor) -> PlanCard:
    """``card`` with its title, its steps' words and its note redacted."""
    tasks = tuple(
        task.model_copy(update={"title": redactor.redact(task.title)}) for task in card.tasks
    )
    return card.model_copy(
        update={
            "title": redactor.redact(card.title),
            "tasks": tasks,
            "note": redactor.redact(card.note),
        }
    )


class RedactingSender:
    """A :class:`Sender` that sends through ``inner`` what it is given, redacted."""

    def __init__(self, inner: Sender, redactor: Redactor) -> None:
        self.inner = inner
        self.platform = inner.platform
        self._redactor = redactor

    async def send(
        self, action: OutboundAction, *, idempotency_key: str, maybe_sent: bool = False
    ) -> str | None:
        """``inner.send`` of ``action`` redacted (:func:`redact_action`)."""
        return await self.inner.send(
            redact_action(action, self._redactor),
            idempotency_key=idempotency_key,
            maybe_sent=maybe_sent,
        )


def redacting(sender: Sender, redactor: Redactor) -> Sender:
    """``sender``, redacting what it sends; as is when ``redactor`` has no secrets and
    never will (:data:`core.secrets.NO_SECRETS`: one that may learn some, a new install's
    token, redacts from the moment it does)."""
    return RedactingSender(sender, redactor) if redactor or redactor.grows else sender
