"""Old outbox rows and deliveries are pruned; a request's message still finds its request.

Issue 10, last point: sent outbox rows and handled deliveries go after the
retention time (``THREADBOT_RETENTION_DAYS``, on the sweeper's clock), the
journal, tool records and requests stay, and a reaction on an old plan message
still reaches its request through the link kept on the request. A duplicate
delivery inside the retention is still refused, and migration 0005 copies the
link of an older database onto its requests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy import text as sql

from bot.app import App
from bot.settings import Settings
from conversations.events import Author, MessagePosted, PlatformRef, PostReply, inbound_adapter
from conversations.render import CLOSED, render_event
from conversations.store import Outgoing, Pruned, Store, migrate
from conversations.store.sql import SqlStore, create_engine
from conversations.sweeper import Sweeper
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary import lifecycle
from core.vocabulary.journal import Change, RequestResolution
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.people import Person
from core.vocabulary.requests import PlanApproval, RequestState
from core.vocabulary.verdicts import Approved
from tests.harness import Chat
from tests.slack_harness import ALICE as SLACK_ALICE
from tests.slack_harness import BOT_USER_ID, CHANNEL, slack_workspace
from tests.test_slack_story import finish

ALICE = Person(id="U0ALICE001", name="alice")
THREAD = PlatformRef(platform="slack", workspace="T1", channel="C1", thread="1.0")


class Clock:
    """The sweeper's clock, set by the test."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def settings(sqlite_settings: Settings) -> Settings:
    """SQLite: pruning is SQL, and these tests read and change its tables."""
    return sqlite_settings


def sweeper_of(app: App, clock: Clock) -> Sweeper:
    """A sweeper of its own on ``app``'s store (the app's own one sweeps on the real clock)."""
    return Sweeper(
        requests=app.store.requests,
        pruning=app.store.retention,
        engine=app.engine,
        expire=app.hub.expire,
        clock=clock,
    )


async def rows(engine: Any, query: str) -> list[tuple[Any, ...]]:
    async with engine.connect() as conn:
        return [tuple(r) for r in (await conn.execute(sql(query))).all()]


async def kept_forever(store: Store) -> list[list[tuple[Any, ...]]]:
    """Every row of the tables pruning never touches."""
    tables = ("conversations", "journal", "tool_calls", "pending_requests", "model_calls")
    return [await rows(store.engine, f"select * from {t} order by 1, 2") for t in tables]


# --- the store: what goes and what stays -------------------------------------------------


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    """A migrated store with no deliverer: rows stay pending until the test settles them."""
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'retention.db'}")
    await migrate.upgrade(engine)
    store = SqlStore(engine=engine, render=render_event)
    yield store
    await store.close()


def posted(text: str, request_id: str | None = None, purpose: str = "milestone") -> Outgoing:
    return Outgoing(PostReply(ref=THREAD, text=text), purpose=purpose, request_id=request_id)


def kept_event(key: str) -> dict[str, Any]:
    message = MessagePosted(
        delivery_key=key,
        ref=THREAD.model_copy(update={"message": "1.5"}),
        author=Author(id=ALICE.id, name=ALICE.name),
        text="and the staging database too",
    )
    return inbound_adapter.dump_python(message, mode="json")


async def row_ids(store: Store, cid: str) -> dict[str, int]:
    """``{text: id}`` of the conversation's pending rows."""
    return {p.action.text: p.id for p in await store.outbox.pending_rows(cid)}  # type: ignore[union-attr]


async def request(store: Store, cid: str, request_id: str, *, closed: bool) -> None:
    opened = PlanApproval(id=request_id, tool_use_id="toolu_plan", plan_version=1)
    await store.journal.commit(cid, Change(open_request=opened))
    if closed:
        decided = RequestResolution(
            request_id=request_id, state=RequestState.DECIDED, verdict=Approved(), by=ALICE
        )
        await store.journal.commit(cid, Change(resolve=(decided,), status=lifecycle.RUNNING))


