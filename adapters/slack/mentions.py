"""Whether a Slack message mentions the bot, read from the message's structure.

Slack clients send what a person typed as a ``rich_text`` block ("the output of the
Slack client's WYSIWYG message composer, so all messages sent by end-users will
have this format": https://docs.slack.dev/reference/block-kit/blocks/rich-text-block).
A mention of the bot is a ``user`` element with the bot's ``user_id``
(https://docs.slack.dev/reference/block-kit/block-elements/user-element) in a
``rich_text_section``, directly or in a ``rich_text_list``. One inside a
``rich_text_preformatted`` (a code block:
https://docs.slack.dev/reference/block-kit/block-elements/rich-text-preformatted-element),
a ``rich_text_quote``
(https://docs.slack.dev/reference/block-kit/block-elements/rich-text-quote-element),
or styled as inline code (``style.code``:
https://docs.slack.dev/reference/block-kit/block-elements/rich-text-section-element)
is someone showing or quoting the bot's id, and does not count. Slack sends an
``app_mention`` for those too, so the event type is not taken as proof.

A message without any ``rich_text`` block (old clients, integrations and other
bots posting plain ``text``, a ``bot_message``) is read from its ``text`` in
mrkdwn (https://docs.slack.dev/messaging/formatting-message-text): the bot's
mention token ``<@BOT>`` or ``<@BOT|name>`` counts when it stands outside code
(three backticks, inline backticks) and quotes (a line starting with ``&gt;``,
or everything after ``&gt;&gt;&gt;``; Slack escapes ``>`` in text). That is the
same rule the blocks express, read from the other form Slack gives of the same
message, so the ``app_mention`` and the ``message`` event of one message (which
share a delivery key) always agree; trusting ``app_mention`` alone would make the
answer depend on which of the two arrived first.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from adapters.markup import QuoteMarkers, Span, hidden_spans, is_hidden

QUOTES = QuoteMarkers(line=("&gt;",), rest=("&gt;&gt;&gt;",))
"""Quote markers in a message's (escaped) mrkdwn ``text``."""


def mentions_bot(event: Mapping[str, Any], user_id: str) -> bool:
    """Whether the message ``event`` (``app_mention`` or ``message``) mentions ``user_id``.

    Its ``rich_text`` blocks decide when it has any, else its ``text`` (see the
    module docstring). False for an empty ``user_id``; never raises.
    """
    if not user_id:
        return False
    blocks = event.get("blocks")
    rich = [b for b in blocks if _type(b) == "rich_text"] if isinstance(blocks, list) else []
    if rich:
        return any(_is_user(element, user_id) for element in _plain_elements(rich))
    text = event.get("text")
    if not isinstance(text, str):
        return False
    tokens = _tokens(text, user_id)
    spans = hidden_spans(text, QUOTES) if tokens else []
    return any(not is_hidden(spans, start, end) for start, end in tokens)


def without_mentions(text: str, user_id: str) -> str:
    """``text`` without the bot's mention tokens outside code and quotes (one space after each)."""
    if not user_id:
        return text
    spans = hidden_spans(text, QUOTES)
    kept, at = [], 0
    for start, end in _tokens(text, user_id):
        if is_hidden(spans, start, end) or start < at:
            continue
        kept.append(text[at:start])
        at = end + (1 if end < len(text) and text[end] in " \t" else 0)
    kept.append(text[at:])
    return "".join(kept)


def _plain_elements(blocks: list[Any]) -> Iterator[Any]:
    """The inline elements of the blocks' sections, outside code blocks and quotes."""
    for block in blocks:
        for part in _elements(block):
            if _type(part) == "rich_text_section":
                yield from _elements(part)
            elif _type(part) == "rich_text_list":
                for section in _elements(part):
                    if _type(section) == "rich_text_section":
                        yield from _elements(section)
            # rich_text_preformatted and rich_text_quote are skipped: code, quotes


def _is_user(element: Any, user_id: str) -> bool:
    if _type(element) != "user" or element.get("user_id") != user_id:
        return False
    style = element.get("style")
    return not (isinstance(style, Mapping) and style.get("code") is True)


def _elements(node: Any) -> list[Any]:
    elements = node.get("elements") if isinstance(node, Mapping) else None
    return elements if isinstance(elements, list) else []


def _type(node: Any) -> object:
    return node.get("type") if isinstance(node, Mapping) else None


def _tokens(text: str, user_id: str) -> list[Span]:
    """Spans of ``<@USER>`` and ``<@USER|label>`` in ``text``."""
    head = f"<@{user_id}"
    found: list[Span] = []
    at = text.find(head)
    while at != -1:
        after = at + len(head)
        if text.startswith(">", after):
            found.append((at, after + 1))
        elif text.startswith("|", after) and (close := text.find(">", after)) != -1:
            found.append((at, close + 1))
        at = text.find(head, after)
    return found
