"""Who the bot is on Discord, as READY tells it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from adapters.discord.errors import MalformedReady
from adapters.discord.types import ReadyEvent
from adapters.fields import mapping, text


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
    def from_ready(cls, d: ReadyEvent) -> BotIdentity:
        """The identity in a READY dispatch's ``d``.

        ``application_id`` falls back to ``user_id`` when READY carries no
        ``application.id``. Raises :class:`MalformedReady` (a ``ValueError``) when
        ``d`` names no user.
        """
        user_id = text(mapping(d.get("user")).get("id")) if isinstance(d, Mapping) else None
        if not user_id:
            raise MalformedReady("READY carries no user.id")
        application_id = text(mapping(d.get("application")).get("id"))
        return cls(user_id=user_id, application_id=application_id or user_id)
