"""The deliverer: order, note batching, status edits refused for rate limits, retries."""

from __future__ import annotations

from pathlib import Path

from conversations import migrate
from conversations.errors import DeliveryError, RateLimited
from conversations.events import OutboundAction, PlatformRef, PostReply, UpdateMessage
from conversations.outbox import Deliverer
from conversations.render import render_event
from conversations.store import Store
from conversations.store.store import create_engine
from core.journal import Change, Person
from core.run_events import Answered, ProgressNote, RunStats


class RecordingSender:
    """A platform that records what it was sent and refuses on demand."""

    platform = "test"

    def __init__(self) -> None:
        self.sent: list[OutboundAction] = []
        self.refuse_updates = False
        self.refuse_next: int = 0

    async def send(
        self, action: OutboundAction, *, idempotency_key: str, maybe_sent: bool = False
    ) -> str | None:
        if isinstance(action, UpdateMessage) and self.refuse_updates:
            raise RateLimited("ratelimited", retry_after=30)
        if self.refuse_next:
            self.refuse_next -= 1
            raise DeliveryError("platform said no")
        self.sent.append(action)
        return f"m{len(self.sent)}"


async def setup(
    tmp_path: Path, mode: str, now: list[float] | None = None
) -> tuple[Store, Deliverer, RecordingSender, str]:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    await migrate.upgrade(engine)
    store = Store(engine=engine, render=render_event)
    sender = RecordingSender()
    now = now if now is not None else [0.0]
    deliverer = Deliverer(
        store=store,
        senders={"test": sender},
        progress_mode=mode,  # type: ignore[arg-type]
        note_interval=3.0,
        clock=lambda: now[0],
    )
    conversation_id = await store.open_conversation(
        delivery_key="k",
        binding=PlatformRef(platform="test", channel="c", thread="t"),
        requester=Person(id="u", name="alice"),
        workspace_root=tmp_path,
        position="planning",
    )
    assert conversation_id
    return store, deliverer, sender, conversation_id


async def test_a_refused_status_edit_does_not_hold_back_the_answer(tmp_path: Path) -> None:
    store, deliverer, sender, cid = await setup(tmp_path, "status")
    await store.commit(cid, Change(events=(ProgressNote(text="first"),)))
    await deliverer.drain()
    sender.refuse_updates = True
    await store.commit(cid, Change(events=(ProgressNote(text="second"),)))
    await store.commit(
        cid,
        Change(events=(ProgressNote(text="third"), Answered(text="All done.", stats=RunStats()))),
    )

    await deliverer.deliver_once()

    texts = [a.text for a in sender.sent]
    assert texts[0] == "⏳ first"
    assert texts[-1].startswith("✅ All done.")
    assert not [a for a in sender.sent if isinstance(a, UpdateMessage)]
    assert await store.pending_sends() == []
    await store.close()


async def test_notes_are_batched_and_flushed_before_a_milestone(tmp_path: Path) -> None:
    store, deliverer, sender, cid = await setup(tmp_path, "replies")
    await store.commit(cid, Change(events=(ProgressNote(text="one"),)))
    await deliverer.deliver_once()
    await store.commit(cid, Change(events=(ProgressNote(text="two"), ProgressNote(text="three"))))
    assert await deliverer.deliver_once() == 3.0  # held back: the last note reply was just now
    await store.commit(cid, Change(events=(Answered(text="Done.", stats=RunStats()),)))
    await deliverer.deliver_once()

    assert [a.text for a in sender.sent][:2] == ["⏳ one", "⏳ two\n⏳ three"]
    assert sender.sent[2].text.startswith("✅ Done.")
    await store.close()


async def test_a_failed_send_is_retried_and_keeps_the_order(tmp_path: Path) -> None:
    clock = [0.0]
    store, deliverer, sender, cid = await setup(tmp_path, "replies", clock)
    sender.refuse_next = 1
    await store.commit(cid, Change(events=(Answered(text="A", stats=RunStats()),)))
    await store.commit(cid, Change(events=(Answered(text="B", stats=RunStats()),)))
    delay = await deliverer.deliver_once()
    assert sender.sent == [] and delay is not None
    clock[0] += delay  # the backoff has passed
    await deliverer.deliver_once()
    assert [a.text[:3] for a in sender.sent] == ["✅ A", "✅ B"]
    assert isinstance(sender.sent[0], PostReply)
    await store.close()
