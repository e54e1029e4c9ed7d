"""Pure renderers for outbound Slack calls: a neutral action in, Web API calls out.

:func:`render` turns an :data:`~conversations.events.OutboundAction` into the
:class:`ApiCall` list the runner sends in order (method name and JSON arguments,
as ``AsyncWebClient.api_call(method, json=args)`` takes them); no I/O here.

Slack's limits that shape the calls:

- message ``text`` should stay under about 4,000 characters; longer text is
  truncated or split by Slack itself
  (https://docs.slack.dev/reference/methods/chat.postMessage), so a
  long reply is split by :func:`~conversations.textsplit.split_text` into several
  messages of at most ``max_text`` (3,900) characters, code blocks kept whole;
- a section block's text is at most 3,000 characters
  (https://docs.slack.dev/reference/block-kit/blocks/section-block);
- an actions block holds at most 25 elements
  (https://docs.slack.dev/reference/block-kit/blocks/actions-block), and a
  button's label at most 75 characters
  (https://docs.slack.dev/reference/block-kit/block-elements/button-element);
- the feedback buttons under an answer are one ``feedback_buttons`` element in a
  ``context_actions`` block (:func:`feedback_block`), each button's ``value`` the
  serialised action
  (https://docs.slack.dev/reference/block-kit/block-elements/feedback-buttons-element).

Text is escaped as Slack asks (``&``, ``<``, ``>`` as HTML entities,
https://docs.slack.dev/messaging/formatting-message-text#escaping), except in
Slack's own control sequences (``<@U123>``, ``<#C123>``, ``<!date^…>``,
``<https://...|label>``), so mentions and links keep working. Broadcasts
(``<!here>``, ``<!channel>``, ``<!everyone>``, a user group's ``<!subteam^…>``) are
escaped too: threadbot never sends one on purpose, and the text it posts holds the
model's words, which a tool's output may have put there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, assert_never

from adapters.errors import RenderError
from adapters.limits import cut_label, cut_to_fit
from adapters.slack.plan_blocks import plan_blocks
from conversations.actions import FeedbackButton
from conversations.emoji import normalize
from conversations.events import (
    AddReaction,
    Button,
    OutboundAction,
    PostReply,
    SetSessionStatus,
    StartThread,
    UpdateMessage,
)
from conversations.textsplit import split_text

OUTBOX_EVENT_TYPE = "threadbot_outbox"
"""``metadata.event_type`` of every message the outbox posts.

