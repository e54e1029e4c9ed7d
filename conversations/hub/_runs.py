"""Runs asked of the runner: one job at a time per conversation, all under its lease.

Each job asks the runner for one run (:class:`core.runner.protocol.RunRequest`) and
follows its stream until it ends (:mod:`core.runner`: in this process, or on a Ray
cluster); the conversation's lease is held here, in the process that asked.

Inputs for a conversation are handled in order, one after another; only stop jumps
the queue (:class:`conversations.queue.ConversationQueue`). The conversation's
worker holds its lease (:class:`conversations.store.leases.Leases`) as the queue's
session: taken before its first job, kept while more jobs of the conversation are
queued (a busy conversation pays one acquire and one release, not one per job),
released when none is left (by the commit that ends the run, in the same write, when
nothing is queued behind it), on a stop and at shutdown. Every job's commits are
fenced by it: a job whose lease was taken over ends at its next commit
(:class:`core.vocabulary.errors.LeaseLost`), which ends the session too, so the next job
takes the lease again rather than run under the lost one.

A job that fails otherwise (the store could not be read or written: a pooled
connection not had in time on a loaded machine, a database locked by another
process) is not dropped: it is logged and tried again in its turn, after 1, 2,
4... seconds (at most :data:`RETRY_LONGEST`), until it goes through, the
conversation is stopped or the bot shuts down (the input is in the store then, and
the next start takes it up). An input already journaled when the failure came (its
delivery handled) is not handled twice: the retry goes on from the journal instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Final

from conversations import logcontext
from conversations.events import MessagePosted
from conversations.hub._chain import person_of
from conversations.hub._files import Downloads
from conversations.queue import ConversationQueue, Job
from conversations.store import Inbox
from conversations.store.leases import Leases, current_lease
from core.context import random_id
from core.run.state import Handover
from core.runner.protocol import RunEnded, RunKind, Runner, RunRequest, RunUpdate
from core.vocabulary.errors import AlreadyHandled, LeaseLost
from core.vocabulary.inputs import ThreadMessage, joined
from core.vocabulary.snapshot import ConversationSnapshot

log = logging.getLogger("conversations.hub")

Work = Callable[[int], Awaitable[None]]
"""A job's work, given its attempt (1, then one more each time it is tried again)."""

RETRY_FIRST: Final = 1.0
"""Seconds before a failed job is tried again; each next wait is twice as long."""
RETRY_LONGEST: Final = 60.0
"""Seconds, the longest wait between two tries of a failed job."""


