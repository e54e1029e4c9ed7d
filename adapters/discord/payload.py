"""Reading Discord's own kinds of field, and logging a dispatch the translators drop.

The generic readers (a string, an integer, an object, a list) are in
:mod:`adapters.fields`; here are the ones with a Discord rule: ids
(:func:`snowflake`) and interaction tokens (:func:`token`). Each takes a field's
value as :mod:`adapters.discord.types` types it, returns it when it has that shape
at run time and None otherwise, and never raises. :func:`mention` is how a person
is named.

:data:`dropped` is the one log line for a dispatch a translator does not turn into
an event (:class:`adapters.drops.DropLog`, logger ``adapters.discord.translate``).
"""

from __future__ import annotations

import logging

from adapters.drops import DropLog

dropped = DropLog("Discord", logging.getLogger("adapters.discord.translate"))
"""Logs a dispatch that gives no event: ``dropped Discord MESSAGE_CREATE <key>: <why>``."""

_MAX_SNOWFLAKE = 20
"""Digits of the largest 64-bit unsigned integer."""
_MAX_TOKEN = 1000


def snowflake(value: object) -> str | None:
    """``value`` if it is a snowflake (an id: digits, as a string), else None.

    Discord ids are 64-bit unsigned integers sent as strings
    (https://discord.com/developers/docs/reference#snowflakes): at most 20 digits.
    An id that is not one is malformed, and never reaches a REST path.
    """
    if (
        isinstance(value, str)
        and 0 < len(value) <= _MAX_SNOWFLAKE
        and value.isascii()
        and value.isdigit()
    ):
        return value
    return None


def bad_snowflake(value: object) -> bool:
    """Whether ``value`` is there (not None: a field left out or null) but not a snowflake."""
    return value is not None and snowflake(value) is None


def token(value: object) -> str | None:
    """``value`` if it can be an interaction token: printable ASCII, at most 1000 characters.

    Tokens are opaque strings of a few hundred characters
    (https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object);
    one that is not is never put in a REST path.
    """
    if isinstance(value, str) and 0 < len(value) <= _MAX_TOKEN and value.isascii():
        return value if value.isprintable() else None
    return None


def mention(user_id: str) -> str:
    """How the bot names a person on Discord: the user mention ``<@user_id>``.

    Discord shows a mention as the person's current name, and no one can choose a
    name that reads as another person's (a nickname may be anything: an approver's
    id, ``@everyone``). Every text that addresses or names a person (a refusal,
    ``Stopped by``, ``Approved by``) uses it, as on Slack; the bot's messages go
    with ``allowed_mentions`` that ping no one
    (https://discord.com/developers/docs/reference#message-formatting,
    https://discord.com/developers/docs/resources/message#allowed-mentions-object).
    """
    return f"<@{user_id}>"
