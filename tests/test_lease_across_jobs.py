"""A busy conversation keeps its lease across its jobs (issue 12).

The hub's runs (:class:`conversations.hub._runs.Runs`) over the in-memory store,
with a lease store that counts its acquisitions and releases: queued jobs of one
conversation run under one lease, which is let go once the queue is empty, on a
stop, at shutdown and after a job found it lost (the next job takes it again).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from conversations import logcontext
from conversations.hub._runs import Runs
from conversations.queue import Job
from conversations.render import render_event
from conversations.store.leases import Leases, current_lease
from conversations.store.memory import MemoryStore
from conversations.store.records import Lease
from core.runner.protocol import RunEnded, RunItem, RunKind, RunRequest
from core.vocabulary import lifecycle
from core.vocabulary.entries import UserText
from core.vocabulary.errors import LeaseLost
from core.vocabulary.journal import Change
from core.vocabulary.lifecycle import WaitKind
from core.vocabulary.people import Person
from core.vocabulary.run_events import ProgressNote
from tests.conftest import wait_for
from tests.test_store_contract import new_conversation

ALICE = Person(id="U0ALICE001", name="alice")
OWNER = "host-a:1"
FAR_FUTURE = datetime(2100, 1, 1, tzinfo=UTC)


class CountingLeases:
    """The memory store's lease store, counting acquisitions and releases."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.acquired: list[Lease] = []
        self.released: list[Lease] = []

    async def acquire_lease(self, *args: Any, **kwargs: Any) -> Lease | None:
        lease = await self._inner.acquire_lease(*args, **kwargs)
        if lease is not None:
            self.acquired.append(lease)
        return lease

    async def release_lease(self, lease: Lease) -> bool:
        self.released.append(lease)
        released: bool = await self._inner.release_lease(lease)
        return released

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class FakeRunner:
    """What :class:`Runs` asks of its runner besides the jobs: shutdown's suspend and the
    interruption it records (each with the lease held when it was asked)."""

    def __init__(self) -> None:
        self.interrupts: list[tuple[str, Lease | None]] = []

    async def suspend(self) -> None:
        pass

    async def cancel(self, run_id: str) -> bool:
        return False

    async def run(self, request: RunRequest) -> AsyncIterator[RunItem]:
        assert request.kind is RunKind.INTERRUPT, request
        cid = request.conversation_id
        self.interrupts.append((cid, current_lease(cid)))
        yield RunEnded()


class Setup:
    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.counting = CountingLeases(store.leases)
        self.leases = Leases(store=self.counting, owner=OWNER, ttl=60)  # type: ignore[arg-type]
        self.engine = FakeRunner()
        self.runs = Runs(runner=self.engine, leases=self.leases, inbox=store.inbox)
        self.queue = self.runs.queue

    async def owner(self, conversation_id: str) -> str | None:
        state = await self.store.leases.lease_state(conversation_id)
        assert state is not None
        return state.owner


@pytest.fixture
async def setup() -> Any:
    store = MemoryStore(render=render_event)
    yield Setup(store)
    await store.close()


def note(text: str) -> Change:
    return Change(
        entries=(UserText(author=ALICE, text=text, role="note"),),
        events=(ProgressNote(text=text),),
    )


def committing(setup: Setup, cid: str, name: str, seen: list[tuple[str, Lease | None, str]]) -> Job:
    """A job that records the lease it runs under and commits a note (fenced by it)."""

    async def run() -> None:
        seen.append((name, current_lease(cid), logcontext.conversation.get()))
        await setup.store.journal.commit(cid, note(name))

    return Job(run)


def waiting(cid: str, gate: asyncio.Event, seen: list[Lease | None]) -> Job:
    async def run() -> None:
        seen.append(current_lease(cid))
        await gate.wait()

    return Job(run)


async def test_two_queued_jobs_run_under_one_lease_acquisition(setup: Setup) -> None:
    cid = await new_conversation(setup.store)
    gate = asyncio.Event()
    first: list[Lease | None] = []
    seen: list[tuple[str, Lease | None, str]] = []
    setup.queue.submit(cid, waiting(cid, gate, first))
    setup.queue.submit(cid, committing(setup, cid, "second", seen))
    setup.queue.submit(cid, committing(setup, cid, "third", seen))
    await wait_for(lambda: first)  # the first job runs, under the lease
    assert cid in setup.leases.held_ids

    gate.set()
    await setup.queue.idle()

    assert len(setup.counting.acquired) == 1 and len(setup.counting.released) == 1
    (lease,) = setup.counting.acquired
    assert first == [lease]
    assert seen == [("second", lease, cid), ("third", lease, cid)]  # the same epoch, fenced
    assert len((await setup.store.journal.load(cid)).journal) == 2  # both commits held


