"""Failures raised by ``adapters``: one root, a branch per platform.

The tree::

    AdapterError
    ├── ConnectionLost        a platform connection stayed down or ended (also ConnectionError)
    ├── RenderError           an outbound action the platform cannot take as given
    │                         (also ValueError)
    ├── ConsoleError          adapters.console.errors
    │   └── StateFileError    the console's state file cannot be read, repaired or appended to
    ├── SlackError            adapters.slack.errors
    │   ├── SlackStartError   auth.test named no bot user
    │   ├── SocketModeDown    the Socket Mode session stayed down (also ConnectionLost)
    │   └── NotInstalled      a call for a workspace the app has no token of (also a
    │                         conversations.errors.DeliveryError)
    └── DiscordError          adapters.discord.errors
        ├── DiscordStartError the bot could not log in or connect, or READY did not come
        ├── GatewayClosed     the gateway connection ended (also ConnectionLost)
        └── MalformedReady    a READY dispatch names no bot user (also ValueError)

What the adapters raise through the protocols of :mod:`conversations.adapter`
belongs to that package's tree: a ``send`` that the platform refused or could not
take raises :class:`conversations.errors.DeliveryError` (a 429:
:class:`~conversations.errors.RateLimited`), a group look-up that failed
:class:`~conversations.errors.LookupFailed`. Inbound translators never raise on a
malformed payload: they log it and give None.

This module imports no platform SDK, so a caller can catch these errors without
loading slack-bolt or discord.py.
"""

from __future__ import annotations


class AdapterError(Exception):
    """Base of every failure raised by ``adapters``."""


class ConnectionLost(AdapterError, ConnectionError):
    """A platform connection stayed down or ended; the message says which and for how long.

    Raised by an adapter's ``keep_connected``, whose supervised restart connects afresh.
    """


class RenderError(AdapterError, ValueError):
    """An outbound action cannot be rendered for the platform; the message says why.

    For example an edit or a reaction without ``ref.message``, an emoji Discord has
    no character for, or a button action longer than Discord's ``custom_id``.
    """
