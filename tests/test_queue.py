"""The conversation queue on its own: one session around a worker's jobs in a row.

A recording session stands for the hub's lease (``tests/test_lease_across_jobs.py``
has the real one): it is opened before the first job, kept while jobs of the
conversation are queued, closed when none is left, when a job fails and on a stop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar

import pytest

from conversations.queue import ConversationQueue, Job, arriving
from core.vocabulary.inputs import ThreadMessage
from core.vocabulary.people import Person

SESSION: ContextVar[int] = ContextVar("test_session", default=0)


class Sessions:
    """A session factory that numbers the sessions and records what happens."""

    def __init__(self) -> None:
        self.opened = 0
        self.log: list[str] = []
        self.seen: list[BaseException] = []

    @contextlib.asynccontextmanager
    async def __call__(self, conversation_id: str) -> AsyncIterator[None]:
        self.opened += 1
        number = self.opened
        token = SESSION.set(number)
        self.log.append(f"open {conversation_id} {number}")
        try:
            yield
        except BaseException as exc:
            self.seen.append(exc)
            raise
        finally:
            SESSION.reset(token)
            await asyncio.sleep(0)  # a release is a write: it awaits
            self.log.append(f"close {conversation_id} {number}")


def recorder(log: list[str], name: str) -> Job:
    async def run() -> None:
        log.append(f"{name} in session {SESSION.get()}")

    return Job(run)


def blocker(log: list[str], name: str, gate: asyncio.Event) -> Job:
    async def run() -> None:
        log.append(f"{name} started in session {SESSION.get()}")
        try:
            await gate.wait()
        except asyncio.CancelledError:
            log.append(f"{name} cancelled")
            raise
        log.append(f"{name} done")

    return Job(run)


async def test_jobs_queued_for_a_conversation_share_one_session() -> None:
    sessions = Sessions()
    queue = ConversationQueue(session=sessions)
    gate = asyncio.Event()
    queue.submit("c1", blocker(sessions.log, "first", gate))
    queue.submit("c1", recorder(sessions.log, "second"))
    await asyncio.sleep(0.01)
    assert queue.busy("c1")

    gate.set()
    await queue.idle()

    assert sessions.log == [
        "open c1 1",
        "first started in session 1",
        "first done",
        "second in session 1",
        "close c1 1",
    ]
    assert not queue.busy("c1")


async def test_a_job_after_the_queue_drained_opens_a_new_session() -> None:
    sessions = Sessions()
    queue = ConversationQueue(session=sessions)
    queue.submit("c1", recorder(sessions.log, "first"))
    await queue.idle()
    queue.submit("c1", recorder(sessions.log, "second"))
    await queue.idle()

    assert sessions.log == [
        "open c1 1",
        "first in session 1",
        "close c1 1",
        "open c1 2",
        "second in session 2",
        "close c1 2",
    ]


async def test_each_conversation_has_its_own_session() -> None:
    sessions = Sessions()
    queue = ConversationQueue(session=sessions)
    gate = asyncio.Event()
    queue.submit("c1", blocker(sessions.log, "a", gate))
    queue.submit("c2", blocker(sessions.log, "b", gate))
    await asyncio.sleep(0.01)
    assert queue.busy_count() == 2
    gate.set()
    await queue.idle()
    assert sessions.opened == 2
    assert sorted(line for line in sessions.log if line.startswith("close")) == [
        "close c1 1",
        "close c2 2",
    ]


async def test_a_failing_job_ends_its_session_and_the_next_job_opens_another(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sessions = Sessions()
    queue = ConversationQueue(session=sessions)
    gate = asyncio.Event()

    async def fails() -> None:
        await gate.wait()
        raise RuntimeError("boom")

    queue.submit("c1", Job(fails))
    queue.submit("c1", recorder(sessions.log, "next"))
    gate.set()
    await queue.idle()

    assert sessions.log == [
        "open c1 1",
        "close c1 1",
        "open c1 2",
        "next in session 2",
        "close c1 2",
    ]
    assert [type(exc) for exc in sessions.seen] == [RuntimeError]  # raised inside the session
    assert "conversation c1: input failed" in caplog.text and "boom" in caplog.text


async def test_stop_cancels_the_job_closes_the_session_and_drops_the_queue() -> None:
    sessions = Sessions()
    queue = ConversationQueue(session=sessions)
    queue.submit("c1", blocker(sessions.log, "running", asyncio.Event()))
    queue.submit("c1", recorder(sessions.log, "queued"))
    await asyncio.sleep(0.01)

    await queue.stop("c1")

    assert sessions.log == [
        "open c1 1",
        "running started in session 1",
        "running cancelled",
        "close c1 1",  # closed before stop returned
    ]
    assert not queue.busy("c1")
    await queue.idle()

    queue.submit("c1", recorder(sessions.log, "later"))
    await queue.idle()
    assert sessions.log[-3:] == ["open c1 2", "later in session 2", "close c1 2"]


async def test_stop_reaches_a_worker_still_opening_its_session() -> None:
    opening = asyncio.Event()
    closed: list[str] = []

    @contextlib.asynccontextmanager
    async def slow(conversation_id: str) -> AsyncIterator[None]:
        opening.set()
        await asyncio.Event().wait()  # waits for the lease forever
        yield
        closed.append(conversation_id)

    ran: list[str] = []
    queue = ConversationQueue(session=slow)
    queue.submit("c1", recorder(ran, "never"))
    await opening.wait()

    await queue.stop("c1")

    assert not queue.busy("c1") and ran == [] and closed == []


async def test_a_job_submitted_during_a_stop_gets_a_new_session() -> None:
    sessions = Sessions()
    queue = ConversationQueue(session=sessions)
    queue.submit("c1", blocker(sessions.log, "running", asyncio.Event()))
    await asyncio.sleep(0.01)

    stopping = asyncio.create_task(queue.stop("c1"))
    await asyncio.sleep(0)  # the job is being cancelled
    queue.submit("c1", recorder(sessions.log, "after"))
    await stopping
    await queue.idle()

    assert sessions.log == [
        "open c1 1",
        "running started in session 1",
        "running cancelled",
        "close c1 1",
        "open c1 2",
        "after in session 2",
        "close c1 2",
    ]


async def test_a_stop_waits_for_the_job_to_finish_its_cancellation() -> None:
    """Cancelled, the job may still write (an interruption) inside the session."""
    sessions = Sessions()
    queue = ConversationQueue(session=sessions)
    started = asyncio.Event()

    async def cleans_up() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.shield(asyncio.sleep(0.02))
            sessions.log.append(f"recorded the interruption in session {SESSION.get()}")
            raise

    queue.submit("c1", Job(cleans_up))
    await started.wait()
    first, second = asyncio.create_task(queue.stop("c1")), asyncio.create_task(queue.stop("c1"))
    await asyncio.gather(first, second)

    assert sessions.log == ["open c1 1", "recorded the interruption in session 1", "close c1 1"]


async def test_close_cancels_every_worker_and_closes_their_sessions() -> None:
    sessions = Sessions()
    queue = ConversationQueue(session=sessions)
    queue.submit("c1", blocker(sessions.log, "a", asyncio.Event()))
    await asyncio.sleep(0.01)
    queue.submit("c2", recorder(sessions.log, "b"))  # cancelled before its worker began

    await queue.close()

    assert queue.busy_count() == 0
    await asyncio.wait_for(queue.idle(), 1)
    assert sessions.log == ["open c1 1", "a started in session 1", "a cancelled", "close c1 1"]


async def test_pause_lets_the_running_job_end_and_closes_the_session() -> None:
    sessions = Sessions()
    queue = ConversationQueue(session=sessions)
    gate = asyncio.Event()
    queue.submit("c1", blocker(sessions.log, "running", gate))
    queue.submit("c1", recorder(sessions.log, "queued"))
    await asyncio.sleep(0.01)

    queue.pause()
    queue.submit("c1", recorder(sessions.log, "late"))  # dropped: left for the next start
    gate.set()
    await queue.idle()

    assert sessions.log == [
        "open c1 1",
        "running started in session 1",
        "running done",
        "close c1 1",
    ]


async def test_a_run_takes_the_replies_queued_behind_it() -> None:
    queue = ConversationQueue()
    gate = asyncio.Event()
    taken: list[list[ThreadMessage]] = []
    reply = ThreadMessage(text="also this", author=Person(id="console:bob", name="bob"))

    async def run() -> None:
        await gate.wait()
        taken.append(queue.take_replies("c1"))

    replied: list[str] = []

    async def as_a_job() -> None:
        replied.append("ran")

    queue.submit("c1", Job(run))
    queue.submit("c1", Job(as_a_job, reply=reply))
    gate.set()
    await queue.idle()

    assert taken == [[reply]] and replied == []


async def test_around_wraps_each_job_in_the_job_s_task() -> None:
    sessions = Sessions()
    seen: list[tuple[str, int, bool]] = []

    async def around(conversation_id: str, work: Callable[[], Awaitable[None]]) -> None:
        seen.append((conversation_id, SESSION.get(), asyncio.current_task() not in workers))
        await work()

    queue = ConversationQueue(session=sessions, around=around)
    queue.submit("c1", recorder(sessions.log, "one"))
    queue.submit("c1", recorder(sessions.log, "two"))
    workers = {task for task in asyncio.all_tasks() if task.get_name() == "conversation-c1"}
    await queue.idle()

    assert seen == [("c1", 1, True), ("c1", 1, True)]
    assert sessions.opened == 1


async def test_what_arrived_after_a_stop_waits_for_it_and_runs_after_it() -> None:
    """The jobs that arrived after a stop being carried out are not taken as notes, not
    dropped by the stop and not started until the stop is done; what came before goes."""
    queue = ConversationQueue()
    ran: list[str] = []
    started, gate = asyncio.Event(), asyncio.Event()

    async def working() -> None:
        started.set()
        await gate.wait()
        ran.append("working")  # never: the stop cancels it

    def job(name: str) -> Job:
        async def run() -> None:
            ran.append(name)

        note = ThreadMessage(text=name, author=Person(id="u1", name="alice"))
        return Job(run, reply=note)

    with arriving():
        queue.submit("c1", Job(working))
    await started.wait()
    with arriving():
        queue.submit("c1", job("before the stop"))
    with arriving() as stop:
        with queue.holding("c1", stop):
            with arriving():
                queue.submit("c1", job("after the stop"))
            await queue.stop("c1")
            assert ran == [] and queue.queued("c1")  # "after" waits; "before" went
            assert queue.take_replies("c1") == []  # no run takes it as a note meanwhile
            assert not queue.busy("c1")  # no worker starts it while the stop goes on
        await queue.idle()
    assert ran == ["after the stop"]