The runner finds a half-sent outbox row by this and ``event_payload.key`` in the
thread's replies (``conversations.replies`` with ``include_all_metadata``)
(https://docs.slack.dev/messaging/message-metadata).
"""

MAX_BUTTONS_PER_BLOCK = 25
MAX_BUTTON_LABEL = 75

_CONTROL = re.compile(
    r"<(?!!(?:here|channel|everyone|subteam\^)\b)"
    r"(?:[@#!][^<>\s|]+|(?:https?://|mailto:)[^<>\s|]+)(?:\|[^<>]*)?>"
)
"""A control sequence kept as it is: a mention, a channel, a date, a link; never a
broadcast (see the module docstring)."""
_ENTITY = re.compile(r"&(?:amp|lt|gt);")


@dataclass(frozen=True)
class ApiCall:
    """One Slack Web API call: ``method`` (``chat.postMessage``) and its JSON ``args``."""

    method: str
    args: dict[str, Any]


def render(
    action: OutboundAction,
    *,
    idempotency_key: str,
    max_text: int = 3900,
    max_section: int = 3000,
    plans: bool = True,
) -> list[ApiCall]:
    """The Web API calls that perform ``action``, in the order to send them.

    - :class:`PostReply`: one ``chat.postMessage`` per chunk of at most
      ``max_text`` characters (``channel``, ``thread_ts`` when ``ref.thread``,
      ``text``, ``blocks`` of mrkdwn sections of at most ``max_section``
      characters, ``metadata`` ``{"event_type": "threadbot_outbox",
      "event_payload": {"key": idempotency_key, "part": n}}`` with ``n`` from 0,
      ``unfurl_links`` False). The buttons go in an ``actions`` block of the last
      message, ``action_id`` and ``value`` both the button's value; the feedback
      buttons in a ``context_actions`` block after it. With
      ``ephemeral_to``: ``chat.postEphemeral`` with ``user`` and no metadata
      (https://docs.slack.dev/reference/methods/chat.postEphemeral). The seeded
      ``reactions`` are not rendered here: see :func:`seed_reactions`.
    - With a plan card and ``plans`` (the workspace takes plan blocks), when the text
      fits one message (``max_text``): the ``blocks`` are the card's
      (:mod:`adapters.slack.plan_blocks`) and then the buttons', the ``text`` the
      notification's fallback; otherwise (no ``plans``, or a plan too long for one
      message, posted in parts as any long text) the card is left out.
    - :class:`UpdateMessage`: one ``chat.update`` (``channel``, ``ts``, ``text``,
      ``blocks``) (https://docs.slack.dev/reference/methods/chat.update); ``blocks``
      is always sent, so buttons left out are removed. Text past ``max_text`` is
      cut at a boundary and ends with ``…``.
    - :class:`AddReaction`: one ``reactions.add`` (``channel``, ``timestamp``,
      ``name``) (https://docs.slack.dev/reference/methods/reactions.add).
    - :class:`StartThread`: its top-level post (:meth:`StartThread.post`), as a
      :class:`PostReply`; its ``ts`` is the thread's.
    - :class:`SetSessionStatus`: one ``agents.sessions.setStatus``
      (:func:`session_call`).

    Raises ``ValueError`` when ``max_text`` or ``max_section`` is below 20, and
    :class:`~adapters.errors.RenderError` (a ``ValueError``) when an update or a
    reaction has no ``ref.message``.
    """
    match action:
        case PostReply():
            if not plans or len(escape(action.text)) > max_text:
                action = action.model_copy(update={"plan": None})
            return _post(action, idempotency_key, max_text, max_section)
        case UpdateMessage():
            if not plans or len(escape(action.text)) > max_text:
                action = action.model_copy(update={"plan": None})
            return [_update(action, max_text, max_section)]
        case AddReaction():
            ts = _message_ts(action.ref.message, "reaction")
            return [_reaction(action.ref.channel, ts, action.emoji)]
        case StartThread():
            return _post(action.post(), idempotency_key, max_text, max_section)
        case SetSessionStatus():
            return [session_call(action)]
        case _:
            assert_never(action)


def session_call(action: SetSessionStatus) -> ApiCall:
    """``agents.sessions.setStatus`` with ``channel_id``, ``thread_ts`` and ``status``,
    and ``title`` and ``initiator_user_id`` when the action has them (Slack uses them
    only when the call creates the session)
    (https://docs.slack.dev/reference/methods/agents.sessions.setStatus). Raises
    :class:`~adapters.errors.RenderError` when ``ref.thread`` is None: a session is a
    thread's."""
    if not action.ref.thread:
        raise RenderError("a Slack agent session needs ref.thread (the thread ts)")
    args: dict[str, Any] = {
        "channel_id": action.ref.channel,
        "thread_ts": action.ref.thread,
        "status": action.status,
    }
    if action.title:
        args["title"] = action.title
    if action.initiator:
        args["initiator_user_id"] = action.initiator
    return ApiCall("agents.sessions.setStatus", args)


def seed_reactions(action: PostReply, channel: str, ts: str) -> list[ApiCall]:
    """``reactions.add`` calls for the reactions ``action`` seeds on its posted message.

    ``channel`` and ``ts`` identify the posted message (the last part of a split
    reply, which carries the buttons), known once ``chat.postMessage`` answered.
    Names are normalized and each is added once. An ephemeral reply takes no
    reactions, so it gives ``[]``.
    """
    if action.ephemeral_to:
        return []
    names = dict.fromkeys(normalize(emoji) for emoji in action.reactions)
    return [_reaction(channel, ts, name) for name in names if name]


def button_blocks(buttons: tuple[Button, ...]) -> list[dict[str, Any]]:
    """The blocks of ``buttons`` alone, without the text's sections: what goes under a
    streamed answer's text (``chat.stopStream``'s ``blocks``, rendered at its bottom:
    https://docs.slack.dev/reference/methods/chat.stopStream)."""
    return _blocks("", buttons, 3000)


def escape(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` for Slack, keeping control sequences (but
    broadcasts) and entities.

    ``a < b & <@U123> <!here>`` becomes ``a &lt; b &amp; <@U123> &lt;!here&gt;``; text
    that already holds ``&amp;``, ``&lt;`` or ``&gt;`` keeps it.
    """
    parts: list[str] = []
    last = 0
    for match in _CONTROL.finditer(text):
        parts.append(_escape_plain(text[last : match.start()]))
        parts.append(match.group(0))
        last = match.end()
    parts.append(_escape_plain(text[last:]))
    return "".join(parts)


def _escape_plain(text: str) -> str:
    pieces = _ENTITY.split(text)
    entities = _ENTITY.findall(text)
    escaped = [p.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") for p in pieces]
    out = escaped[0]
    for entity, piece in zip(entities, escaped[1:], strict=True):
        out += entity + piece
    return out


def _post(action: PostReply, key: str, max_text: int, max_section: int) -> list[ApiCall]:
    chunks = split_text(escape(action.text), max_text) or [""]
    calls: list[ApiCall] = []
    for part, chunk in enumerate(chunks):
        buttons = action.buttons if part == len(chunks) - 1 else ()
        args: dict[str, Any] = {"channel": action.ref.channel}
        if action.ref.thread:
            args["thread_ts"] = action.ref.thread
        args["text"] = chunk
        args["blocks"] = (
            plan_blocks(action.plan, escape) + _blocks("", buttons, max_section)
            if action.plan is not None
            else _blocks(chunk, buttons, max_section)
        )
        if action.ephemeral_to:
            args["user"] = action.ephemeral_to
            calls.append(ApiCall("chat.postEphemeral", args))
            continue
        args["metadata"] = {
            "event_type": OUTBOX_EVENT_TYPE,
            "event_payload": {"key": key, "part": part},
        }
        args["unfurl_links"] = False
        calls.append(ApiCall("chat.postMessage", args))
    return calls


def _update(action: UpdateMessage, max_text: int, max_section: int) -> ApiCall:
    ts = _message_ts(action.ref.message, "update")
    text = cut_to_fit(escape(action.text), max_text)  # chat.update cannot split
    args: dict[str, Any] = {
        "channel": action.ref.channel,
        "ts": ts,
        "text": text,
        "blocks": (
            plan_blocks(action.plan, escape) + _blocks("", action.buttons, max_section)
            if action.plan is not None
            else _blocks(text, action.buttons, max_section)
        ),
    }
    return ApiCall("chat.update", args)


def _reaction(channel: str, ts: str, emoji: str) -> ApiCall:
    return ApiCall("reactions.add", {"channel": channel, "timestamp": ts, "name": normalize(emoji)})


def _blocks(text: str, buttons: tuple[Button, ...], max_section: int) -> list[dict[str, Any]]:
    """Mrkdwn sections for ``text`` (blank pieces skipped), then the buttons' actions blocks."""
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": piece}}
        for piece in split_text(text, max_section)
        if piece.strip()
    ]
    feedback = feedback_block(buttons)
    buttons = tuple(b for b in buttons if not isinstance(b.action, FeedbackButton))
    for start in range(0, len(buttons), MAX_BUTTONS_PER_BLOCK):
        group = buttons[start : start + MAX_BUTTONS_PER_BLOCK]
        blocks.append({"type": "actions", "elements": [_button(b) for b in group]})
    return [*blocks, feedback] if feedback else blocks


FEEDBACK_ACTION_ID = "threadbot_feedback"
"""``action_id`` of the ``feedback_buttons`` element (its buttons' values say the rest)."""


def feedback_block(buttons: tuple[Button, ...]) -> dict[str, Any] | None:
    """A ``context_actions`` block with one ``feedback_buttons`` element, from the first
    good and the first bad feedback button among ``buttons`` (labels as ``text``, each
    ``value`` the button's value); None unless both are there.
    (https://docs.slack.dev/reference/block-kit/blocks/context-actions-block)."""
    good = next((b for b in buttons if _feedback(b) is True), None)
    bad = next((b for b in buttons if _feedback(b) is False), None)
    if good is None or bad is None:
        return None

    def side(button: Button, said: str) -> dict[str, Any]:
        label = cut_label(button.label, MAX_BUTTON_LABEL)
        return {
            "text": {"type": "plain_text", "text": label, "emoji": True},
            "value": button.value,
            "accessibility_label": said,
        }

    element = {
        "type": "feedback_buttons",
        "action_id": FEEDBACK_ACTION_ID,
        "positive_button": side(good, "Good answer"),
        "negative_button": side(bad, "Bad answer"),
    }
    return {"type": "context_actions", "elements": [element]}


def _feedback(button: Button) -> bool | None:
    """Whether a feedback button is the good one; None for any other button."""
    return button.action.positive if isinstance(button.action, FeedbackButton) else None


def _button(button: Button) -> dict[str, Any]:
    label = cut_label(button.label, MAX_BUTTON_LABEL)
    element: dict[str, Any] = {
        "type": "button",
        "action_id": button.value,
        "value": button.value,
        "text": {"type": "plain_text", "text": label, "emoji": True},
    }
    if button.style != "default":
        element["style"] = button.style
    return element


def _message_ts(ts: str | None, what: str) -> str:
    if not ts:
        raise RenderError(f"a Slack {what} needs ref.message (the message ts)")
    return ts
