"""A scheduled run's conversation: opened with its time's record, started once its thread is.

A mention opens its conversation in the thread it was made in; a scheduled run has no
message to start from, so the bot posts one (docs/architecture.md, "Scheduled runs"):

1. :meth:`Scheduled.open` records the time and opens the conversation in one write
   (:meth:`conversations.store.schedules.Schedules.start`): ``idle``, its requester the
   schedule's owner, bound to a placeholder thread, its first request kept in the inbox
   as a mention of the bot by the owner, and one outbox row, the
   :class:`~conversations.events.StartThread` that posts the scheduled message at the
   top of the channel. Nothing runs yet: the run's messages need the thread.
2. The deliverer sends the row like any other (at least once, by whichever instance
   holds the conversation's delivery claim); the platform answers with the thread's
   id and :meth:`Scheduled.thread_started` binds the conversation to it, then the first
   request is queued as a mention's is (``start``: the hub's ``resume_unhandled``).

A restart between the two finds the row pending (the deliverer sends it, and so binds
and starts) or the conversation bound with its request unhandled (the hub starts it at
start, as any mention a crash left); a conversation still waiting for its thread is
never started from the inbox.

A fork (:mod:`conversations.forks`) opens its conversation the same way, ``running``
with its journal copied: once its thread is started, its run goes on from the journal
(``go_on``: its lease taken here first), as a run resumed after a crash does. A
restart before that finds the row pending; one after it, the conversation bound and
``running``, which the hub resumes at start (docs/architecture.md, "Rewind and fork").
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from datetime import UTC, datetime
from pathlib import Path

from conversations.events import Author, MessagePosted, PlatformRef, StartThread, inbound_adapter
from conversations.schedules import Schedule
from conversations.store.interfaces import Threads
from conversations.store.records import Outgoing
from conversations.store.schedules import Opening, Schedules, awaits_thread
from core.vocabulary.lifecycle import Lifecycle

log = logging.getLogger("conversations.hub")

Resume = Callable[[Collection[str]], Awaitable[int]]
"""Queues the unjournaled inputs of the conversations named (``Hub.resume_unhandled``)."""
GoOn = Callable[[str], Awaitable[bool]]
"""Takes a conversation's lease and queues its run from the journal (``Runs.resume``)."""


def delivery_key(schedule: str, due: datetime) -> str:
    """The inbox key of a scheduled time's first request: ``schedule:<name>:<due, UTC ISO>``."""
    return f"schedule:{schedule}:{due.astimezone(UTC).isoformat()}"


def first_request(schedule: Schedule, due: datetime) -> MessagePosted:
    """The first request of ``schedule``'s time ``due``: a mention of the bot by its owner
    at the top of its channel (as a mention opens a conversation)."""
    owner = schedule.owner
    return MessagePosted(
        delivery_key=delivery_key(schedule.name, due),
        ref=schedule.place.model_copy(update={"thread": None, "message": None, "user": owner.id}),
        author=Author(id=owner.id, name=owner.name),
        text=schedule.request_text(),
        mentions_bot=True,
    )


class Scheduled:
    """Opens scheduled runs' conversations under ``workspace_root`` as the instance
    ``instance``, and starts each (and each fork: ``threads`` finds it, ``go_on`` runs it)
    once its thread is (see the module docstring)."""

    def __init__(
        self,
        *,
        store: Schedules,
        threads: Threads,
        workspace_root: Path,
        instance: str,
        resume: Resume,
        go_on: GoOn,
    ) -> None:
        self._store = store
        self._threads = threads
        self._workspace_root = workspace_root
        self._instance = instance
        self._resume = resume
        self._go_on = go_on

    async def open(self, schedule: Schedule, due: datetime, now: datetime) -> str | None:
        """Record ``due`` of ``schedule`` and open its conversation; its id, or None when
        the time was recorded before (by another instance, most likely)."""
        event = first_request(schedule, due)
        announce = StartThread(
            ref=event.ref.model_copy(update={"user": None}),
            text=schedule.announcement(),
            thread_is_channel=schedule.thread_is_channel,
        )
        opening = Opening(
            delivery_key=event.delivery_key,
            place=announce.ref,
            requester=schedule.owner,
            event=inbound_adapter.dump_python(event, mode="json"),
            announce=Outgoing(announce),
            workspace_root=self._workspace_root,
        )
        return await self._store.start(
            schedule.name, due, by=self._instance, at=now, opening=opening
        )

    async def thread_started(self, conversation_id: str, thread: PlatformRef) -> None:
        """The scheduled message (or a fork's) of ``conversation_id`` was posted and its
        thread is at ``thread``: bind the conversation there and queue its first request,
        or, for a fork left ``running``, its run from the journal."""
        if await self._store.bind_thread(conversation_id, thread):
            log.info("conversation %s: its thread is %s", conversation_id, thread.thread)
        await self._resume([conversation_id])
        found = await self._threads.find(conversation_id)
        if found is not None and found.status.lifecycle is Lifecycle.RUNNING:
            if not awaits_thread(found.binding):
                await self._go_on(conversation_id)
