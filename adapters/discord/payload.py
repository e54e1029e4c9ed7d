"""Reading fields of a raw Discord gateway payload without trusting its shape.

A dispatch's ``d`` is JSON from the network: any field may be missing, null, or of
another type than the documented one
(https://discord.com/developers/docs/events/gateway-events#receive-events). Every
reader here returns the field when it has the expected type and a neutral value
(None, ``{}``, ``[]``) otherwise, so translators built on them never raise.

:func:`dropped` is the one log line for a payload a translator does not turn into
an event: its payload type, its delivery key (or ``no key``) and why.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Never

log = logging.getLogger("adapters.discord.translate")

_LABEL_LIMIT = 80
"""Characters of a payload's own value kept in a log line (a fuzzer sends megabytes)."""


def text(mapping: Mapping[str, Any], key: str) -> str | None:
    """``mapping[key]`` if it is a non-empty string, else None."""
    value = mapping.get(key)
    return value if isinstance(value, str) and value else None


def snowflake(mapping: Mapping[str, Any], key: str) -> str | None:
    """``mapping[key]`` if it is a snowflake (an id: digits, as a string), else None.

    Discord ids are 64-bit unsigned integers sent as strings
    (https://discord.com/developers/docs/reference#snowflakes): at most 20 digits.
    An id that is not one is malformed, and never reaches a REST path.
    """
    value = mapping.get(key)
    if isinstance(value, str) and 0 < len(value) <= 20 and value.isascii() and value.isdigit():
        return value
    return None


def bad_snowflake(mapping: Mapping[str, Any], key: str) -> bool:
    """Whether ``mapping[key]`` is there (not null) but not a snowflake."""
    return mapping.get(key) is not None and snowflake(mapping, key) is None


def token(mapping: Mapping[str, Any], key: str) -> str | None:
    """``mapping[key]`` if it can be an interaction token: printable ASCII, at most 1000.

    Tokens are opaque strings of a few hundred characters
    (https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object).
    """
    value = mapping.get(key)
    if isinstance(value, str) and 0 < len(value) <= 1000 and value.isascii():
        return value if value.isprintable() else None
    return None


def integer(mapping: Mapping[str, Any], key: str) -> int | None:
    """``mapping[key]`` if it is an integer (not a bool), else None."""
    value = mapping.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def mapping(parent: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``parent[key]`` if it is a mapping, else an empty one."""
    value = parent.get(key)
    return value if isinstance(value, Mapping) else {}


def items(parent: Mapping[str, Any], key: str) -> list[Any]:
    """``parent[key]`` if it is a list, else an empty one."""
    value = parent.get(key)
    return value if isinstance(value, list) else []


def mappings(parent: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    """The mappings in the list ``parent[key]``."""
    return [item for item in items(parent, key) if isinstance(item, Mapping)]


def display_name(user: Mapping[str, Any], member: Mapping[str, Any]) -> str:
    """A member's nickname, else the user's global display name, username or id."""
    return (
        text(member, "nick")
        or text(user, "global_name")
        or text(user, "username")
        or text(user, "id")
        or "?"
    )


def label(value: object) -> str:
    """``value`` for a log line: a string cut to a few dozen characters, else its type."""
    if isinstance(value, str):
        return value if len(value) <= _LABEL_LIMIT else f"{value[:_LABEL_LIMIT]}..."
    return f"<{type(value).__name__}>"


def dropped(kind: str, key: str | None, why: str, *, malformed: bool = False) -> Never | None:  # noqa: RUF020
    """Log a payload that gives no event; returns None, for ``return dropped(...)``.

    (``Never | None`` is None to a reader; it lets mypy accept ``return dropped(...)``.)

    ``kind`` is the payload type (the dispatch name), ``key`` its delivery key when
    it has one. A payload missing a field it needs, or holding one of the wrong
    type, is ``malformed`` and logged at WARNING; one left out on purpose (the
    bot's own echo, another bot, a system message) at DEBUG.
    """
    level = logging.WARNING if malformed else logging.DEBUG
    log.log(level, "dropped Discord %s %s: %s", kind, label(key) if key else "no key", why)
    return None
