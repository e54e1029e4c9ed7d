"""The deliverer: order, note batching, status edits, rate limits, failures reported, drain.

A recording platform stands in for the adapters; time is a :class:`VirtualClock`
shared with the deliverer, so a ``Retry-After`` of 30 s or the note interval pass
when the test lets them, and tests assert order and what the store holds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from conversations.errors import DeliveryError, NotConnected, RateLimited
from conversations.events import (
    OutboundAction,
    PlatformRef,
    PostReply,
    SetSessionStatus,
    UpdateMessage,
)
from conversations.outbox import STATUS_MAX_CHARS, Deliverer
from conversations.render import render_event
from conversations.sessions import SESSION
from conversations.store import Outgoing, Store
from conversations.store.memory import MemoryStore
from core.vocabulary.journal import Change
from core.vocabulary.people import Person
from core.vocabulary.run_events import ProgressNote, RunAnswered, RunStats
from tests.conftest import wait_for
from tests.fakes.clock import VirtualClock

Match = Callable[[OutboundAction], bool]


def anything(_: OutboundAction) -> bool:
    return True


def is_update(action: OutboundAction) -> bool:
    return isinstance(action, UpdateMessage)


def says(part: str) -> Match:
    """Actions whose text starts with ``part`` (a report quoting it does not)."""
    return lambda action: getattr(action, "text", "").startswith(part)


class RecordingSender:
    """A platform that records what it took, and refuses on demand.

    ``refuse(error, when=..., times=N)``: the next N sends that match raise
    ``error`` (``times=None``: every one). ``gate``: sends wait for it first.
    """

    platform = "test"

    def __init__(self) -> None:
        self.sent: list[OutboundAction] = []
        self.calls: list[tuple[OutboundAction, str, bool]] = []
        self._refusals: list[tuple[Match, Exception, int | None]] = []
        self.gate: asyncio.Event | None = None

    def refuse(self, error: Exception, *, when: Match = anything, times: int | None = 1) -> None:
        self._refusals.append((when, error, times))

    def stop_refusing(self) -> None:
        self._refusals.clear()

    def texts(self) -> list[str]:
        return [getattr(action, "text", "") for action in self.sent]

    async def send(
        self, action: OutboundAction, *, idempotency_key: str, maybe_sent: bool = False
    ) -> str | None:
        self.calls.append((action, idempotency_key, maybe_sent))
        if self.gate is not None:
            await self.gate.wait()
        for n, (when, error, times) in enumerate(self._refusals):
            if when(action):
                if times is not None:
                    self._refusals[n] = (when, error, times - 1)
                    if times <= 1:
                        del self._refusals[n]
                raise error
        self.sent.append(action)
        return f"m{len(self.sent)}"


@dataclass
class Bench:
    store: Store
    deliverer: Deliverer
    sender: RecordingSender
    clock: VirtualClock
    tmp_path: Path

    async def conversation(self, thread: str = "t") -> str:
        conversation_id = await self.store.threads.open_conversation(
            delivery_key=f"k-{thread}",
            binding=PlatformRef(platform="test", channel="c", thread=thread),
            requester=Person(id="u", name="alice"),
            workspace_root=self.tmp_path,
            position="executing",
        )
        assert conversation_id
        return conversation_id

    async def note(self, conversation_id: str, *texts: str) -> None:
        events = tuple(ProgressNote(text=t) for t in texts)
        await self.store.journal.commit(conversation_id, Change(events=events))

    async def answer(self, conversation_id: str, text: str) -> None:
        event = RunAnswered(text=text, stats=RunStats())
        await self.store.journal.commit(conversation_id, Change(events=(event,)))

    async def rows(self) -> list[tuple[int, str, str, int, str | None, str]]:
        """``(id, purpose, state, attempts, platform message id, text)`` of every row."""
        return [
            (r.id, r.purpose, r.state, r.attempts, r.platform_message_id, _action_text(r.action))
            for r in await self.store.outbox.rows()
        ]

    async def drain(self) -> None:
        await self.clock.run(self.deliverer.drain())


async def _equal(value: Awaitable[object], expected: object) -> bool:
    return await value == expected


def _action_text(action: OutboundAction) -> str:
    return str(getattr(action, "text", ""))


@pytest.fixture
async def make_bench(tmp_path: Path):
    made: list[Bench] = []

    async def factory(mode: str = "replies", **options: object) -> Bench:
        store = MemoryStore(render=render_event)
        sender = RecordingSender()
        clock = VirtualClock()
        deliverer = Deliverer(
            outbox=store.outbox,
            senders={"test": sender},
            progress_mode=mode,  # type: ignore[arg-type]
            note_interval=3.0,
            clock=clock,
            **options,  # type: ignore[arg-type]
        )
        store.on_outbox = deliverer.wake
        bench = Bench(store, deliverer, sender, clock, tmp_path)
        made.append(bench)
        return bench

    yield factory
    for bench in made:
        await bench.store.close()


@pytest.fixture
async def running():
    """Start ``deliverer.run()`` in a task; it is cancelled at the end of the test."""
    tasks: list[asyncio.Task[None]] = []

    def start(deliverer: Deliverer) -> asyncio.Task[None]:
        task = asyncio.create_task(deliverer.run())
        tasks.append(task)
        return task

    yield start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


# --- notes in replies ------------------------------------------------------------------


async def test_notes_are_held_for_their_interval_and_flushed_before_a_milestone(
    make_bench, running
) -> None:
    bench = await make_bench()
    cid = await bench.conversation()
    running(bench.deliverer)
    await bench.note(cid, "one")
    await wait_for(lambda: bench.sender.texts() == ["⏳ one"])
    first = bench.clock.now()

    await bench.note(cid, "two", "three")
    await bench.clock.until(lambda: len(bench.sender.sent) == 2)
    assert bench.sender.texts()[1] == "⏳ two\n⏳ three"
    assert bench.clock.now() >= first + 3.0  # one note reply per interval

    held = bench.clock.now()
    await bench.note(cid, "four")
    await bench.note(cid, "five")
    await bench.answer(cid, "Done.")
    await wait_for(lambda: len(bench.sender.sent) == 4)  # time stands still meanwhile
    assert bench.sender.texts()[2] == "⏳ four\n⏳ five"
    assert bench.sender.texts()[3].startswith("✅ Done.")
    assert bench.clock.now() == held


async def test_drain_flushes_held_notes_and_returns_only_when_nothing_is_pending(
    make_bench,
) -> None:
    bench = await make_bench()
    busy, quiet, late = [await bench.conversation(t) for t in ("a", "b", "c")]
    for n in range(250):  # more than one batch of rows
        await bench.answer(busy, f"busy {n}")
    await bench.note(quiet, "held one")
    await bench.answer(late, "late")
    bench.sender.refuse(DeliveryError("blip"), when=says("✅ late"), times=2)  # backs off twice

    await bench.drain()

    rows = await bench.rows()
    assert {state for _, _, state, *_ in rows} == {"sent"}
    assert len(bench.sender.sent) == 252
    busy_texts = [t.split("\n")[0] for t in bench.sender.texts() if "busy" in t]
    assert busy_texts == [f"✅ busy {n}" for n in range(250)]
    assert "⏳ held one" in bench.sender.texts()


async def test_drain_beside_run_waits_for_every_row(make_bench, running) -> None:
    bench = await make_bench()
    cid = await bench.conversation()
    running(bench.deliverer)
    bench.sender.refuse(RateLimited("slow down", retry_after=30), times=3)
    for n in range(5):
        await bench.answer(cid, f"answer {n}")

    await bench.drain()

    assert [t.split("\n")[0] for t in bench.sender.texts()] == [f"✅ answer {n}" for n in range(5)]
    assert {state for _, _, state, *_ in await bench.rows()} == {"sent"}


# --- failures, rate limits and reports -------------------------------------------------


async def test_a_failed_send_is_retried_after_a_backoff_and_keeps_the_order(make_bench) -> None:
    bench = await make_bench()
    cid = await bench.conversation()
    bench.sender.refuse(DeliveryError("platform said no"))
    await bench.answer(cid, "A")
    await bench.answer(cid, "B")
    started = bench.clock.now()

    await bench.drain()

    assert [t[:3] for t in bench.sender.texts()] == ["✅ A", "✅ B"]
    assert [(state, attempts) for _, _, state, attempts, *_ in await bench.rows()] == [
        ("sent", 1),
        ("sent", 0),
    ]
    assert bench.clock.now() >= started + 2.0  # waited its backoff


async def test_a_rate_limit_does_not_count_an_attempt(make_bench) -> None:
    bench = await make_bench(max_attempts=3)
    cid = await bench.conversation()
    bench.sender.refuse(RateLimited("ratelimited", retry_after=30), times=8)
    await bench.answer(cid, "Finally.")
    started = bench.clock.now()

    await bench.drain()

    assert bench.sender.texts()[0].startswith("✅ Finally.")
    assert len(bench.sender.calls) == 9
    [(_, _, state, attempts, message_id, _)] = await bench.rows()
    assert (state, attempts, message_id) == ("sent", 0, "m1")
    assert bench.clock.now() >= started + 8 * 30  # every Retry-After was waited out


async def test_an_adapter_not_connected_yet_costs_no_attempt(make_bench) -> None:
    """Restarts deliver what was pending before the platform login is done: those waits
    used to count as failed attempts, so a few restarts failed rows for good."""
    bench = await make_bench(max_attempts=2)
    cid = await bench.conversation()
    bench.sender.refuse(NotConnected("not logged in yet", retry_after=1.0), times=6)
    await bench.answer(cid, "After the login.")

    await bench.drain()

    assert bench.sender.texts()[0].startswith("✅ After the login.")
    [(_, _, state, attempts, _, _)] = await bench.rows()
    assert (state, attempts) == ("sent", 0)
    assert not any("could not post" in t for t in bench.sender.texts())


async def test_a_row_that_fails_for_good_is_reported_once_in_its_place_then_the_rest_go_out(
    make_bench,
) -> None:
    bench = await make_bench()
    cid = await bench.conversation()
    bench.sender.refuse(DeliveryError("msg_too_long", permanent=True), when=says("✅ BROKEN"))
    await bench.answer(cid, "first")
    await bench.answer(cid, "BROKEN answer")
    await bench.answer(cid, "third")

    await bench.drain()

    texts = bench.sender.texts()
    assert [t.split("\n")[0] for t in texts] == [
        "✅ first",
        "⚠️ I could not post a message here (“✅ BROKEN answer”): msg_too_long. "
        "Trying again cannot help, so I will not.",
        "✅ third",
    ]
    report = bench.sender.sent[1]
    assert isinstance(report, PostReply) and report.ref.thread == "t"
    rows = await bench.rows()
    assert [(purpose, state, attempts) for _, purpose, state, attempts, *_ in rows] == [
        ("answer", "sent", 0),
        ("answer", "failed", 1),
        ("answer", "sent", 0),
        ("report", "sent", 0),
    ]


async def test_a_row_is_failed_after_its_attempts_and_reported_once(make_bench) -> None:
    bench = await make_bench(max_attempts=3)
    cid = await bench.conversation()
    bench.sender.refuse(DeliveryError("timeout"), when=says("⏳ flaky"), times=None)
    await bench.note(cid, "flaky note")
    await bench.answer(cid, "after it")

    await bench.drain()

    assert [t.split("\n")[0] for t in bench.sender.texts()] == [
        "⚠️ I could not post a message here (“⏳ flaky note”): timeout. "
        "I tried 3 times and will not try again.",
        "✅ after it",
    ]
    states = [(purpose, state, attempts) for _, purpose, state, attempts, *_ in await bench.rows()]
    assert states == [("note", "failed", 3), ("answer", "sent", 0), ("report", "sent", 0)]


async def test_a_report_that_fails_too_is_logged_and_never_reported(make_bench, caplog) -> None:
    bench = await make_bench()
    cid = await bench.conversation()
    bench.sender.refuse(DeliveryError("channel_not_found", permanent=True), times=None)
    await bench.answer(cid, "nobody will see this")

    with caplog.at_level(logging.ERROR, logger="conversations.outbox"):
        await bench.drain()

    assert bench.sender.sent == []
    rows = await bench.rows()
    assert [(purpose, state) for _, purpose, state, *_ in rows] == [
        ("answer", "failed"),
        ("report", "failed"),
    ]
    assert "could not tell thread t about a failure" in caplog.text


async def test_an_adapter_bug_is_a_counted_failure_of_its_row(make_bench) -> None:
    bench = await make_bench()
    cid = await bench.conversation()
    bench.sender.refuse(ValueError("adapter bug"))
    await bench.answer(cid, "still delivered")

    await bench.drain()

    [(_, _, state, attempts, _, _)] = await bench.rows()
    assert (state, attempts) == ("sent", 1)


async def test_an_adapter_bug_is_reported_in_words_never_as_its_repr(make_bench) -> None:
    """A Slack 5xx page once made the Slack sender raise an ``AttributeError``, and its
    repr went into the thread; whatever an adapter raises, the thread gets words."""
    bench = await make_bench(max_attempts=2)
    cid = await bench.conversation()
    bug = AttributeError("'str' object has no attribute 'get'")
    bench.sender.refuse(bug, when=says("✅"), times=None)
    await bench.answer(cid, "never delivered")

    await bench.drain()

    assert [t.split("\n")[0] for t in bench.sender.texts()] == [
        "⚠️ I could not post a message here (“✅ never delivered”): an unexpected error "
        "inside the bot (details in its log). I tried 2 times and will not try again."
    ]


# --- status mode -----------------------------------------------------------------------


async def test_a_rate_limited_status_edit_waits_and_still_shows_every_note(
    make_bench, running
) -> None:
    bench = await make_bench("status")
    cid = await bench.conversation()
    running(bench.deliverer)
    await bench.note(cid, "first")
    await wait_for(lambda: bench.sender.texts() == ["⏳ first"])
    bench.sender.refuse(RateLimited("ratelimited", retry_after=30), when=is_update, times=None)

    await bench.note(cid, "second")
    await bench.note(cid, "third")
    await bench.answer(cid, "All done.")

    async def pending() -> list[str]:
        return [text for _, _, state, _, _, text in await bench.rows() if state == "pending"]

    # The answer does not wait for the edit; the notes are not marked sent: not shown yet.
    await wait_for(lambda: _equal(pending(), ["⏳ second", "⏳ third"]))
    assert bench.sender.texts()[1].startswith("✅ All done.")
    assert len(bench.sender.sent) == 2

    bench.sender.stop_refusing()
    await bench.drain()

    edit = bench.sender.sent[-1]
    assert isinstance(edit, UpdateMessage) and edit.ref.message == "m1"
    assert edit.text == "⏳ first\n⏳ second\n⏳ third"
    rows = await bench.rows()
    assert [(state, attempts) for _, _, state, attempts, *_ in rows] == [("sent", 0)] * 4
    assert [message_id for *_, message_id, _ in rows] == ["m1", "m1", "m1", "m2"]


async def test_a_milestone_starts_a_new_status_reply(make_bench) -> None:
    bench = await make_bench("status")
    cid = await bench.conversation()
    await bench.note(cid, "one")
    await bench.drain()
    await bench.note(cid, "two")
    await bench.answer(cid, "Question?")
    await bench.note(cid, "three")

    await bench.drain()

    assert [(type(a).__name__, a.text.split("\n")[0]) for a in bench.sender.sent] == [
        ("PostReply", "⏳ one"),
        ("UpdateMessage", "⏳ one"),
        ("PostReply", "✅ Question?"),
        ("PostReply", "⏳ three"),
    ]
    assert bench.sender.sent[1].text == "⏳ one\n⏳ two"


async def test_a_session_status_goes_out_in_its_place_and_leaves_the_status_reply_open(
    make_bench,
) -> None:
    bench = await make_bench("status")
    cid = await bench.conversation()
    await bench.note(cid, "one")
    await bench.drain()
    await bench.note(cid, "two")
    status = SetSessionStatus(
        ref=PlatformRef(platform="test", channel="c", thread="t"), status="suspended"
    )
    await bench.store.outbox.enqueue(cid, [Outgoing(status, purpose=SESSION)])
    await bench.note(cid, "three")

    await bench.drain()

    assert [type(a).__name__ for a in bench.sender.sent] == [
        "PostReply",
        "UpdateMessage",
        "SetSessionStatus",
        "UpdateMessage",
    ]
    assert bench.sender.sent[1].text == "⏳ one\n⏳ two"  # the notes before it, first
    assert bench.sender.sent[3].text == "⏳ one\n⏳ two\n⏳ three"  # the same reply


async def test_a_full_status_reply_rolls_over_instead_of_dropping_lines(make_bench) -> None:
    bench = await make_bench("status")
    cid = await bench.conversation()
    notes = [f"step {n:02d}: " + "x" * 60 for n in range(80)]
    for note in notes:
        await bench.note(cid, note)

    await bench.drain()

    shown: dict[str, str] = {}
    for n, action in enumerate(bench.sender.sent, start=1):
        key = action.ref.message if isinstance(action, UpdateMessage) else f"m{n}"
        assert key is not None and len(action.text) <= STATUS_MAX_CHARS
        shown[key] = action.text
    assert len(shown) >= 3
    assert "\n".join(shown.values()).split("\n") == [f"⏳ {note}" for note in notes]


async def test_a_status_edit_refused_for_good_posts_the_lines_again(make_bench) -> None:
    bench = await make_bench("status")
    cid = await bench.conversation()
    await bench.note(cid, "one")
    await bench.drain()
    bench.sender.refuse(DeliveryError("message_not_found", permanent=True), when=is_update)
    await bench.note(cid, "two")

    await bench.drain()

    assert [(type(a).__name__, a.text) for a in bench.sender.sent] == [
        ("PostReply", "⏳ one"),
        ("PostReply", "⏳ one\n⏳ two"),
    ]
    assert [state for _, _, state, *_ in await bench.rows()] == ["sent", "sent"]


# --- the dispatcher --------------------------------------------------------------------


async def test_a_store_error_ends_run_and_run_goes_on_when_called_again(
    make_bench, monkeypatch
) -> None:
    bench = await make_bench()
    cid = await bench.conversation()
    real = bench.store.outbox.mark_sent
    calls = 0

    async def broken_once(ids, message_id, **known):
        nonlocal calls
        calls += 1
        if calls == 1:
            raise OSError("disk I/O error")
        await real(ids, message_id, **known)

    monkeypatch.setattr(bench.store.outbox, "mark_sent", broken_once)
    await bench.answer(cid, "posted, then the store failed")

    with pytest.raises(OSError, match="disk I/O error"):
        await bench.clock.run(bench.deliverer.run())

    task = asyncio.create_task(bench.deliverer.run())
    try:
        await bench.drain()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert [maybe_sent for *_, maybe_sent in bench.sender.calls][-1] is True  # looked for first
    assert [state for _, _, state, *_ in await bench.rows()] == ["sent"]


async def test_at_most_concurrency_conversations_are_sent_to_at_once(make_bench, running) -> None:
    bench = await make_bench(concurrency=2)
    for thread in "abcde":
        await bench.answer(await bench.conversation(thread), f"answer {thread}")
    bench.sender.gate = asyncio.Event()
    running(bench.deliverer)

    await wait_for(lambda: len(bench.sender.calls) == 2)
    pass_over = asyncio.create_task(bench.deliverer.pass_over())
    await asyncio.sleep(0)
    assert not pass_over.done()  # two sends are in flight, their ids not stored
    bench.sender.gate.set()
    await pass_over
    await bench.drain()

    assert len(bench.sender.sent) == 5
    assert sorted(t.split("\n")[0] for t in bench.sender.texts()) == [
        f"✅ answer {t}" for t in "abcde"
    ]


async def test_enqueued_notices_go_out_like_run_events(make_bench) -> None:
    bench = await make_bench()
    cid = await bench.conversation()
    notice = PostReply(ref=PlatformRef(platform="test", channel="c", thread="t"), text="notice")
    await bench.store.outbox.enqueue(cid, [Outgoing(notice)])

    await bench.drain()

    assert bench.sender.texts() == ["notice"]
