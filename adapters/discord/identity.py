"""Who the bot is on Discord, as READY tells it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adapters.discord.payload import mapping, text


@dataclass(frozen=True)
class BotIdentity:
    """Who the bot is, to recognise its own events and its mentions.

    ``user_id`` is the bot user's id (``READY.d.user.id``) and ``application_id``
    the application's (``READY.d.application.id``); for a bot they are usually,
    not necessarily, equal
    (https://discord.com/developers/docs/events/gateway-events#ready).
    """

    user_id: str
    application_id: str

    @classmethod
    def from_ready(cls, d: Mapping[str, Any]) -> BotIdentity:
        """The identity in a READY dispatch's ``d``; ``ValueError`` if it names no user.

        ``application_id`` falls back to ``user_id`` when READY carries no
        ``application.id``.
        """
        user_id = text(mapping(d, "user"), "id") if isinstance(d, Mapping) else None
        if not user_id:
            raise ValueError("READY carries no user.id")
        return cls(user_id=user_id, application_id=text(mapping(d, "application"), "id") or user_id)
