"""One input at a time per conversation; stop jumps the queue.

Each conversation with work gets a worker task that takes its inputs in order.
The worker runs its jobs inside one *session* (``session(conversation_id)``, an
async context manager; the hub holds the conversation's lease there): opened
before the first job, kept while more jobs of the conversation are queued, closed
when none is left, when a job fails (the next job opens a new one) and when the
worker is stopped or cancelled. Tasks the worker starts inherit the context
variables the session set (the lease that fences commits, the log context).

The job in progress runs in a task of its own, so :meth:`ConversationQueue.stop`
can cancel it at once (a model call or a tool process ends there) and clear what
was still queued; the session still closes after the job has ended. Replies that
arrive while a run works wait in the queue, where the run picks them up as notes
at its next turn boundary (:meth:`ConversationQueue.take_replies`); one that
interrupts the run is seen there without being taken
(:meth:`ConversationQueue.interrupting`). A run's ``together`` job gathers the
messages of a conversation whose busy mode is ``queue``: each one that comes while
the job still waits joins it (:meth:`ConversationQueue.waiting_together`).

A stop ends what was said before it, never what came after it (docs/architecture.md,
"One mention, one approval, one stop"): each inbound event is numbered as it reaches
the hub (:func:`arriving`), each job carries the number of the event that gave it
(:attr:`Job.arrived`), and while a stop is carried out (:meth:`ConversationQueue.holding`)
the jobs that arrived after it wait: no run takes them as notes, :meth:`ConversationQueue.stop`
leaves them, and they run once the stop is done.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from dataclasses import dataclass

from core.vocabulary.inputs import ThreadMessage

log = logging.getLogger(__name__)

Session = Callable[[str], AbstractAsyncContextManager[object]]
"""``session(conversation_id)``: what a worker holds around the jobs it runs in a row."""

Around = Callable[[str, Callable[[], Awaitable[None]]], Awaitable[None]]
"""``around(conversation_id, job)``: runs one job, in the job's own task."""


_arrivals = itertools.count(1)
_arrival: ContextVar[int | None] = ContextVar("threadbot_arrival", default=None)


def arrived_now() -> int:
    """The number of the inbound event being handled (:func:`arriving`), else a new one:
    what came before has a smaller number."""
    number = _arrival.get()
    return number if number is not None else next(_arrivals)


@contextlib.contextmanager
def arriving() -> Iterator[int]:
    """Number an inbound event as it reaches the hub (one counter per process, rising);
    the jobs given while it is handled, and a stop it asks for, carry the number."""
    token = _arrival.set(next(_arrivals))
    try:
        yield arrived_now()
    finally:
        _arrival.reset(token)


@dataclass(frozen=True)
class Job:
    """A queued input: ``reply`` when it is a thread reply (may be taken as a note);
    ``together``: the messages a next run takes as one request (busy mode ``queue``),
    which more may join while the job waits; ``arrived``: the number of the event that
    gave it (:func:`arriving`; set by :meth:`ConversationQueue.submit`)."""

    run: Callable[[], Awaitable[None]]
    reply: ThreadMessage | None = None
    together: list[ThreadMessage] | None = None
    arrived: int = 0


