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

from collections.abc import Iterator

from adapters.fields import mapping, mappings
from adapters.markup import QuoteMarkers, Span, hidden_spans, in_plain_text, without_tokens
from adapters.slack.types import MessageEvent, RichTextNode

QUOTES = QuoteMarkers(line=("&gt;",), rest=("&gt;&gt;&gt;",))
"""Quote markers in a message's (escaped) mrkdwn ``text``."""


def mentions_bot(event: MessageEvent, user_id: str) -> bool:
    """Whether the message ``event`` (``app_mention`` or ``message``) mentions ``user_id``.

    Its ``rich_text`` blocks decide when it has any, else its ``text`` (see the
    module docstring). False for an empty ``user_id``; never raises.
    """
    if not user_id:
        return False
    rich = [b for b in mappings(event.get("blocks")) if b.get("type") == "rich_text"]
    if rich:
        return any(_is_user(element, user_id) for element in _plain_elements(rich))
    content = event.get("text")
    if not isinstance(content, str):
        return False
    tokens = _tokens(content, user_id)
    hidden = hidden_spans(content, QUOTES) if tokens else []
    return bool(in_plain_text(hidden, tokens))


def without_mentions(text: str, user_id: str) -> str:
    """``text`` without the bot's mention tokens outside code and quotes (one space after each)."""
    if not user_id:
        return text
    return without_tokens(text, _tokens(text, user_id), QUOTES)


def _plain_elements(blocks: list[RichTextNode]) -> Iterator[RichTextNode]:
    """The inline elements of the blocks' sections, outside code blocks and quotes."""
    for block in blocks:
        for part in mappings(block.get("elements")):
            if part.get("type") == "rich_text_section":
                yield from mappings(part.get("elements"))
            elif part.get("type") == "rich_text_list":
                for section in mappings(part.get("elements")):
                    if section.get("type") == "rich_text_section":
                        yield from mappings(section.get("elements"))
            # rich_text_preformatted and rich_text_quote are skipped: code, quotes


def _is_user(element: RichTextNode, user_id: str) -> bool:
    if element.get("type") != "user" or element.get("user_id") != user_id:
        return False
    return mapping(element.get("style")).get("code") is not True


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
