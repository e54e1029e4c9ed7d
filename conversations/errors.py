"""Failures raised by ``conversations``.

The tree::

    ConversationsError
    ├── DeliveryError      a platform refused or failed an outbound action
    │   ├── RateLimited    the platform asked us to wait ``retry_after`` seconds
    │   │   └── NotConnected  the adapter is not connected yet: wait the same way
    │   └── StreamEnded    a streamed message takes no more text (the platform ended it)
    ├── LookupFailed       a platform could not say who is in a group or role
    ├── FetchFailed        a shared file could not be fetched (a host refused, HTTP, a timeout)
    │   └── FileTooLarge   it is larger than the limit for a shared file
    └── Unsealable         a stored token opens with none of the keys (:mod:`conversations.sealing`)
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


class StreamEnded(DeliveryError):
    """A streamed message takes no more text: the platform ended its stream (Slack's
    ``message_not_in_streaming_state``, a stream that ran too long); what was streamed
    stays, and the message may still be edited."""


class NotConnected(RateLimited):
    """The adapter cannot send yet (not logged in: the process is starting); like a rate
    limit, the row waits ``retry_after`` seconds and is tried again, without counting
    an attempt."""


class LookupFailed(ConversationsError):
    """The platform could not say who is in a group (refused, unreachable, malformed).

    The message says which call failed and why; the person is refused.
    """


class FetchFailed(ConversationsError):
    """A file shared in a thread could not be fetched; the message says why in a few
    words (``the file is on example.com, not on a host the bot fetches from``,
    ``HTTP 404``), for the model and the logs. Never carries a token."""


class FileTooLarge(FetchFailed):
    """A shared file is larger than the limit (``limit``, bytes): its declared size, or
    the bytes read so far, passed it."""

    def __init__(self, message: str, *, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


class Unsealable(ConversationsError):
    """A sealed token that none of the keys opens: it was sealed with a key that is no
    longer in ``THREADBOT_TOKEN_KEYS``, or it was changed. Never holds the token."""
