"""What the journal renders into rows beside a commit: run events and session changes.

Declared apart from :mod:`conversations.store.interfaces` (which re-exports them), so
that module stays the list of the store's interfaces.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from conversations.events import PlatformRef
from conversations.store.records import Outgoing
from core.vocabulary.journal import Change
from core.vocabulary.run_events import RunEvent

Renderer = Callable[[PlatformRef, RunEvent], Sequence[Outgoing]]
"""Turns a run event of a conversation bound to a thread into outbox rows; the journal
writes them in the commit that emits the event."""

SessionRenderer = Callable[[PlatformRef, Change], Sequence[Outgoing]]
"""Turns a change of a conversation bound to a thread into the rows of its thread's
agent session (:class:`conversations.sessions.SessionRows`); the journal writes them in
the change's commit, after the rows of its run events."""


def no_sessions(_binding: PlatformRef, _change: Change) -> Sequence[Outgoing]:
    """The :data:`SessionRenderer` of a store whose threads have no sessions: no rows."""
    return ()
