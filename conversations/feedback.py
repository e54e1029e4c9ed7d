"""Feedback on an answer: the 👍 / 👎 buttons under it and what the person is told.

Every final answer carries :data:`FEEDBACK_BUTTONS` (``conversations/render.py``);
each adapter draws them its way (Slack's ``feedback_buttons`` element in a
``context_actions`` block, two Discord buttons; the console prints them and takes a
👍 / 👎 reaction on the answer instead). A press, by anyone in the channel, is stored
with the conversation, one row per person (:mod:`conversations.store.feedback`), and
acknowledged to that person alone with :func:`acknowledgement`
(docs/architecture.md, "What a person sees").
"""

from __future__ import annotations

from collections.abc import Sequence

from conversations.actions import FeedbackButton
from conversations.events import Button

GOOD = "👍"
BAD = "👎"

FEEDBACK_BUTTONS = (
    Button(label=GOOD, action=FeedbackButton(positive=True)),
    Button(label=BAD, action=FeedbackButton(positive=False)),
)
"""The buttons under every final answer: good, then bad."""

FEEDBACK_REACTIONS = {"+1": True, "-1": False}
"""The reactions on a bot message that asks for nothing which count as feedback
(normalized names: 👍 and 👎), and whether each is good."""


def feedback_only(buttons: Sequence[Button]) -> bool:
    """Whether ``buttons`` are feedback buttons only (none, or all of them): a message
    with them asks for nothing, so a long one may still go up as a file."""
    return all(isinstance(b.action, FeedbackButton) for b in buttons)


def acknowledgement(name: str, *, positive: bool) -> str:
    """What the person who gave feedback is told, alone: ``👍 Thanks, alice: your
    feedback is noted.`` (👎 adds how to say what should change)."""
    if positive:
        return f"{GOOD} Thanks, {name}: your feedback is noted."
    return (
        f"{BAD} Thanks, {name}: your feedback is noted. "
        "Reply in this thread to say what should change."
    )
