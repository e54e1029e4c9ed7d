"""Rewind and fork: an operator starts a new conversation from a point of another's journal.

``threadbot fork CONVERSATION --at SEQ`` and the run inspector's "fork here" both call
:meth:`Forker.fork` (docs/architecture.md, "Rewind and fork"):

1. the original conversation is read (never written: its journal, records, requests
   and outbox stay as they are);
2. core says what the fork holds (:func:`core.run.fork.fork_of`: the journal up to
   entry SEQ, the calls open there closed as ``cancelled``, the note that tells the
   model its files are not as they were);
3. the store writes it whole in one transaction (:mod:`conversations.store.forks`): the
   new conversation in the original's channel, bound to a placeholder thread, its
   first outbox row a :class:`~conversations.events.StartThread` whose message says
   where it was forked from (the original thread, a link where the platform has one:
   :func:`thread_said`) and by whom, and the audit trail's row
   (``operator:<name>``, kind ``fork``, the entry forked at; the new conversation in its
   reason);
4. the deliverer of whichever instance delivers the conversation posts that message
   (at once when the fork was written by the bot's own store, within its poll
   otherwise: another process, ``threadbot fork``); once the thread exists the
   conversation is bound to it and its run goes on from the journal
   (:mod:`conversations.hub._scheduled`), as a run resumed after a crash does. Its
   workspace is made then, as any conversation's: a fresh clone of the channel's
   repository (``git_repo``), or an empty folder without one.

A fork refused (:class:`ForkRefused`) writes nothing but, where the conversation is
known, the audit trail's row of the attempt (:meth:`Forker.refuse`: kind ``fork``,
outcome ``refused``, the reason): an operator whose token was refused included.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from conversations.events import PlatformRef, StartThread
from conversations.store.audit import AuditEntry, AuditTrail
from conversations.store.forks import ForkOpening, Forks
from conversations.store.interfaces import Threads
from conversations.store.records import ConversationInfo, Outgoing, new_conversation_id
from conversations.store.schedules import awaits_thread
from core.context import REQUEST_ID_LENGTH, now, random_id
from core.run.fork import ForkPointInvalid, fork_of
from core.run.workflow import journaled
from core.vocabulary.audit import FORK, Audited, Means, Outcome
from core.vocabulary.errors import ConversationNotFound
from core.vocabulary.journal import Journal
from core.workflows.loading import default_workflow

THREADS_ARE_CHANNELS = frozenset({"discord"})
"""Platforms whose threads are channels of their own (a fork's thread starts so:
:attr:`conversations.events.StartThread.thread_is_channel`)."""


class ForkRefused(Exception):
    """The fork was not made; the message says why in words (no such conversation, no
    such journal entry, no thread yet). Nothing was written."""


@dataclass(frozen=True)
class Fork:
    """A fork made: the new conversation ``conversation_id``, forked from ``original`` at
    entry ``at`` by operator ``operator``, with ``cancelled`` calls closed so."""

    conversation_id: str
    original: str
    at: int
    operator: str
    cancelled: int


class ForkStore(Protocol):
    """What forking takes of the store: the threads, the journal (read), the forks and
    the audit trail (a refused fork's row)."""

    @property
    def threads(self) -> Threads: ...

    @property
    def audit(self) -> AuditTrail: ...

    @property
    def journal(self) -> Journal: ...

    @property
    def forks(self) -> Forks: ...


def thread_said(ref: PlatformRef) -> str:
    """Where the conversation at ``ref`` is, as its platform links it: on Discord the
    thread (a channel) as a channel mention, ``<#id>``, which Discord shows as a link
    (https://discord.com/developers/docs/reference#message-formatting); on Slack the
    channel as a mention, ``<#C123>`` (https://docs.slack.dev/messaging/formatting-message-text),
    and the thread by its ``ts`` (a thread's permalink needs an API call,
    ``chat.getPermalink``, the bot does not make); elsewhere the thread and channel ids."""
    thread = ref.thread or ""
    match ref.platform:
        case "discord":
            return f"<#{thread}>"
        case "slack":
            return f"the thread {thread} in <#{ref.channel}>"
        case _:
            return f"thread {thread} of {ref.channel}"


def fork_audited(
    at: int | None, operator: str, means: Means, outcome: Outcome, reason: str
) -> Audited:
    """The audit trail's row of a fork at entry ``at`` (None: no entry's number was
    given) by ``operator`` (``operator:<name>``) by ``means``: ``forked`` (the reason
    names the new conversation, :func:`forked_into`) or ``refused`` (the reason why)."""
    return Audited(
        request_kind=FORK,
        request_id=str(at) if at is not None else None,
        user_id=f"operator:{operator}",
        means=means,
        outcome=outcome,
        reason=reason,
    )


_INTO = re.compile(r"forked into conversation ([0-9A-Za-z_-]+)")


def forked_into(row: AuditEntry) -> str | None:
    """The conversation a fork's audit row (:func:`fork_audited`, outcome ``forked``)
    made; None for any other row."""
    if row.request_kind != FORK or row.outcome != "forked":
        return None
    found = _INTO.match(row.reason)
    return found[1] if found else None


def announcement(original: ConversationInfo, at: int, operator: str) -> str:
    """The message a fork's thread starts on: where it was forked from (the original
    thread, :func:`thread_said`, and the entry) and by whom."""
    return (
        f"🍴 Forked by operator {operator} from {thread_said(original.binding)} at entry "
        f"{at} of its journal (conversation {original.id}); it goes on from there."
    )


class Forker:
    """Forks conversations of ``store`` (see the module docstring): each fork's workspace
    under ``workspace_root``; ``cloned(place)`` says whether the channel at ``place``
    names a repository (its ``git_repo``: the fork's workspace is a clone of it, and the
    model is told so); ``clock`` gives the time (aware UTC)."""

    def __init__(
        self,
        *,
        store: ForkStore,
        workspace_root: Path,
        cloned: Callable[[PlatformRef], bool] = lambda _place: False,
        clock: Callable[[], datetime] = now,
    ) -> None:
        self._store = store
        self._root = workspace_root
        self._cloned = cloned
        self._clock = clock

    async def fork(
        self, conversation_id: str, at: int, *, operator: str, means: Means = "command"
    ) -> Fork:
        """Fork ``conversation_id`` at its journal entry ``at`` as operator ``operator``
        (by ``means``, for the audit trail): the new conversation, written whole.

        Raises :class:`ForkRefused` for an unknown conversation, an ``at`` that is no
        point to fork at (no entry of its journal, one before its first request, one
        where its run had ended: :func:`core.run.fork.fork_of`), or a conversation whose
        own thread is not started yet (a fork waiting for its thread); each but the
        first is recorded in the audit trail as a refused fork."""
        original = await self._store.threads.find(conversation_id)
        if original is None:
            raise ForkRefused(f"there is no conversation {conversation_id}")
        try:
            return await self._fork(original, at, operator, means)
        except ForkRefused as exc:
            await self._refused(original, at, operator, means, str(exc))
            raise

    async def refuse(
        self, conversation_id: str, at: int | None, *, operator: str, means: Means, why: str
    ) -> None:
        """Record a fork of ``conversation_id`` at ``at`` refused before it was tried (an
        operator's token refused, an entry that is no number: ``at`` None) as
        ``operator`` (a valid operator's name, else ``?``), ``why`` the reason; nothing
        for an unknown conversation."""
        original = await self._store.threads.find(conversation_id)
        if original is not None:
            await self._refused(original, at, operator, means, why)

    async def _refused(
        self, original: ConversationInfo, at: int | None, operator: str, means: Means, why: str
    ) -> None:
        audited = fork_audited(at, operator, means, "refused", why)
        try:
            await self._store.audit.record(
                audited, where=original.binding, conversation_id=original.id
            )
        except ConversationNotFound:
            pass  # gone meanwhile: nothing to record it on

    async def _fork(self, original: ConversationInfo, at: int, operator: str, means: Means) -> Fork:
        conversation_id = original.id
        if awaits_thread(original.binding):
            raise ForkRefused(
                f"conversation {conversation_id} has no thread yet: fork it once it has"
            )
        try:
            snap = await self._store.journal.load(conversation_id)
        except ConversationNotFound:
            raise ForkRefused(f"there is no conversation {conversation_id}") from None
        home = original.binding
        place = PlatformRef(platform=home.platform, workspace=home.workspace, channel=home.home)
        try:
            forked = fork_of(
                snap,
                at,
                by=operator,
                workflow=journaled(snap.journal) or default_workflow(),
                cloned=self._cloned(place),
                now=self._clock(),
                new_id=lambda: random_id(REQUEST_ID_LENGTH),
            )
        except ForkPointInvalid as exc:
            raise ForkRefused(str(exc)) from None
        new = new_conversation_id()
        start = StartThread(
            ref=place,
            text=announcement(original, at, operator),
            thread_is_channel=place.platform in THREADS_ARE_CHANNELS,
        )
        reason = f"forked into conversation {new}; {forked.cancelled} open call(s) cancelled"
        audited = fork_audited(at, operator, means, "forked", reason)
        await self._store.forks.open_fork(
            ForkOpening(
                conversation_id=new,
                place=place,
                requester=snap.requester,
                workspace_root=self._root,
                forked=forked,
                announce=Outgoing(start),
                audited=audited,
                original=conversation_id,
                where=home,
            )
        )
        return Fork(new, conversation_id, at, operator, forked.cancelled)
