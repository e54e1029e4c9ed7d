"""Failures raised by the Slack adapter, a branch of :class:`adapters.errors.AdapterError`.

The tree::

    AdapterError                  adapters.errors
    └── SlackError
        ├── SlackStartError       the bot could not learn who it is (auth.test named no user)
        ├── SocketModeDown        the Socket Mode session stayed down past the watchdog's
        │                         patience (also adapters.errors.ConnectionLost)
        └── NotInstalled          a call for a workspace the app has no token of (also
                                  conversations.errors.DeliveryError, permanent)

A refused or failed Web API call is not a :class:`SlackError`: ``send`` raises
:class:`conversations.errors.DeliveryError` (``from`` slack-sdk's error), as the
:class:`conversations.adapter.Sender` protocol asks. Imports no SDK.
"""

from __future__ import annotations

from adapters.errors import AdapterError, ConnectionLost
from conversations.errors import DeliveryError


class SlackError(AdapterError):
    """Base of every failure raised by ``adapters.slack``."""


class SlackStartError(SlackError):
    """The adapter could not start; the message says why.

    Raised by :meth:`adapters.slack.runner.SlackAdapter.start` when ``auth.test``
    answers without a ``user_id`` (https://docs.slack.dev/reference/methods/auth.test).
    A refused token is slack-sdk's ``SlackApiError``, raised as it is.
    """


class SocketModeDown(SlackError, ConnectionLost):
    """slack-sdk found no live Socket Mode session for ``patience`` checks in a row.

    Raised by :meth:`adapters.slack.runner.SlackAdapter.keep_connected`; the
    supervised restart connects afresh.
    """


class NotInstalled(SlackError, DeliveryError):
    """A call for a workspace the app has no token of (never installed there, or
    uninstalled since): permanent, since retrying cannot help (:mod:`adapters.slack.teams`)."""

    def __init__(self, team: str) -> None:
        DeliveryError.__init__(
            self, f"the app is not installed in Slack workspace {team}", permanent=True
        )
        self.team = team
