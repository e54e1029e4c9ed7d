"""Forks in the store: a new conversation opened with a copy of another's journal, in one write.

An operator forks a conversation at one of its journal entries (docs/architecture.md,
"Rewind and fork"); what the new conversation holds is core's
(:func:`core.run.fork.fork_of`). :meth:`Forks.open_fork` writes it whole in one
transaction: the conversation (bound to its placeholder thread,
:func:`conversations.store.schedules.unbound_thread`, until its thread is started),
its journal, tool call records and requests, its first outbox row (the
:class:`~conversations.events.StartThread` that posts where it was forked from, and
by whom) and the fork's row of the audit trail. A crash leaves all of it or none; the
original conversation is not written.

Like a scheduled run's, the new conversation is bound to no thread until the
deliverer posted that message; a conversation left ``running`` on its placeholder is
neither resumed at start nor taken over (``Threads.running``, ``LeaseStore.take_lapsed``
pass over it): its run goes on once its thread exists (``Hub.thread_started``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from conversations.events import PlatformRef
from conversations.store.records import Outgoing
from core.run.fork import Forked
from core.vocabulary.audit import Audited
from core.vocabulary.people import Person

__all__ = ["ForkOpening", "Forks"]


@dataclass(frozen=True)
class ForkOpening:
    """A fork to write: the new conversation ``conversation_id``, in ``place`` (the
    original's channel, no thread), its ``requester`` (the original's), its workspace
    under ``workspace_root``, holding ``forked``; ``announce``, its first outbox row (a
    :class:`~conversations.events.StartThread`); ``audited``, the fork's row of the
    audit trail, recorded with the original conversation ``original`` at ``where``
    (the original's thread)."""

    conversation_id: str
    place: PlatformRef
    requester: Person
    workspace_root: Path
    forked: Forked
    announce: Outgoing
    audited: Audited
    original: str
    where: PlatformRef


class Forks(Protocol):
    """Forks written whole (see the module docstring). Taken by
    :mod:`conversations.forks`."""

    async def open_fork(self, opening: ForkOpening) -> None:
        """Write ``opening`` in one transaction; its outbox row goes to ``on_outbox`` once
        committed. Raises ``ValueError`` when the conversation's id is taken (nothing
        written)."""
        ...
