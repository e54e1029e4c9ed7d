"""Scheduled runs in the store: each (schedule, due time) recorded once, by one instance.

Several ``threadbot run`` processes on one database each sweep the schedules
(:mod:`conversations.schedules`); the one whose record of a due time goes in first
starts that time's conversation, the others find it taken (docs/architecture.md,
"Scheduled runs"). A record's key is ``(schedule, due)``: the primary key of
``schedule_runs`` in SQL (:mod:`conversations.store.sql.schedules`), so the database
keeps a time from being recorded twice, across processes and restarts.

A record's ``outcome`` says what became of the time: ``started`` (its conversation,
whose id it keeps, was opened in the same write as the record), ``skipped`` (a time
missed while no instance ran, not run by its schedule's ``missed`` policy) or ``seen``
(the schedule's last time before it was first seen: nothing before it is a time missed).

A scheduled run's conversation is opened before its thread exists: the bot first
posts a message at the top of the channel and the thread starts on it
(:class:`conversations.events.StartThread`). Until then the conversation is bound to
a placeholder thread no platform names (:func:`unbound_thread`), so no event finds
it; :meth:`Schedules.bind_thread` binds it once the message is posted.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from conversations.events import PlatformRef
from conversations.store.records import Outgoing
from core.vocabulary.people import Person

__all__ = [
    "Opening",
    "Outcome",
    "ScheduleRun",
    "Schedules",
    "awaits_thread",
    "unbound_thread",
]

UNBOUND = "unbound-"
"""The start of a placeholder thread id (no platform's thread ids start so)."""


def unbound_thread(conversation_id: str) -> str:
    """The placeholder thread of a conversation whose thread is not started yet."""
    return UNBOUND + conversation_id


def awaits_thread(binding: PlatformRef) -> bool:
    """Whether ``binding`` is a placeholder: its conversation's thread is not started yet."""
    return (binding.thread or "").startswith(UNBOUND)


class Outcome(StrEnum):
    """What became of a schedule's due time (see the module docstring)."""

    STARTED = "started"
    SKIPPED = "skipped"
    SEEN = "seen"


@dataclass(frozen=True)
class ScheduleRun:
    """The record of one due time of schedule ``schedule``: its ``outcome``, the instance
    that recorded it (``by``), when (``at``, UTC) and the conversation it started."""

    schedule: str
    due: datetime
    outcome: Outcome
    by: str
    at: datetime
    conversation_id: str | None = None


@dataclass(frozen=True)
class Opening:
    """The conversation a started time opens, as :meth:`Threads.open_conversation` opens a
    mention's (``conversations.store.interfaces``): its first request kept in the inbox
    under ``delivery_key`` as ``event`` (a :class:`conversations.events.MessagePosted`
    dump, by ``requester``) until a run journals it; created in ``place`` (a channel,
    no thread: bound to :func:`unbound_thread` until :meth:`Schedules.bind_thread`), at
    ``position``, its workspace under ``workspace_root``; ``announce``: its first outbox
    row, the :class:`~conversations.events.StartThread` that posts the scheduled
    message."""

    delivery_key: str
    place: PlatformRef
    requester: Person
    event: dict[str, Any]
    announce: Outgoing
    workspace_root: Path
    position: str = ""


class Schedules(Protocol):
    """Due times recorded once each; the conversations of those started (see the module
    docstring). Taken by the sweeper's scheduler and by the hub (the binding)."""

    async def last_due(self, schedules: Collection[str]) -> dict[str, datetime]:
        """The newest due time recorded of each of ``schedules`` that has one (UTC)."""
        ...

    async def note(
        self, schedule: str, due: datetime, outcome: Outcome, *, by: str, at: datetime
    ) -> bool:
        """Record ``due`` of ``schedule`` as ``outcome`` (``skipped`` or ``seen``), by the
        instance ``by`` at ``at``; False (nothing written) when it was recorded before."""
        ...

    async def start(
        self, schedule: str, due: datetime, *, by: str, at: datetime, opening: Opening
    ) -> str | None:
        """Record ``due`` of ``schedule`` as ``started`` by ``by`` and open its conversation
        (``opening``), in one write: the new conversation's id, or None (nothing written)
        when the time was recorded before: by another instance, or by this one earlier.
        The conversation is ``idle`` and bound to its placeholder thread; its delivery is
        kept unhandled; ``opening.announce`` is its first outbox row (handed to
        ``on_outbox`` once written). Of several concurrent calls for one time, exactly one
        gets an id."""
        ...

    async def bind_thread(self, conversation_id: str, binding: PlatformRef) -> bool:
        """Bind the conversation to ``binding`` (its thread, channel and parent), only while
        it waits for its thread (bound to its placeholder); False otherwise (bound
        before, or no such conversation)."""
        ...

    async def runs(self, schedule: str | None = None) -> list[ScheduleRun]:
        """The records of ``schedule``'s times (of every schedule when None), by schedule,
        oldest time first."""
        ...