async def test_settled_rows_and_handled_deliveries_go_and_everything_else_stays(
    store: Store,
) -> None:
    cid = await store.threads.open_conversation(
        delivery_key="slack:T1:C1:1.0",
        binding=THREAD,
        requester=ALICE,
        workspace_root=Path("workspaces"),
        position="planning",
        event=kept_event("slack:T1:C1:1.0"),
    )
    assert cid is not None
    await store.journal.commit(cid, Change(handled=("slack:T1:C1:1.0",)))  # its effect is journaled
    assert await store.inbox.record_delivery("slack:event:Ev0REACTION")  # kept for dedupe only
    assert await store.inbox.record_delivery("slack:T1:C1:1.5", cid, kept_event("slack:T1:C1:1.5"))
    await request(store, cid, "open", closed=False)
    await request(store, cid, "decided", closed=True)
    await request(store, cid, "edit-waiting", closed=True)
    await store.outbox.enqueue(
        cid,
        [
            posted("note", purpose="note"),
            posted("plan, open", "open"),
            posted("plan, decided", "decided"),
            posted("plan, edit waiting", "edit-waiting"),
            posted("failed"),
            posted("dropped"),
            posted("still pending"),
            posted("edit of the plan", "edit-waiting", purpose=CLOSED),
            posted("newest"),
        ],
    )
    ids = await row_ids(store, cid)
    for n, text in enumerate(["note", "plan, open", "plan, decided", "plan, edit waiting"]):
        await store.outbox.mark_sent([ids[text]], f"1.{n + 10}")
    await store.outbox.fail_for_good(cid, [ids["failed"]], "channel_not_found")
    await store.outbox.settle_unsent([ids["dropped"]], "nothing to edit")
    await store.outbox.mark_sent([ids["newest"]], "1.20")
    before = await kept_forever(store)

    assert await store.retention.prune(datetime.now(UTC) - timedelta(days=1)) == Pruned(0, 0)
    pruned = await store.retention.prune(datetime.now(UTC) + timedelta(seconds=1), batch=2)

    assert pruned == Pruned(outbox=4, deliveries=2)
    left = await rows(store.engine, "select action, state from outbox order by id")
    assert [(action_text(a), state) for a, state in left] == [
        ("plan, open", "sent"),  # its request is open
        ("plan, edit waiting", "sent"),  # its closing edit still reads it
        ("still pending", "pending"),
        ("edit of the plan", "pending"),
        ("newest", "sent"),  # the newest row stays, so SQLite never reuses an id
    ]
    assert await rows(store.engine, "select key, handled_at from deliveries") == [
        ("slack:T1:C1:1.5", None)  # unhandled: the durable inbox keeps it
    ]
    assert await kept_forever(store) == before
    assert await store.inbox.record_delivery("slack:event:Ev0REACTION")  # gone with the retention


def action_text(action: Any) -> str:
    import json

    data = json.loads(action) if isinstance(action, str) else action
    return str(data["text"])


async def test_the_request_post_links_its_message_to_the_request_and_nothing_else_does(
    store: Store,
) -> None:
    cid = await store.threads.open_conversation(
        delivery_key="k", binding=THREAD, requester=ALICE, workspace_root=Path("w"), position="p"
    )
    assert cid is not None
    await request(store, cid, "plan", closed=False)
    await store.outbox.enqueue(
        cid,
        [
            posted("plan", "plan"),
            posted("note", purpose="note"),
            posted("edit of the plan", "plan", purpose=CLOSED),
        ],
    )
    ids = await row_ids(store, cid)
    await store.outbox.mark_sent([ids["plan"]], "1.10")
    await store.outbox.mark_sent([ids["note"]], "1.11")
    await store.outbox.mark_sent([ids["edit of the plan"]], "1.99")  # an edit names another id

    links = "select message_platform, message_channel, message_id from pending_requests"
    assert await rows(store.engine, links) == [("slack", "C1", "1.10")]
    async with store.engine.begin() as conn:
        await conn.execute(sql("delete from outbox where id = :id"), {"id": ids["plan"]})

    link = await store.threads.find_by_message("slack", "C1", "1.10")
    assert link is not None and (link.conversation_id, link.request_id) == (cid, "plan")
    note = await store.threads.find_by_message("slack", "C1", "1.11")  # a note: through its row
    assert note is not None and (note.conversation_id, note.request_id) == (cid, None)
    assert await store.threads.find_by_message("slack", "C2", "1.10") is None
    async with store.engine.begin() as conn:
        await conn.execute(sql("delete from outbox"))
    assert (
        await store.threads.find_by_message("slack", "C1", "1.11") is None
    )  # a pruned note: nothing
    assert await store.threads.find_by_message("slack", "C1", "1.10") is not None


