"""Whether a Discord message mentions the bot, read from the message's structure.

Discord lists the users a message mentions in its ``mentions`` array and the roles
in ``mention_roles``
(https://discord.com/developers/docs/resources/message#message-object); that list,
not a search of the text, says who was mentioned. The content is only read to
take back what its markup hides: a mention token (``<@ID>``, ``<@!ID>``,
``<@&ROLE>``: https://discord.com/developers/docs/reference#message-formatting)
inside a code block (three backticks), inline code (one or two backticks) or a
quote (a line starting with ``> ``, or everything after ``>>> ``)
(https://support.discord.com/hc/en-us/articles/210298617-Markdown-Text-101-Chat-Formatting-Bold-Italic-Underline)
is someone showing or quoting the bot's id, not calling it. So the bot is
mentioned when Discord lists it (its user, or a bot role from ``bot_roles``) and
the content does not name it only inside code and quotes. A listed mention with
no token at all (a reply that pings the replied-to author; empty content without
the Message Content intent) stands.
"""

from __future__ import annotations

from collections.abc import Collection, Container

from adapters.discord.types import MessageCreateEvent
from adapters.fields import items, mappings, text
from adapters.markup import (
    QuoteMarkers,
    Span,
    hidden_spans,
    in_plain_text,
    occurrences,
    without_tokens,
)

QUOTES = QuoteMarkers(line=("> ",), rest=(">>> ",))
"""Discord's quote markers: ``> `` quotes its line, ``>>> `` the rest of the message."""


def mentions_bot(d: MessageCreateEvent, user_id: str, bot_roles: Container[str]) -> bool:
    """Whether the MESSAGE_CREATE ``d`` mentions the bot (its user or one of ``bot_roles``).

    See the module docstring for the rule; ``d`` may be malformed (never raises).
    """
    content = d.get("content")
    content = content if isinstance(content, str) else ""
    hidden = hidden_spans(content, QUOTES)
    if any(text(user.get("id")) == user_id for user in mappings(d.get("mentions"))):
        if _stands(content, hidden, _user_tokens(user_id)):
            return True
    roles = mentioned_roles(d, bot_roles)
    return any(_stands(content, hidden, (f"<@&{role}>",)) for role in roles)


def mentioned_roles(d: MessageCreateEvent, bot_roles: Container[str]) -> list[str]:
    """The bot's roles that ``d`` lists in ``mention_roles``."""
    return [r for r in items(d.get("mention_roles")) if isinstance(r, str) and r in bot_roles]


def without_mentions(content: str, user_id: str, roles: Collection[str]) -> str:
    """``content`` without the bot's mention tokens in its plain text (one space after each).

    Tokens inside code and quotes stay: they are part of what the person quoted.
    """
    tokens = (*_user_tokens(user_id), *(f"<@&{role}>" for role in roles))
    return without_tokens(content, occurrences(content, tokens), QUOTES)


def _user_tokens(user_id: str) -> tuple[str, ...]:
    return (f"<@{user_id}>", f"<@!{user_id}>") if user_id else ()


def _stands(content: str, hidden: list[Span], tokens: tuple[str, ...]) -> bool:
    """False when ``content`` names a token only where the markup hides it."""
    found = occurrences(content, tokens)
    return not found or bool(in_plain_text(hidden, found))