class Runs:
    """Queues the runs asked of ``runner`` per conversation; ``queue`` is shared with the
    stopper.

    ``inbox`` tells whether a failed job's input was journaled before it failed
    (see the module docstring). ``on_update(conversation_id, update)`` is told each
    update of a run's stream (the app wakes the deliverer there for runs that commit
    in another process). ``slot(request)`` is held around each run (its slot in the
    queue: :mod:`conversations.hub._queued`; None: none).
    """

    def __init__(
        self,
        *,
        runner: Runner,
        leases: Leases,
        inbox: Inbox,
        downloads: Downloads | None = None,
        on_update: Callable[[str, RunUpdate], None] | None = None,
        slot: Callable[[RunRequest], AbstractAsyncContextManager[object]] | None = None,
    ) -> None:
        self._runner = runner
        self._slot = slot or (lambda _request: contextlib.nullcontext())
        self._on_update = on_update
        self._leases = leases
        self._inbox_store = inbox
        self._downloads = downloads
        self.queue = ConversationQueue(session=self._hold, around=self._job)
        self._shutting_down = False
        self._shutdown = asyncio.Event()
        """Set by :meth:`shutdown`: a failed job waiting to be tried again stops waiting."""
        self.in_hand: set[str] = set()
        """Delivery keys of the replies a job of this process has queued or runs (a
        wake-up's poll routes here only the replies no job here has:
        :mod:`conversations.hub._wakeups`, which also forgets those journaled)."""

    def start(
        self,
        conversation_id: str,
        event: MessagePosted,
        snapshot: ConversationSnapshot | None = None,
    ) -> None:
        """Queue the first run of a conversation a mention opened; the files it shares
        are fetched in the job (:class:`~conversations.hub._files.Downloads`).
        ``snapshot``: the conversation as it was opened, to start from without reading
        it (its first try only: a try after a failure reads it)."""
        opened = [snapshot] if snapshot is not None else []

        async def start(attempt: int) -> None:
            files = await self._downloads.of(conversation_id, event) if self._downloads else ()
            message = ThreadMessage(
                text=event.text,
                author=person_of(event.author),
                delivery_key=event.delivery_key,
                files=files,
            )
            snapshot = opened.pop() if opened else None
            await self._carry(conversation_id, RunKind.START, attempt, message, snapshot=snapshot)

        work = self._retried(conversation_id, start, event.delivery_key)
        self.queue.submit(conversation_id, Job(work))

    def reply(self, conversation_id: str, reply: ThreadMessage) -> None:
        """Queue a reply in the thread (a run at work takes it as a note instead)."""

        async def answer(attempt: int) -> None:
            await self._carry(conversation_id, RunKind.REPLY, attempt, reply)

        work = self._retried(conversation_id, answer, reply.delivery_key)
        if reply.delivery_key is not None:
            self.in_hand.add(reply.delivery_key)
        self.queue.submit(conversation_id, Job(work, reply=reply))

    def reply_next(self, conversation_id: str, reply: ThreadMessage) -> None:
        """Queue ``reply`` for the run after the one at work (busy mode ``queue``): it
        joins the messages already queued so, in order, when their job has not started;
        the job's run takes them as one request (:func:`core.vocabulary.inputs.joined`),
        or as the answer to the request the run before ended waiting on. None of them is
        taken as a note."""
        if reply.delivery_key is not None:
            self.in_hand.add(reply.delivery_key)
        waiting = self.queue.waiting_together(conversation_id)
        if waiting is not None:
            waiting.append(reply)
            return
        together = [reply]

        async def answer(attempt: int) -> None:
            try:
                await self._carry(conversation_id, RunKind.REPLY, attempt, joined(together))
            finally:
                self.in_hand.difference_update(m.delivery_key or "" for m in together)

        work = self._retried(conversation_id, answer, reply.delivery_key)
        self.queue.submit(conversation_id, Job(work, together=together))

    def run(self, conversation_id: str, handover: Handover | None = None) -> None:
        """Queue a run that goes on from the journal (after a decision, or a crash).

        ``handover``: the conversation as the decision's commit left it; the run
        starts from it instead of reading the conversation, when the lease it takes
        says nothing was committed since (:meth:`_handed`).
        """

        handed = [handover] if handover is not None else []

        async def go_on(attempt: int) -> None:
            snapshot = self._handed(conversation_id, handed.pop() if handed else None)  # once
            await self._carry(conversation_id, RunKind.GO_ON, attempt, snapshot=snapshot)

        self.queue.submit(conversation_id, Job(self._retried(conversation_id, go_on)))

    async def resume(self, conversation_id: str) -> bool:
        """Take the conversation's lease now, without waiting, and queue its run from the
        journal (:meth:`run`): after a restart, or a fork's once its thread is started.
        False (nothing queued) when another live instance, or a job here, holds it."""
        if conversation_id in self._leases.held_ids:
            return False
        lease = await self._leases.take_now(conversation_id)
        if lease is None:
            return False
        self._leases.taken_over(lease)
        self.run(conversation_id)
        return True

    @staticmethod
    def _handed(conversation_id: str, handover: Handover | None) -> ConversationSnapshot | None:
        """``handover``'s snapshot if the conversation is still as it left it: the lease
        this job holds read the conversation's last change, and it is the handover's
        own commit. Anything committed since (a stop, an expiry, another instance)
        makes it stale: the run reads the conversation."""
        lease = current_lease(conversation_id)
        if handover is None or lease is None or lease.changed_at is None:
            return None
        return handover.snapshot if lease.changed_at == handover.at else None

    def expire(self, conversation_id: str, request_id: str) -> None:
        """Queue the expiry of a request (a workflow's timer, or a state that times out,
        goes on running after it: :meth:`core.run.engine.Engine.expire`)."""

        async def expire(attempt: int) -> None:
            await self._carry(conversation_id, RunKind.EXPIRE, attempt, request_id=request_id)

        self.queue.submit(conversation_id, Job(self._retried(conversation_id, expire)))

    async def shutdown(self, grace: float) -> None:
        """Runs end at their next commit; those still going after ``grace`` seconds are
        cancelled (a running command is killed and recorded ``interrupted``)."""
        self._shutting_down = True
        self._shutdown.set()
        await self._runner.suspend()
        self.queue.pause()
        try:
            await asyncio.wait_for(self.queue.idle(), grace)
        except TimeoutError:
            log.warning("runs still going after %s s of shutdown; cancelling them", grace)
            await self.queue.close()

    def inbox(self, conversation_id: str) -> _Inbox:
        """The replies queued behind the conversation's running job, taken as they are
        read (a run in this process takes them as notes at its turn boundaries; one that
        interrupts, at its next tool boundary:
        :class:`core.vocabulary.inputs.InterruptibleInbox`)."""
        return _Inbox(self.queue, conversation_id)

    async def _carry(
        self,
        conversation_id: str,
        kind: RunKind,
        attempt: int,
        message: ThreadMessage | None = None,
        **more: object,
    ) -> None:
        """Ask the runner for one run and follow its stream to its end."""
        request = RunRequest.model_validate(
            {
                "conversation_id": conversation_id,
                "run_id": random_id(16),
                "kind": kind,
                "message": message,
                "attempt": attempt,
                **more,
            }
        )
        async with self._slot(request):  # waits for the run's slot (hub._queued)
            async for item in self._runner.run(request):
                if isinstance(item, RunEnded):
                    if item.deadline_passed:
                        log.warning("conversation %s: the run passed its deadline", conversation_id)
                elif self._on_update is not None:
                    self._on_update(conversation_id, item)

    def _go_on(self, conversation_id: str) -> Work:
        """A run from the journal: goes on while the conversation is ``running``."""
        return lambda attempt: self._carry(conversation_id, RunKind.GO_ON, attempt)

    def _retried(
        self, conversation_id: str, work: Work, delivery_key: str | None = None
    ) -> Callable[[], Awaitable[None]]:
        """``work``, tried again after each failure until it goes through (the module
        docstring says how); ``delivery_key`` names the input it journals, if any."""

        async def tried() -> None:
            await self._until_done(conversation_id, work, delivery_key)

        return tried

    async def _until_done(self, conversation_id: str, work: Work, delivery_key: str | None) -> None:
        try:
            await self._tried(conversation_id, work, delivery_key)
        finally:
            self.in_hand.discard(delivery_key or "")

    async def _tried(self, conversation_id: str, work: Work, delivery_key: str | None) -> None:
        failures = 0
        while True:
            try:
                if failures and delivery_key is not None and await self._journaled(delivery_key):
                    work, delivery_key = self._go_on(conversation_id), None
                await work(failures + 1)
                return
            except LeaseLost:
                # another process holds the conversation: it carries on; an input not
                # journaled yet is taken again once the lease is (not left for a restart)
                if delivery_key is not None and not await self._journaled(delivery_key):
                    again = self._retried(conversation_id, work, delivery_key)
                    self.queue.submit(conversation_id, Job(again))
                raise
            except AlreadyHandled as exc:  # the run held elsewhere took it (several instances)
                log.info("conversation %s: %s", conversation_id, exc)
                return
            except Exception as exc:
                if self._shutting_down:
                    raise  # the input stays in the store for the next start
                wait = min(RETRY_FIRST * 2**failures, RETRY_LONGEST)
                failures += 1
                log.error(
                    "conversation %s: its input failed (%s); trying again in %g s",
                    conversation_id,
                    exc,
                    wait,
                    exc_info=exc,
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._shutdown.wait(), wait)
            if self._shutting_down:
                return  # the input stays in the store for the next start

    async def _journaled(self, delivery_key: str) -> bool:
        """Whether the input ``delivery_key`` names is in the journal (its delivery handled)."""
        return all(key != delivery_key for key, _, _ in await self._inbox_store.unhandled())

    @contextlib.asynccontextmanager
    async def _hold(self, conversation_id: str) -> AsyncIterator[None]:
        """Hold the conversation's lease while its worker runs jobs (the queue's session).

        The worker's task and the jobs it starts carry the lease (fencing) and the
        conversation's id in the logs. A job's :class:`LeaseLost` ends here: the
        lease is let go and the next job takes it again.
        """
        logcontext.conversation.set(conversation_id)  # this worker runs only this conversation

        def may_release() -> bool:  # the run's last commit gives the lease up: none queued
            return not self.queue.queued(conversation_id)

        try:
            async with self._leases.held(conversation_id, may_release=may_release):
                yield
        except LeaseLost as exc:
            log.warning("%s; the run ended here", exc)

    async def _job(self, conversation_id: str, work: Callable[[], Awaitable[None]]) -> None:
        """Run one job (the queue's ``around``); cut by a shutdown, it first records the
        interruption, while the worker still holds the lease. The job before may have
        given the lease up with the commit that ended its run: it is taken again first."""
        await self._leases.again(conversation_id)
        try:
            await work()
        except asyncio.CancelledError:
            if self._shutting_down:
                await asyncio.shield(self._interrupted(conversation_id))
            raise

    async def _interrupted(self, conversation_id: str) -> None:
        try:
            reason = "the bot was shutting down"
            await self._carry(conversation_id, RunKind.INTERRUPT, 1, reason=reason)
        except LeaseLost as exc:
            log.warning("%s", exc)


class _Inbox:
    """A run's inbox over the conversation's queue (an
    :class:`core.vocabulary.inputs.InterruptibleInbox`)."""

    def __init__(self, queue: ConversationQueue, conversation_id: str) -> None:
        self._queue = queue
        self._conversation_id = conversation_id

    def __call__(self) -> list[ThreadMessage]:
        """Take the replies at the front of the queue."""
        return self._queue.take_replies(self._conversation_id)

    def interrupting(self) -> bool:
        """Whether one of them interrupts the run."""
        return self._queue.interrupting(self._conversation_id)