# --- the sweeper, a story in the console -------------------------------------------------


def plan() -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Write it", "Report"]})])


def done() -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Done."})])


async def test_old_rows_go_on_the_sweepers_clock_and_old_messages_stay_harmless(
    settings: Settings, make_app
) -> None:
    settings.request_ttl = 30 * 24 * 3600.0  # the second plan waits past the retention
    write = ScriptedTurn(calls=[ScriptedCall("write_file", {"path": "a.md", "content": "x"})])
    app = await make_app(ScriptedModel([plan(), write, done(), plan()]))
    chat = Chat(app)
    await app.start()
    await chat.mention("write a.md")
    first_plan = chat.bot_message("📋 Plan (v1)")
    await chat.react(first_plan)
    await app.hub.settled()
    note = chat.bot_message("⏳", nth=0)
    assert (await chat.snapshot()).status.lifecycle is Lifecycle.DONE
    await chat.mention("and another one")  # left waiting: its plan's request stays open
    waiting = await chat.snapshot()
    await app.store.inbox.record_delivery("console:unhandled", waiting.id, kept_event("x"))
    now = datetime.now(UTC)
    clock = Clock(now + timedelta(days=6, hours=23))
    sweeper = sweeper_of(app, clock)
    outbox = "select conversation_id, request_id, state from outbox order by id"
    before = (await rows(app.store.engine, outbox), await kept_forever(app.store))

    assert await sweeper.sweep_once() == 0  # inside the retention: nothing goes
    assert (await rows(app.store.engine, outbox), await kept_forever(app.store)) == before
    clock.now = now + timedelta(days=8)
    await sweeper.sweep_once()

    left = await rows(app.store.engine, outbox)
    assert left == [(waiting.id, waiting.requests[0].id, "sent")]  # the open plan's post
    assert await rows(app.store.engine, "select key from deliveries") == [("console:unhandled",)]
    assert await kept_forever(app.store) == before[1]

    # The old plan still finds its request (decided), the old note finds nothing.
    said = len(chat.said())
    await chat.react(first_plan, "white_check_mark")
    await chat.react(note, "octagonal_sign")
    await chat.react(first_plan, "heavy_check_mark")
    await app.hub.settled()
    assert chat.said()[said:] == ["This was already decided, alice."] * 2
    assert (await chat.snapshot()).requests[0].state is RequestState.OPEN

    # At most once an hour: half an hour on, the two notices stay; past the hour the
    # first goes (the second is the newest row).
    notices = await rows(app.store.engine, outbox)
    clock.now = now + timedelta(days=8, minutes=30)
    await sweeper.sweep_once()
    assert await rows(app.store.engine, outbox) == notices
    clock.now = now + timedelta(days=8, hours=1)
    await sweeper.sweep_once()
    assert await rows(app.store.engine, outbox) == [notices[0], notices[-1]]


async def test_a_reaction_on_a_plan_whose_outbox_rows_are_gone_still_approves_it(
    make_app,
) -> None:
    app = await make_app(ScriptedModel([plan(), done()]))
    chat = Chat(app)
    await app.start()
    await chat.mention("write a.md")
    plan_message = chat.bot_message("📋 Plan (v1)")
    async with app.store.engine.begin() as conn:
        await conn.execute(sql("delete from outbox"))

    await chat.react(plan_message)
    await app.hub.settled()

    snap = await chat.snapshot()
    assert snap.requests[0].state is RequestState.DECIDED
    assert snap.requests[0].decided_by == Person(id="console:alice", name="alice")
    assert snap.status.lifecycle is Lifecycle.DONE
    assert chat.said()[-1].startswith("✅ Done.")


# --- Slack: a retry inside the retention is still a duplicate ----------------------------


