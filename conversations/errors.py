"""Failures raised by ``conversations``.

The tree::

    ConversationsError
    ├── DeliveryError      a platform refused or failed an outbound action
    │   └── RateLimited    the platform asked us to wait ``retry_after`` seconds
    │       └── NotConnected  the adapter is not connected yet: wait the same way
    └── LookupFailed       a platform could not say who is in a group or role
"""

from __future__ import annotations


class ConversationsError(Exception):
    """Base of every failure raised by ``conversations``."""


class DeliveryError(ConversationsError):
    """A platform did not take an outbound action; ``permanent`` ones are not retried."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


class RateLimited(DeliveryError):
    """The platform rate-limited us; try again after ``retry_after`` seconds."""

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class NotConnected(RateLimited):
    """The adapter cannot send yet (not logged in: the process is starting); like a rate
    limit, the row waits ``retry_after`` seconds and is tried again, without counting
    an attempt."""


class LookupFailed(ConversationsError):
    """The platform could not say who is in a group (refused, unreachable, malformed).

    The message says which call failed and why; the person is refused.
    """
