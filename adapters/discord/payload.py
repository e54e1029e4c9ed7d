"""Reading Discord's own kinds of field, and logging a dispatch the translators drop.

The generic readers (a string, an integer, an object, a list) are in
:mod:`adapters.fields`; here are the ones with a Discord rule: ids
(:func:`snowflake`), interaction tokens (:func:`token`) and the name a person is
shown by (:func:`display_name`). Each takes a field's value as
:mod:`adapters.discord.types` types it, returns it when it has that shape at run
time and None otherwise, and never raises.

:data:`dropped` is the one log line for a dispatch a translator does not turn into
an event (:class:`adapters.drops.DropLog`, logger ``adapters.discord.translate``).
"""

from __future__ import annotations

import logging

from adapters.discord.types import Member, User
from adapters.drops import DropLog
from adapters.fields import text

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


def display_name(user: User, member: Member) -> str:
    """A member's nickname, else the user's global display name, username or id, else ``?``.

    ``member`` may be empty (a DM, or a dispatch without one); the nickname wins
    because it is the name the guild shows
    (https://discord.com/developers/docs/resources/user#usernames-and-nicknames).
    """
    return (
        text(member.get("nick"))
        or text(user.get("global_name"))
        or text(user.get("username"))
        or text(user.get("id"))
        or "?"
    )