async def test_the_lease_is_released_once_the_queue_is_empty(setup: Setup) -> None:
    cid = await new_conversation(setup.store)
    seen: list[tuple[str, Lease | None, str]] = []
    setup.queue.submit(cid, committing(setup, cid, "only", seen))
    await setup.queue.idle()

    assert await setup.owner(cid) is None
    assert setup.counting.released == setup.counting.acquired
    assert cid not in setup.leases.held_ids

    setup.queue.submit(cid, committing(setup, cid, "later", seen))  # the next one takes it anew
    await setup.queue.idle()
    first, second = setup.counting.acquired
    assert second.epoch == first.epoch + 1
    assert [lease for _, lease, _ in seen] == [first, second]
    assert await setup.owner(cid) is None


async def test_a_stop_releases_the_lease_and_the_next_job_takes_a_new_one(setup: Setup) -> None:
    cid = await new_conversation(setup.store)
    cancelled, begun = asyncio.Event(), asyncio.Event()

    async def forever() -> None:
        begun.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    seen: list[tuple[str, Lease | None, str]] = []
    setup.queue.submit(cid, Job(forever))
    setup.queue.submit(cid, committing(setup, cid, "dropped by the stop", seen))
    await begun.wait()
    assert await setup.owner(cid) == OWNER

    await setup.queue.stop(cid)

    assert cancelled.is_set() and seen == []
    assert await setup.owner(cid) is None
    assert setup.counting.released == setup.counting.acquired and len(setup.counting.acquired) == 1
    assert setup.engine.interrupts == []  # not a shutdown: nothing recorded as interrupted

    setup.queue.submit(cid, committing(setup, cid, "after the stop", seen))
    await setup.queue.idle()
    first, second = setup.counting.acquired
    assert second.epoch == first.epoch + 1
    assert seen == [("after the stop", second, cid)]
    assert await setup.owner(cid) is None


