"""Agent sessions: a conversation's lifecycle as the status of its thread's session.

Where a platform shows an agent's session beside a thread (Slack's agent sessions:
https://docs.slack.dev/ai/agent-sessions), the thread follows the conversation's
lifecycle (docs/architecture.md, "Agent sessions"). The store calls a
:data:`~conversations.store.SessionRenderer` with each commit's change, in the commit's
transaction, as it renders the change's run events; :class:`SessionRows` gives one
outbox row, a :class:`~conversations.events.SetSessionStatus` after the change's own
rows, whenever the change moves the status, so the outbox delivers it in order with
the messages, durably, and at least once (a status sent twice changes nothing). Discord
has no sessions: its sender shows the thread's typing indicator while the status is
``processing``.

=================================  ==============
the conversation moves to          the session
=================================  ==============
``running``                        ``processing``
``waiting(kind)``                  ``suspended``
``done``, ``failed``               ``active``
``cancelled`` (a stop, an expiry)  ``closed``
=================================  ==============
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from conversations.events import (
    SESSION_TITLE_CHARS,
    PlatformRef,
    SessionStatus,
    SetSessionStatus,
)
from conversations.store import Outgoing, SessionRenderer
from core.policy.summary import shorten
from core.vocabulary.entries import UserText
from core.vocabulary.journal import Change
from core.vocabulary.lifecycle import Lifecycle, Status

SESSION = "session"
"""``purpose`` of a session status row (a milestone, delivered in its place)."""


def session_status(status: Status) -> SessionStatus | None:
    """The session status that shows ``status`` (see the module docstring); None for
    ``idle``, which no change moves to."""
    match status.lifecycle:
        case Lifecycle.RUNNING:
            return "processing"
        case Lifecycle.WAITING:
            return "suspended"
        case Lifecycle.DONE | Lifecycle.FAILED:
            return "active"
        case Lifecycle.CANCELLED:
            return "closed"
        case Lifecycle.IDLE:
            return None


@dataclass(frozen=True, kw_only=True)
class SessionRows:
    """A :data:`~conversations.store.SessionRenderer` for the threads of ``platforms``
    (platform names, e.g. ``{"slack"}``); threads elsewhere get no rows."""

    platforms: frozenset[str]

    def __call__(self, binding: PlatformRef, change: Change) -> Sequence[Outgoing]:
        """One :class:`SetSessionStatus` row when ``change`` sets a status and
        ``binding`` is a thread of one of :attr:`platforms`, else none.

        The title and initiator come from the change's request, the words that start
        a run (a mention, a message after an answer), when it carries one.
        """
        if change.status is None or binding.platform not in self.platforms:
            return ()
        status = session_status(change.status)
        if status is None or binding.thread is None:
            return ()
        title, initiator = "", None
        for entry in change.entries:
            if isinstance(entry, UserText) and entry.role == "request":
                first = next((line for line in entry.text.splitlines() if line.strip()), "")
                title = shorten(first.strip(), SESSION_TITLE_CHARS)
                initiator = entry.author.id
                break
        ref = binding.in_thread(binding.thread).model_copy(update={"user": None})
        action = SetSessionStatus(ref=ref, status=status, title=title, initiator=initiator)
        return (Outgoing(action, purpose=SESSION),)


@dataclass(frozen=True)
class Surfaces:
    """A :data:`~conversations.store.SessionRenderer` that gives the rows of each of
    ``renderers`` in turn: a thread's agent surfaces (its session, its plan card)."""

    renderers: tuple[SessionRenderer, ...]

    def __call__(self, binding: PlatformRef, change: Change) -> Sequence[Outgoing]:
        """Every renderer's rows for ``change``, in the renderers' order."""
        return tuple(row for render in self.renderers for row in render(binding, change))
