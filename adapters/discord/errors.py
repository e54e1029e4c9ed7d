"""Failures raised by the Discord adapter, a branch of :class:`adapters.errors.AdapterError`.

The tree::

    AdapterError                  adapters.errors
    └── DiscordError
        ├── DiscordStartError     the bot could not log in or connect, or READY did not come
        ├── GatewayClosed         discord.py's Client.start ended: it gave up reconnecting
        │                         (also adapters.errors.ConnectionLost)
        └── MalformedReady        a READY dispatch names no bot user (also ValueError)

A refused or failed REST call is not a :class:`DiscordError`: ``send`` raises
:class:`conversations.errors.DeliveryError` (``from`` discord.py's error), as the
:class:`conversations.adapter.Sender` protocol asks. Imports no SDK.
"""

from __future__ import annotations

from adapters.errors import AdapterError, ConnectionLost


class DiscordError(AdapterError):
    """Base of every failure raised by ``adapters.discord``."""


class DiscordStartError(DiscordError):
    """The bot could not log in or connect to the gateway; the message says why.

    Raised by :meth:`adapters.discord.runner.DiscordAdapter.start`, from discord.py's
    ``LoginFailure`` or ``PrivilegedIntentsRequired`` (close code 4014) when it has one.
    """


class GatewayClosed(DiscordError, ConnectionLost):
    """The gateway connection ended while the adapter was not closing.

    Raised by :meth:`adapters.discord.runner.DiscordAdapter.keep_connected`; the
    supervised restart clears the client and connects again.
    """


class MalformedReady(DiscordError, ValueError):
    """A READY dispatch carries no ``user.id``: the bot cannot know who it is
    (https://discord.com/developers/docs/events/gateway-events#ready)."""