async def test_a_lost_lease_ends_the_job_and_the_next_job_takes_it_again(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    cid = await new_conversation(setup.store)
    seen: list[tuple[str, Lease | None, str]] = []

    async def taken_over() -> None:
        seen.append(("taken over", current_lease(cid), logcontext.conversation.get()))
        other = await setup.store.leases.acquire_lease(cid, "host-b:2", ttl=60, now=FAR_FUTURE)
        assert other is not None  # this process was paused past its lease
        assert await setup.store.leases.release_lease(other)  # and the other one is done
        await setup.store.journal.commit(cid, note("refused"))  # raises LeaseLost
        seen.append(("not reached", None, ""))

    setup.queue.submit(cid, Job(taken_over))
    setup.queue.submit(cid, committing(setup, cid, "next", seen))
    await setup.queue.idle()

    first, second = setup.counting.acquired
    assert second.epoch == first.epoch + 2  # the other process's epoch came between
    assert seen == [("taken over", first, cid), ("next", second, cid)]
    journal = (await setup.store.journal.load(cid)).journal
    assert [record.entry.text for record in journal] == ["next"]  # type: ignore[union-attr]
    assert "no longer holds its lease; nothing was written; the run ended here" in caplog.text
    assert "input failed" not in caplog.text
    assert await setup.owner(cid) is None


async def test_an_input_whose_job_lost_the_lease_is_taken_again_not_left_for_a_restart(
    setup: Setup,
) -> None:
    cid = await new_conversation(setup.store)
    assert await setup.store.inbox.record_delivery("Ev-reply", cid, {"kind": "reply"})
    tries: list[Lease | None] = []
    attempts: list[int] = []

    async def journal_the_reply(attempt: int) -> None:
        tries.append(current_lease(cid))
        attempts.append(attempt)
        if len(tries) == 1:  # paused past the lease: another process took it and let it go
            other = await setup.store.leases.acquire_lease(cid, "host-b:2", ttl=60, now=FAR_FUTURE)
            assert other is not None and await setup.store.leases.release_lease(other)
        reply = UserText(author=ALICE, text="the reply", role="note")
        await setup.store.journal.commit(cid, Change(entries=(reply,), handled=("Ev-reply",)))

    setup.queue.submit(cid, Job(setup.runs._retried(cid, journal_the_reply, "Ev-reply")))
    await wait_for(lambda: len(tries) == 2)
    await setup.queue.idle()

    first, second = setup.counting.acquired
    assert tries == [first, second] and second.epoch == first.epoch + 2
    assert attempts == [1, 1]  # a new job under a new lease, not a failure tried again
    assert await setup.store.inbox.unhandled() == []
    journal = (await setup.store.journal.load(cid)).journal
    assert [record.entry.text for record in journal] == ["the reply"]  # type: ignore[union-attr]


async def test_a_lease_lost_raised_by_a_job_is_not_reused(setup: Setup) -> None:
    cid = await new_conversation(setup.store)
    seen: list[tuple[str, Lease | None, str]] = []

    async def lost() -> None:
        raise LeaseLost("lost it")

    setup.queue.submit(cid, Job(lost))
    setup.queue.submit(cid, committing(setup, cid, "next", seen))
    await setup.queue.idle()

    assert len(setup.counting.acquired) == 2 and len(setup.counting.released) == 2
    assert seen == [("next", setup.counting.acquired[1], cid)]


async def test_shutdown_interrupts_the_job_while_the_lease_is_held(setup: Setup) -> None:
    cid = await new_conversation(setup.store)
    started: list[Lease | None] = []
    setup.queue.submit(cid, waiting(cid, asyncio.Event(), started))
    await wait_for(lambda: started)

    await setup.runs.shutdown(0.05)

    (lease,) = setup.counting.acquired
    assert started == [lease]
    assert setup.engine.interrupts == [(cid, lease)]  # recorded under the lease
    assert setup.counting.released == [lease]
    assert await setup.owner(cid) is None and not setup.queue.busy_any()


async def test_shutdown_lets_the_running_job_end_and_releases_the_lease(setup: Setup) -> None:
    cid = await new_conversation(setup.store)
    gate = asyncio.Event()
    started: list[Lease | None] = []
    setup.queue.submit(cid, waiting(cid, gate, started))
    setup.queue.submit(cid, waiting(cid, gate, started))  # left for the next start
    await wait_for(lambda: started)

    shutting = asyncio.create_task(setup.runs.shutdown(5))
    await wait_for(lambda: setup.runs._shutting_down)  # the queue is paused: none starts
    gate.set()
    await shutting

    assert len(started) == 1 and setup.engine.interrupts == []
    assert setup.counting.released == setup.counting.acquired
    assert await setup.owner(cid) is None


def ending(setup: Setup, cid: str, seen: list[Lease | None]) -> Job:
    """A job whose run ends waiting for a person: its last commit moves the lifecycle."""

    async def run() -> None:
        seen.append(current_lease(cid))
        snap = await setup.store.journal.load(cid)
        running = lifecycle.move(snap.status, lifecycle.RUNNING)
        await setup.store.journal.commit(cid, Change(status=running))
        waits = lifecycle.move(running, lifecycle.waiting(WaitKind.PLAN_APPROVAL))
        await setup.store.journal.commit(cid, Change(status=waits))

    return Job(run)


async def test_the_commit_that_ends_the_run_gives_the_lease_up_when_nothing_is_queued(
    setup: Setup,
) -> None:
    """No release of its own after a run that ended waiting: its last commit wrote it."""
    cid = await new_conversation(setup.store)
    seen: list[Lease | None] = []
    setup.queue.submit(cid, ending(setup, cid, seen))
    await setup.queue.idle()

    assert await setup.owner(cid) is None
    assert len(setup.counting.acquired) == 1 and setup.counting.released == []
    assert cid not in setup.leases.held_ids
    # the next job takes a new lease; its commits are fenced by it
    notes: list[tuple[str, Lease | None, str]] = []
    setup.queue.submit(cid, committing(setup, cid, "later", notes))
    await setup.queue.idle()
    first, second = setup.counting.acquired
    assert second.epoch == first.epoch + 1 and notes[0][1] == second


async def test_a_job_queued_behind_the_run_that_ends_keeps_the_lease_for_it(
    setup: Setup,
) -> None:
    """With a job waiting behind it, the ending commit keeps the lease: the job runs under
    the same one, and the worker lets it go once, at the end."""
    cid = await new_conversation(setup.store)
    gate = asyncio.Event()
    first: list[Lease | None] = []
    seen: list[Lease | None] = []
    notes: list[tuple[str, Lease | None, str]] = []
    setup.queue.submit(cid, waiting(cid, gate, first))
    setup.queue.submit(cid, ending(setup, cid, seen))
    setup.queue.submit(cid, committing(setup, cid, "behind", notes))
    gate.set()
    await setup.queue.idle()

    (lease,) = setup.counting.acquired
    assert first == seen == [lease] and notes[0][1] == lease
    assert setup.counting.released == [lease]
    assert await setup.owner(cid) is None


async def test_a_lease_given_up_while_its_renewal_waits_is_not_reported_lost(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    """The renewal reads the held leases, then waits its turn at the store; the run's last
    commit gives its lease up meanwhile: that lease is let go, not lost."""
    cid = await new_conversation(setup.store)
    renewing, renew = asyncio.Event(), asyncio.Event()
    inner = setup.store.leases

    async def renew_late(held: Any, *, ttl: float, now: Any = None) -> set[str]:
        renewing.set()
        await renew.wait()
        kept: set[str] = await inner.renew_leases(held, ttl=ttl, now=now)
        return kept

    setup.counting.renew_leases = renew_late  # type: ignore[method-assign]
    gate = asyncio.Event()
    seen: list[Lease | None] = []

    async def end_after_gate() -> None:
        await gate.wait()
        await ending(setup, cid, seen).run()

    setup.queue.submit(cid, Job(end_after_gate))
    await wait_for(lambda: cid in setup.leases.held_ids)
    renewal = asyncio.ensure_future(setup.leases.renew_all())
    await renewing.wait()
    gate.set()
    await setup.queue.idle()  # the run ended waiting: its commit gave the lease up
    renew.set()
    assert await renewal == set()
    assert "lost the lease" not in caplog.text
    assert await setup.owner(cid) is None
