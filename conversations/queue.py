"""One input at a time per conversation; stop jumps the queue.

Each conversation with work gets a worker task that takes its inputs in order.
The job in progress runs in a task of its own, so :meth:`ConversationQueue.stop`
can cancel it at once (a model call or a tool process ends there) and clear what
was still queued. Replies that arrive while a run works wait in the queue, where
the run picks them up as notes at its next turn boundary (:meth:`take_replies`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from core.inputs import Reply

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    """A queued input: ``reply`` when it is a thread reply (may be taken as a note)."""

    run: Callable[[], Awaitable[None]]
    reply: Reply | None = None


class ConversationQueue:
    """Per-conversation FIFO of jobs with one worker each."""

    def __init__(
        self,
        *,
        around: Callable[[str, Callable[[], Awaitable[None]]], Awaitable[None]] | None = None,
    ) -> None:
        """``around(conversation_id, job)`` wraps every job (the hub takes the lease there)."""
        self._around = around
        self._jobs: dict[str, deque[Job]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._current: dict[str, asyncio.Task[None]] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self._paused = False

    def submit(self, conversation_id: str, job: Job) -> None:
        """Queue ``job``; starts the conversation's worker if none runs.

        After :meth:`pause` the job is dropped: every input is kept in the store
        (the inbox, a ``running`` lifecycle, an open request) and queued again by
        the next start.
        """
        if self._paused:
            log.debug(
                "conversation %s: the queue is paused, job left for the next start", conversation_id
            )
            return
        self._jobs.setdefault(conversation_id, deque()).append(job)
        if conversation_id not in self._workers:
            self._idle.clear()
            self._workers[conversation_id] = asyncio.create_task(
                self._work(conversation_id), name=f"conversation-{conversation_id}"
            )

    def take_replies(self, conversation_id: str) -> list[Reply]:
        """Remove and return the replies at the front of the queue (notes for a run)."""
        jobs = self._jobs.get(conversation_id)
        taken: list[Reply] = []
        while jobs and (reply := jobs[0].reply) is not None:
            jobs.popleft()
            taken.append(reply)
        return taken

    def busy(self, conversation_id: str) -> bool:
        """True while the conversation has a job running or queued."""
        return conversation_id in self._workers

    def busy_count(self) -> int:
        """How many conversations have a job running or queued."""
        return len(self._workers)

    def busy_any(self) -> bool:
        """True while any conversation has a job running or queued."""
        return bool(self._workers)

    async def stop(self, conversation_id: str) -> None:
        """Drop queued jobs and cancel the running one; returns when it has ended."""
        self._jobs.pop(conversation_id, None)
        current = self._current.get(conversation_id)
        if current is not None:
            current.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await current

    def pause(self) -> None:
        """Start no new job from now on (shutting down); the jobs running go on."""
        self._paused = True
        self._jobs.clear()

    async def idle(self) -> None:
        """Return once no conversation has a job running or queued."""
        await self._idle.wait()

    async def close(self) -> None:
        """Cancel every worker and its job."""
        for conversation_id in list(self._workers):
            await self.stop(conversation_id)
        workers = list(self._workers.values())
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)

    def _wrapped(self, conversation_id: str, job: Job) -> Callable[[], Awaitable[None]]:
        around = self._around
        if around is None:
            return job.run
        return functools.partial(around, conversation_id, job.run)

    async def _work(self, conversation_id: str) -> None:
        try:
            while not self._paused and (jobs := self._jobs.get(conversation_id)):
                job = jobs.popleft()
                work = self._wrapped(conversation_id, job)
                task = asyncio.create_task(_guarded(work, conversation_id))
                self._current[conversation_id] = task
                try:
                    await asyncio.shield(task)
                except asyncio.CancelledError:
                    if not task.cancelled():
                        raise
                finally:
                    self._current.pop(conversation_id, None)
        finally:
            self._jobs.pop(conversation_id, None)
            self._workers.pop(conversation_id, None)
            if not self._workers:
                self._idle.set()


async def _guarded(run: Callable[[], Awaitable[None]], conversation_id: str) -> None:
    try:
        await run()
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("conversation %s: input failed", conversation_id)
