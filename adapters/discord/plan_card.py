"""A plan's card as a Discord Components V2 message, pure.

Where a plan fits, its message is a Components V2 message (message flag
:data:`IS_COMPONENTS_V2`, https://discord.com/developers/docs/components/using-message-components):
one Container (type 17) holding a Text Display (type 10) with the lines before the
steps (the outcome line once decided, the title, the hint while it waits), one Text
Display per step, marked, once the run has begun, with where it stands (``◻️``
pending, ``⏳`` in progress, ``✅`` complete, ``⚠️`` error; a plan not begun shows its
steps as on the other platforms, ``1. <step>``), one with the lines after them (the
tools), and an Action Row (type 1) of the buttons; the line that mentions the requester, while the
plan waits, is a Text Display under the container. Such a message has no
``content``: its text lives in its Text Displays
(https://discord.com/developers/docs/components/reference#text-display). The card
is edited in place as the steps move (docs/architecture.md, "Plan cards").

Buttons: while the plan waits, Approve and Reject (the message's own) and Stop; once
decided, Stop while a step is in progress (the run works or waits for a person), none
after. Stop carries a :class:`~conversations.actions.StopButton` without a
conversation: the pressed message's.

Discord's limits (https://discord.com/developers/docs/components/reference): at most
:data:`MAX_COMPONENTS` components in a message, nested ones counted, and at most
:data:`MAX_TEXT` characters of text in all of them. Whether a plan fits depends on its
steps alone (their number and their text, with room kept for the lines around them,
which are cut to that room), so its post and every edit of it agree: a message sent
with the flag must keep it. A plan that does not fit is posted and edited as the
other platforms' plain message (:mod:`adapters.discord.outbound`), in parts, its
buttons under the last.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from adapters.limits import cut_to_fit
from conversations.actions import StopButton
from conversations.events import Button, PlanCard

IS_COMPONENTS_V2 = 1 << 15
"""Message flag: the message is laid out by its components, and has no ``content``
(https://discord.com/developers/docs/resources/message#message-object-message-flags)."""
MAX_COMPONENTS = 40
"""Components in a Components V2 message at most, nested ones counted."""
MAX_TEXT = 4000
"""Characters of text in all of a Components V2 message's components at most."""

CONTAINER, TEXT_DISPLAY, ACTION_ROW = 17, 10, 1
"""Component types (https://discord.com/developers/docs/components/reference#component-object-component-types)."""

MARKS = {"pending": "◻️", "in_progress": "⏳", "complete": "✅", "error": "⚠️"}
"""How a step shows where it stands."""

AROUND = 1200
"""Characters kept for the lines around the steps (the title and the hint or the
outcome, the tools, the mention) and the buttons' labels; each is cut to its share."""
_FIXED = 8
"""Components other than the steps at most: the container, the lines before and after
the steps, the mention line, the action row and its three buttons."""
MAX_STEPS = MAX_COMPONENTS - _FIXED
"""Steps a card holds at most (32)."""


def fits(card: PlanCard) -> bool:
    """Whether ``card`` can be a Components V2 message: at most :data:`MAX_STEPS` steps
    whose lines, with :data:`AROUND` kept for the rest, stay within :data:`MAX_TEXT`."""
    steps = sum(len(_step_line(n, task.title, task.status)) for n, task in _numbered(card))
    return 0 < len(card.tasks) <= MAX_STEPS and steps + AROUND <= MAX_TEXT


def card_components(
    text: str,
    card: PlanCard,
    buttons: Sequence[Button],
    *,
    mentions: bool,
    button: Callable[[Button], dict[str, Any]],
) -> list[dict[str, Any]] | None:
    """The components of the plan message whose text is ``text`` (the plan's steps
    numbered, one per line, as :func:`conversations.plan_cards.plan_message` writes
    them) drawn as ``card``; None when it does not :func:`fit <fits>` or ``text`` does
    not hold the steps (then the message is sent as plain text).

    ``buttons`` are the message's own (Approve and Reject while the plan waits);
    ``mentions``: the text's last line mentions the requester (it goes under the
    container); ``button`` draws a button (:func:`adapters.discord.outbound.components`'
    rule). Each component is at most :data:`MAX_COMPONENTS` in all, with at most
    :data:`MAX_TEXT` characters.
    """
    if not fits(card):
        return None
    if mentions and "\n" in text:
        text, _, mention = text.rpartition("\n")
    else:
        mention = ""
    steps = "\n".join(f"{n}. {task.title}" for n, task in _numbered(card))
    found = ("\n" + text + "\n").find("\n" + steps + "\n")  # whole lines (a step may have several)
    if found < 0:
        return None
    before = text[:found].strip()
    after = text[found + len(steps) :].strip()
    share = AROUND // 4  # before, after, mention, the buttons' labels
    inside: list[dict[str, Any]] = []
    if before:
        inside.append(_text(cut_to_fit(before, share)))
    started = any(task.status != "pending" for task in card.tasks)
    inside += [
        _text(_step_line(n, task.title, task.status) if started else f"{n}. {task.title}")
        for n, task in _numbered(card)
    ]
    if after:
        inside.append(_text(cut_to_fit(after, share)))
    shown = _with_stop(buttons, card)
    if shown:
        inside.append({"type": ACTION_ROW, "components": [button(b) for b in shown]})
    components: list[dict[str, Any]] = [{"type": CONTAINER, "components": inside}]
    if mention:
        components.append(_text(cut_to_fit(mention, share)))
    return components


def _with_stop(buttons: Sequence[Button], card: PlanCard) -> list[Button]:
    """The message's buttons, and Stop while the plan waits or a step is in progress."""
    working = any(task.status == "in_progress" for task in card.tasks)
    if not (buttons or working):
        return []
    stop = Button(label="Stop", action=StopButton(), style="danger")
    return [*buttons[:2], stop]


def _numbered(card: PlanCard) -> list[tuple[int, Any]]:
    return list(enumerate(card.tasks, start=1))


def _step_line(n: int, title: str, status: str) -> str:
    return f"{MARKS.get(status, MARKS['pending'])} {n}. {title}"


def _text(content: str) -> dict[str, Any]:
    return {"type": TEXT_DISPLAY, "content": content}