class ConversationQueue:
    """Per-conversation FIFO of jobs with one worker each.

    ``session(conversation_id)`` is entered by the conversation's worker before
    its first job and left once no job of the conversation is queued, or the
    worker is stopped; a job that raises ends the session with that exception
    raised inside it (the session may handle it; what it lets through is logged),
    and the next job opens a new one. ``around(conversation_id, job)`` wraps each
    job, in the job's task. Both are optional.
    """

    def __init__(self, *, session: Session | None = None, around: Around | None = None) -> None:
        """``session`` wraps a worker's jobs in a row (the hub holds the lease there);
        ``around`` wraps each job (the hub records an interrupted shutdown there)."""
        self._session = session
        self._around = around
        self._jobs: dict[str, deque[Job]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self._paused = False
        self._holds: dict[str, list[int]] = {}
        """Conversations a stop is carried out for, and the number each stop arrived
        with: the jobs that arrived after the first of them wait (:meth:`holding`)."""

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
        job = dataclasses.replace(job, arrived=arrived_now())
        self._jobs.setdefault(conversation_id, deque()).append(job)
        if self._startable(conversation_id):
            self._start(conversation_id)

    def take_replies(self, conversation_id: str) -> list[ThreadMessage]:
        """Remove and return the replies at the front of the queue (notes for a run)."""
        jobs = self._jobs.get(conversation_id)
        taken: list[ThreadMessage] = []
        while (
            jobs
            and (reply := jobs[0].reply) is not None
            and not self._waits(conversation_id, jobs[0])
        ):
            jobs.popleft()
            taken.append(reply)
        return taken

    def interrupting(self, conversation_id: str) -> bool:
        """Whether a reply that interrupts the run waits among the replies at the front
        of the queue (the ones :meth:`take_replies` would take); nothing is taken."""
        for job in self._jobs.get(conversation_id, ()):
            if job.reply is None or self._waits(conversation_id, job):
                return False
            if job.reply.interrupts:
                return True
        return False

    def waiting_together(self, conversation_id: str) -> list[ThreadMessage] | None:
        """The messages of the last queued job, when it is a ``together`` job that has not
        started (a message appended to the list joins its run); else None."""
        jobs = self._jobs.get(conversation_id)
        return jobs[-1].together if jobs else None

    def queued(self, conversation_id: str) -> bool:
        """True while jobs of the conversation wait behind the one running."""
        return bool(self._jobs.get(conversation_id))

    def busy(self, conversation_id: str) -> bool:
        """True while the conversation has a job running or queued (or its session open)."""
        return conversation_id in self._workers

    def busy_count(self) -> int:
        """How many conversations have a job running or queued."""
        return len(self._workers)

    def busy_any(self) -> bool:
        """True while any conversation has a job running or queued."""
        return bool(self._workers)

    @contextlib.contextmanager
    def holding(self, conversation_id: str, arrived: int) -> Iterator[None]:
        """Within the block (a stop that arrived with number ``arrived`` is carried out),
        the conversation's jobs that arrived after it wait: not taken as notes, not run,
        left by :meth:`stop`; after it they run in order (a new worker and session)."""
        self._holds.setdefault(conversation_id, []).append(arrived)
        try:
            yield
        finally:
            holds = self._holds[conversation_id]
            holds.remove(arrived)
            if not holds:
                del self._holds[conversation_id]
            if self._startable(conversation_id):
                self._start(conversation_id)

    async def stop(self, conversation_id: str) -> None:
        """Drop queued jobs and cancel the worker: its running job is cancelled at once,
        then its session closes (a worker still opening it stops waiting). Returns when
        the worker has ended; a job submitted meanwhile gets a new worker and session.
        The jobs that arrived after a stop being carried out stay (:meth:`holding`)."""
        jobs = self._jobs.pop(conversation_id, ())
        kept = deque(job for job in jobs if self._waits(conversation_id, job))
        if kept:
            self._jobs[conversation_id] = kept
        worker = self._workers.get(conversation_id)
        if worker is None:
            return
        worker.cancel()
        if worker is not asyncio.current_task():
            await asyncio.wait({worker})

    def pause(self) -> None:
        """Start no new job from now on (shutting down); the jobs running go on."""
        self._paused = True
        self._jobs.clear()

    async def idle(self) -> None:
        """Return once no conversation has a job running or queued."""
        await self._idle.wait()

    async def close(self) -> None:
        """Cancel every worker and its job; returns when they have ended."""
        self._jobs.clear()
        workers = list(self._workers.values())
        for worker in workers:
            worker.cancel()
        if workers:
            await asyncio.wait(workers)

    def _start(self, conversation_id: str) -> None:
        self._idle.clear()
        worker = asyncio.create_task(
            self._work(conversation_id), name=f"conversation-{conversation_id}"
        )
        self._workers[conversation_id] = worker
        worker.add_done_callback(functools.partial(self._ended, conversation_id))

    def _ended(self, conversation_id: str, worker: asyncio.Task[None]) -> None:
        """A worker ended (also when cancelled before it began): start another for the
        jobs submitted while it was stopping, else forget the conversation."""
        if self._workers.get(conversation_id) is worker:
            del self._workers[conversation_id]
        if not worker.cancelled() and (error := worker.exception()) is not None:
            log.error("conversation %s: the worker failed", conversation_id, exc_info=error)
        if conversation_id in self._workers:
            return
        if self._startable(conversation_id):
            self._start(conversation_id)
            return
        if not self._jobs.get(conversation_id):  # jobs held by a stop stay for its end
            self._jobs.pop(conversation_id, None)
        if not self._workers:
            self._idle.set()

    def _waits(self, conversation_id: str, job: Job) -> bool:
        """Whether ``job`` arrived after a stop being carried out for its conversation."""
        holds = self._holds.get(conversation_id)
        return holds is not None and job.arrived > min(holds)

    def _startable(self, conversation_id: str) -> bool:
        """Whether a worker may start: none runs, and the first job is not held."""
        jobs = self._jobs.get(conversation_id)
        if self._paused or conversation_id in self._workers or not jobs:
            return False
        return not self._waits(conversation_id, jobs[0])

    def _next(self, conversation_id: str) -> Job | None:
        jobs = self._jobs.get(conversation_id)
        if self._paused or not jobs or self._waits(conversation_id, jobs[0]):
            return None
        return jobs.popleft()

    def _open(self, conversation_id: str) -> AbstractAsyncContextManager[object]:
        if self._session is None:
            return contextlib.nullcontext()
        return self._session(conversation_id)

    async def _work(self, conversation_id: str) -> None:
        while (job := self._next(conversation_id)) is not None:
            try:
                async with self._open(conversation_id):
                    while job is not None:
                        await self._run(conversation_id, job)
                        job = self._next(conversation_id)
            except Exception:
                log.exception("conversation %s: input failed", conversation_id)

    async def _run(self, conversation_id: str, job: Job) -> None:
        """Run ``job`` in a task of its own; raises what it raised (in the session)."""
        run = job.run
        if self._around is not None:
            run = functools.partial(self._around, conversation_id, job.run)
        task = asyncio.create_task(_call(run))
        await _finished(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            raise error


async def _call(run: Callable[[], Awaitable[None]]) -> None:
    await run()


async def _finished(task: asyncio.Task[None]) -> None:
    """Wait for ``task`` to end. Cancelled meanwhile (a stop): cancel ``task`` once, still
    wait for its end (it may record an interruption under the session), then raise."""
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            if not cancelled:
                task.cancel()
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
