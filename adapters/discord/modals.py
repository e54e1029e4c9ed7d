"""A question's form on Discord: an "Answer in words" button that opens a modal.

Under a question with options (buttons whose action is a
:class:`~conversations.actions.ChooseButton`) the adapter adds one more button,
:func:`with_answer_button`, whose action is an :class:`~conversations.actions.AnswerButton`.
Pressing it opens a modal: the interaction's first response is of type MODAL (9),
within Discord's 3 s
(https://discord.com/developers/docs/interactions/receiving-and-responding#responding-to-an-interaction),
so it is built here, pure, from the pressed message's own content and components
(:func:`answer_modal`): its question and its choices are on the message, which outlives a
restart, and nothing is asked of the store. The modal holds one text input (a paragraph,
https://discord.com/developers/docs/components/reference#text-input) whose placeholder
lists the choices. Its submit (an interaction of type MODAL_SUBMIT, 5) becomes the
person's message in the thread (:func:`submitted_text`, read by
:func:`adapters.discord.interactions.interaction_event`): an answer in words, or, a
choice's number alone, that choice (``core/requests/question.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adapters.discord.types import Interaction, InteractionData
from adapters.fields import integer, mapping, mappings, text
from adapters.limits import cut_label
from conversations.actions import AnswerButton, ChooseButton, decode
from conversations.closing import HINT
from conversations.events import Button

MODAL = 9
"""The interaction callback type that opens a modal
(https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-response-object-interaction-callback-type)."""
MODAL_SUBMIT = 5
"""The interaction type of a modal's submit
(https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object-interaction-type)."""
ANSWER_LABEL = "✍️ Answer in words"
"""The label of the button that opens the form."""
INPUT_ID = "answer"
"""``custom_id`` of the modal's text input."""
MAX_TITLE = 45
"""A modal's ``title`` and a text input's ``label``: at most 45 characters
(https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-response-object-modal,
https://discord.com/developers/docs/components/reference#text-input)."""
MAX_PLACEHOLDER = 100
"""A text input's ``placeholder``: at most 100 characters."""
MAX_VALUE = 4000
"""A text input's value: at most 4,000 characters."""
_TEXT_INPUT = 4
_PARAGRAPH = 2
_LABEL = 18
"""Component types: text input (4), label (18, which wraps one input in newer modals)."""


def with_answer_button(buttons: Sequence[Button]) -> tuple[Button, ...]:
    """``buttons``, and after them "Answer in words" when they are a question's choices
    (its action names their request); as they are otherwise."""
    choice = next((b.action for b in buttons if isinstance(b.action, ChooseButton)), None)
    if choice is None:
        return tuple(buttons)
    answer = Button(label=ANSWER_LABEL, action=AnswerButton(request=choice.request))
    return (*buttons, answer)


def answer_modal(d: Interaction) -> dict[str, Any] | None:
    """The MODAL callback body for a press of "Answer in words" in ``d`` (a
    MESSAGE_COMPONENT interaction); None for any other interaction.

    Title: the question's first line (the message's first line without ``❓`` and its
    hint), cut to 45 characters; one required paragraph input, its placeholder the
    choices read from the message's buttons (``Or a number: 1) ... · 2) ...``, cut to
    100 characters). The modal's ``custom_id`` is the pressed button's own.
    """
    data = mapping(d.get("data"))
    custom_id = text(data.get("custom_id"))
    if integer(d.get("type")) != 3 or custom_id is None:
        return None
    if not isinstance(decode(custom_id), AnswerButton):
        return None
    message = mapping(d.get("message"))
    first = (text(message.get("content")) or "").split("\n", 1)[0]
    question = first.removeprefix("❓").rsplit(HINT, 1)[0].strip() or "Your answer"
    choices = [label for label, action in _buttons(message.get("components")) if action]
    placeholder = "Or a number: " + " · ".join(choices) if choices else "Your answer"
    field = {
        "type": _TEXT_INPUT,
        "custom_id": INPUT_ID,
        "style": _PARAGRAPH,
        "label": "Your answer",
        "placeholder": cut_label(placeholder, MAX_PLACEHOLDER),
        "required": True,
        "max_length": MAX_VALUE,
    }
    return {
        "type": MODAL,
        "data": {
            "custom_id": custom_id,
            "title": cut_label(question, MAX_TITLE),
            "components": [{"type": 1, "components": [field]}],
        },
    }


def submitted_text(data: InteractionData) -> str | None:
    """The answer typed in a modal's submit ``data`` (a MODAL_SUBMIT's), or None when it
    is not this adapter's form (its ``custom_id`` no :class:`AnswerButton`) or is blank.

    The input is read in an action row (type 1, ``components``) or a label (type 18,
    ``component``) (https://discord.com/developers/docs/components/reference#text-input).
    """
    custom_id = text(data.get("custom_id"))
    if custom_id is None or not isinstance(decode(custom_id), AnswerButton):
        return None
    for holder in mappings(data.get("components")):
        inner = mappings(holder.get("components"))
        if integer(holder.get("type")) == _LABEL:
            inner = [mapping(holder.get("component"))]
        for field in inner:
            value = text(field.get("value"))
            if field.get("custom_id") == INPUT_ID and value and value.strip():
                return value.strip()
    return None


def _buttons(rows: object) -> list[tuple[str, ChooseButton | None]]:
    """Each button on a message's ``components`` (action rows) with its label, and its
    action when it is a choice."""
    found: list[tuple[str, ChooseButton | None]] = []
    for row in mappings(rows if isinstance(rows, list) else None):
        for button in mappings(row.get("components")):
            action = decode(text(button.get("custom_id")) or "")
            choice = action if isinstance(action, ChooseButton) else None
            found.append((text(button.get("label")) or "", choice))
    return found
