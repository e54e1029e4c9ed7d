"""What the hub says that depends on the platform: each adapter provides its own words.

The hub answers some events with help that only makes sense on one platform (why
a message could not be read, how to type a decision). It asks the
:class:`PlatformTexts` of the event's platform; an adapter provides them (its
``texts``) and ``bot`` wires them in (:meth:`conversations.hub.Hub.add_texts`). A
platform that provides none gets these defaults.
"""

from __future__ import annotations

from dataclasses import dataclass

UNREADABLE = "I couldn't read that message; mention me or use the buttons."
"""Default: a message whose text the platform withheld."""
DECIDE_USAGE = "Say which call to decide, and an approve or reject reaction."
"""Default: a ``decide`` command the hub could not read."""


@dataclass(frozen=True, kw_only=True)
class PlatformTexts:
    """Help texts of one platform (``platform``, as in :class:`~conversations.events.PlatformRef`).

    ``unreadable``: posted in the thread for a message the platform withheld the
    text of (:attr:`conversations.events.MessagePosted.unreadable`);
    ``decide_usage``: the answer to a ``decide`` command without a call and a
    reaction (the console's ``+✅ 3.2``).
    """

    platform: str
    unreadable: str = UNREADABLE
    decide_usage: str = DECIDE_USAGE