async def test_a_duplicate_delivery_inside_the_retention_is_still_refused(settings) -> None:
    model = ScriptedModel([plan(), finish("Done once.")])
    async with slack_workspace(settings, model) as ws:
        said = f"<@{BOT_USER_ID}> please write a.md"
        root = str(ws.api.add_message(CHANNEL, said, user=SLACK_ALICE)["ts"])
        mention = ws.mention_body(root, said)
        await ws.deliver("events_api", mention)
        await ws.settle()
        approval = ws.reaction_body(ws.post(root, "📋 Plan (v1)")["ts"], "white_check_mark")
        await ws.deliver("events_api", approval)
        await ws.settle()
        assert ws.post(root, "Done once.")
        calls, keys = len(ws.calls()), await rows(ws.app.store.engine, "select key from deliveries")
        now = datetime.now(UTC)
        clock = Clock(now + timedelta(days=6, hours=23))

        await sweeper_of(ws.app, clock).sweep_once()
        await ws.deliver("events_api", mention, retry=1)
        await ws.deliver("events_api", approval, retry=1)
        await ws.settle()

        assert len(ws.calls()) == calls  # no second plan, no "already decided"
        assert len(await ws.conversation_ids()) == 1
        assert len(model.requests) == 2
        assert await rows(ws.app.store.engine, "select key from deliveries") == keys
        clock.now = now + timedelta(days=8)
        await sweeper_of(ws.app, clock).sweep_once()
        assert await rows(ws.app.store.engine, "select key from deliveries") == []


# --- migration 0005 copies the link ------------------------------------------------------


async def test_the_migration_copies_a_sent_plans_message_onto_its_request(tmp_path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'old.db'}")
    await migrate.upgrade(engine, "0004")
    at = "2026-01-01 10:00:00.000000"
    async with engine.begin() as conn:
        await conn.execute(
            sql(
                "insert into conversations (id, platform, workspace, channel, thread, "
                "requester_id, requester_name, lifecycle, position, plan_version, "
                "workspace_dir, created_at, updated_at) values ('c1', 'slack', 'T1', 'C1', "
                "'1.0', 'U1', 'alice', 'waiting', 'approval', 2, 'w', :at, :at)"
            ),
            {"at": at},
        )
        for request_id, state in (("sent", "superseded"), ("unsent", "open")):
            await conn.execute(
                sql(
                    "insert into pending_requests (id, conversation_id, kind, state, prompt, "
                    "created_at) values (:id, 'c1', 'plan_approval', :state, '', :at)"
                ),
                {"id": request_id, "state": state, "at": at},
            )
        for request_id, purpose, state, message in (
            ("sent", "milestone", "sent", "1.10"),
            (None, "note", "sent", "1.11"),
            ("sent", "closed", "sent", "1.10"),
            ("unsent", "milestone", "failed", None),
        ):
            await conn.execute(
                sql(
                    "insert into outbox (conversation_id, request_id, purpose, platform, "
                    "channel, action, state, platform_message_id, attempts, created_at) "
                    "values ('c1', :r, :p, 'slack', 'C1', '{}', :s, :m, 0, :at)"
                ),
                {"r": request_id, "p": purpose, "s": state, "m": message, "at": at},
            )

    await migrate.upgrade(engine)

    links = await rows(
        engine,
        "select id, message_platform, message_channel, message_id from pending_requests "
        "order by id",
    )
    assert links == [("sent", "slack", "C1", "1.10"), ("unsent", None, None, None)]
    store = SqlStore(engine=engine, render=render_event)
    async with engine.begin() as conn:
        await conn.execute(sql("delete from outbox"))
    link = await store.threads.find_by_message("slack", "C1", "1.10")
    assert link is not None and (link.conversation_id, link.request_id) == ("c1", "sent")
    await store.close()


# --- the setting -------------------------------------------------------------------------


async def test_the_retention_is_a_setting_of_days_wired_to_the_sweeper(
    settings: Settings, make_app
) -> None:
    assert settings.retention_days == 7
    with pytest.raises(ValidationError, match="retention_days"):
        Settings(retention_days=0)
    settings.retention_days = 0.5
    app = await make_app(ScriptedModel([]))
    assert app.sweeper.retention == timedelta(hours=12)
