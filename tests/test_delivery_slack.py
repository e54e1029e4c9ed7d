"""Nothing lost under Slack's rate limits: the deliverer with the real slack-sdk against the fake.

Issue 8, acceptance 2, 6 and 7. The deliverer and the fake Slack share a
:class:`VirtualClock`: a ``Retry-After``, a 45 s window of 429s or a note interval
passes only when the test lets virtual time run, so each test shows by order what
was delivered while another conversation, or the same one, was still waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from adapters.slack.runner import SlackAdapter, SlackConfig
from bot.app import build
from bot.settings import Settings
from conversations.errors import DeliveryError, RateLimited
from conversations.events import PlatformRef, PostReply, UpdateMessage
from conversations.outbox import Deliverer
from conversations.render import render_event
from conversations.store import Store
from conversations.store.memory import MemoryStore
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.journal import Change
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.people import Person
from core.vocabulary.run_events import PlanProposed, ProgressNote, RunAnswered, RunStats
from tests.conftest import wait_for
from tests.fakes.clock import VirtualClock
from tests.fakes.slack_api import BOT_USER_ID, TEAM_ID, FakeSlackApi, RecordedCall
from tests.slack_harness import CHANNEL, SECRET, WAIT, Workspace

STORMY = "C0STORMY01"
CALM = "C0CALM0001"


@dataclass
class SlackDelivery:
    """A store, the real deliverer and a real :class:`SlackAdapter` against the fake."""

    api: FakeSlackApi
    store: Store
    deliverer: Deliverer
    clock: VirtualClock
    tmp_path: Path

    async def conversation(self, channel: str) -> tuple[str, str]:
        """A thread in ``channel`` bound to a new conversation: ``(conversation id, root ts)``."""
        root = str(self.api.add_message(channel, f"<@{BOT_USER_ID}> please help")["ts"])
        binding = PlatformRef(platform="slack", workspace=TEAM_ID, channel=channel, thread=root)
        conversation_id = await self.store.threads.open_conversation(
            delivery_key=f"slack:{channel}:{root}",
            binding=binding,
            requester=Person(id="U0ALICE001", name="alice"),
            workspace_root=self.tmp_path / "workspaces",
            position="executing",
        )
        assert conversation_id
        return conversation_id, root

    async def rows(self) -> list[tuple[str, str, int, str | None]]:
        """``(purpose, state, attempts, platform message id)`` of every outbox row."""
        rows = await self.store.outbox.rows()
        return [(r.purpose, r.state, r.attempts, r.platform_message_id) for r in rows]


@contextlib.asynccontextmanager
async def slack_delivery(tmp_path: Path, **options: object) -> AsyncIterator[SlackDelivery]:
    """The deliverer running (``run()``) with ``options``, and everything closed after."""
    clock = VirtualClock()
    async with FakeSlackApi(clock=clock) as api:
        store = MemoryStore(render=render_event)
        adapter = SlackAdapter(SlackConfig(bot_token="xoxb-test", api_url=api.base_url))
        deliverer = Deliverer(
            outbox=store.outbox,
            senders={"slack": adapter},
            clock=clock,
            **options,  # type: ignore[arg-type]
        )
        store.on_outbox = deliverer.wake
        task = asyncio.create_task(deliverer.run(), name="deliverer")
        try:
            yield SlackDelivery(api, store, deliverer, clock, tmp_path)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await store.close()


def answered(text: str) -> RunAnswered:
    return RunAnswered(text=text, stats=RunStats())


def first_lines(texts: list[str]) -> list[str]:
    return [text.split("\n— ")[0] for text in texts]


def refused(call: RecordedCall) -> bool:
    return call.status == 429


# --- acceptance 2: a storm of 429s on one conversation ---------------------------------


async def test_a_storm_of_429s_loses_nothing_counts_nothing_and_holds_up_no_other_thread(
    tmp_path: Path,
) -> None:
    async with slack_delivery(tmp_path, note_interval=3.0) as slack:
        api = slack.api
        stormy, stormy_root = await slack.conversation(STORMY)
        calm, calm_root = await slack.conversation(CALM)
        api.rate_limit("chat.postMessage", times=3, retry_after=1, channel=STORMY)
        api.rate_limit("chat.postMessage", times=37, retry_after=0, channel=STORMY)

        events = (
            ProgressNote(text="reading the CI logs"),
            ProgressNote(text="found the shared session fixture"),
            ProgressNote(text="gave each test its own session"),
            answered("The login test is fixed."),
            ProgressNote(text="ran the suite twice more"),
            answered("Both runs passed."),
        )
        await slack.store.journal.commit(stormy, Change(events=events))
        await wait_for(lambda: any(refused(c) for c in api.calls_of("chat.postMessage")))
        await slack.store.journal.commit(calm, Change(events=(answered("Unrelated, and done."),)))
        await wait_for(lambda: api.posted_texts(CALM, calm_root) != [])
        assert api.posted_texts(STORMY) == []  # still waiting out its first Retry-After

        await slack.clock.run(slack.deliverer.drain())

        assert first_lines(api.posted_texts(STORMY, stormy_root)) == [
            "⏳ reading the CI logs\n⏳ found the shared session fixture\n"
            "⏳ gave each test its own session",
            "✅ The login test is fixed.",
            "⏳ ran the suite twice more",
            "✅ Both runs passed.",
        ]
        posts = [c for c in api.calls_of("chat.postMessage") if c.args["channel"] == STORMY]
        assert [refused(c) for c in posts] == [True] * 40 + [False] * 4  # 40 in a row
        calm_post = next(c for c in api.calls_of("chat.postMessage") if c.args["channel"] == CALM)
        assert calm_post.seq < posts[40].seq  # delivered while the storm went on
        assert first_lines(api.posted_texts(CALM, calm_root)) == ["✅ Unrelated, and done."]
        rows = await slack.rows()
        assert [(state, attempts) for _, state, attempts, _ in rows] == [("sent", 0)] * 7
        assert all(message_id for *_, message_id in rows)


# --- acceptance 7: held notes never hold back another conversation ----------------------


async def test_held_notes_of_one_thread_never_hold_back_a_plan_in_another(tmp_path: Path) -> None:
    async with slack_delivery(tmp_path, note_interval=30.0) as slack:
        api = slack.api
        busy, busy_root = await slack.conversation(CHANNEL)
        planning, planning_root = await slack.conversation(CHANNEL)
        await slack.store.journal.commit(busy, Change(events=(ProgressNote(text="warming up"),)))
        await wait_for(lambda: api.posted_texts(CHANNEL, busy_root) == ["⏳ warming up"])
        started = slack.clock.now()

        for n in range(150):  # each held back: the last note reply was just now
            await slack.store.journal.commit(busy, Change(events=(ProgressNote(text=f"note {n}"),)))
        plan = PlanProposed(request_id="req-plan-1", version=1, steps=("Reproduce", "Fix"))
        await slack.store.journal.commit(planning, Change(events=(plan,)))
        await wait_for(lambda: api.posted_texts(CHANNEL, planning_root) != [])

        assert api.posted_texts(CHANNEL, planning_root)[0].startswith("📋 Plan (v1)")
        assert api.posted_texts(CHANNEL, busy_root) == ["⏳ warming up"]  # the notes still wait
        assert slack.clock.now() == started  # their interval has not ended

        await slack.clock.run(slack.deliverer.drain())

        busy_texts = api.posted_texts(CHANNEL, busy_root)
        assert "\n".join(busy_texts[1:]).split("\n") == [f"⏳ note {n}" for n in range(150)]
        posts = api.calls_of("chat.postMessage")
        plan_post = next(c for c in posts if c.args["text"].startswith("📋"))
        notes_post = next(c for c in posts if c.args["text"].startswith("⏳ note 0"))
        assert plan_post.seq < notes_post.seq


# --- acceptance 6: the status line through 45 s of 429s ---------------------------------


@contextlib.asynccontextmanager
async def clocked_workspace(
    settings: Settings, model: ScriptedModel, clock: VirtualClock
) -> AsyncIterator[Workspace]:
    """The bot on Slack over HTTP (as :func:`tests.slack_harness.slack_workspace`), whose
    deliverer and fake Slack share ``clock``."""
    async with contextlib.AsyncExitStack() as stack:
        api = await stack.enter_async_context(FakeSlackApi(clock=clock))
        http = await stack.enter_async_context(aiohttp.ClientSession())
        app = await build(settings, model=model, clock=clock)
        stack.push_async_callback(app.close)
        adapter = SlackAdapter(
            SlackConfig(
                bot_token="xoxb-test",
                signing_secret=SECRET,
                api_url=api.base_url,
                host="127.0.0.1",
                port=0,
                stop_command=settings.stop_command,
            )
        )
        app.add_sender(adapter)
        await app.start()
        stack.push_async_callback(adapter.close)
        await asyncio.wait_for(adapter.start(app.hub), WAIT)
        yield Workspace(transport="http", app=app, api=api, adapter=adapter, http=http, socket=None)


def progress(n: int, gate: asyncio.Event | None = None) -> ScriptedTurn:
    note = {"step": f"step {n} of 14", "note": f"working on part {n}"}
    return ScriptedTurn(calls=[ScriptedCall("report_progress", note)], gate=gate)


async def test_the_status_line_through_45_s_of_429s_shows_every_note_and_one_answer(
    settings: Settings,
) -> None:
    settings.progress_mode = "status"
    gate = asyncio.Event()
    turns = [progress(n, gate if n == 2 else None) for n in range(1, 15)]
    plan = ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Fix it"]})])
    finish = ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "All done."})])
    clock = VirtualClock()
    async with clocked_workspace(settings, ScriptedModel([plan, *turns, finish]), clock) as ws:
        root = await ws.mention("please fix the flaky login test")
        await ws.deliver("events_api", ws.reaction_body(ws.post(root, "📋")["ts"]))
        await wait_for(lambda: any("part 1" in t for t in ws.api.posted_texts(CHANNEL, root)))
        await wait_for(lambda: turns[1].started.is_set())

        ws.api.rate_limit_window(["chat.postMessage", "chat.update"], seconds=45, retry_after=5)
        window_opened = len(ws.api.calls)
        gate.set()
        await wait_for(_done(ws, root))
        await wait_for(lambda: any(refused(c) for c in ws.api.calls_of("chat.postMessage")))
        changes = [c for c in ws.api.calls[window_opened:] if c.method.startswith("chat.")]
        assert changes and not any(c.ok for c in changes)  # nothing got through

        await clock.run(ws.app.deliverer.drain())
        await ws.settle()

        in_window = ws.api.calls[window_opened:]
        assert {c.method for c in in_window if refused(c)} == {"chat.postMessage", "chat.update"}
        shown = [line for m in ws.posts(root) for line in m.get("text", "").split("\n")]
        notes = await _note_texts(ws)
        assert len(notes) >= 14
        assert [note for note in notes if note not in shown] == []
        answers = [
            c for c in ws.calls("chat.postMessage") if c.ok and "All done." in c.args["text"]
        ]
        assert len(answers) == 1
        assert [m["text"].startswith("✅ All done.") for m in ws.posts(root)].count(True) == 1
        rows = await ws.app.store.outbox.rows()
        states = [(r.state, r.attempts) for r in rows if r.purpose != "plan_steps"]
        assert {tuple(s) for s in states} == {("sent", 0)}
        plan_edits = {(r.state, r.attempts) for r in rows if r.purpose == "plan_steps"}
        assert plan_edits <= {("sent", 0), ("dropped", 0)}  # a newer edit replaced some


def _done(ws: Workspace, root: str):  # type: ignore[no-untyped-def]
    async def check() -> bool:
        return (await ws.snapshot(root)).status.lifecycle is Lifecycle.DONE

    return check


async def _note_texts(ws: Workspace) -> list[str]:
    rows = [r for r in await ws.app.store.outbox.rows() if r.purpose == "note"]
    return [str(r.action.text) for r in rows]  # type: ignore[union-attr]


# --- the Slack sender raises a 429 at once ----------------------------------------------


@pytest.mark.parametrize("kind", ["post", "update"])
async def test_the_slack_sender_says_rate_limited_at_once_with_retry_after(kind: str) -> None:
    async with FakeSlackApi() as api:
        adapter = SlackAdapter(SlackConfig(bot_token="xoxb-test", api_url=api.base_url))
        root = str(api.add_message(CHANNEL, "hi")["ts"])
        thread = PlatformRef(platform="slack", workspace=TEAM_ID, channel=CHANNEL, thread=root)
        posted = await adapter.send(PostReply(ref=thread, text="status"), idempotency_key="tb-1")
        method = "chat.postMessage" if kind == "post" else "chat.update"
        api.rate_limit(method, times=5, retry_after=30)
        action = (
            PostReply(ref=thread, text="answer")
            if kind == "post"
            else UpdateMessage(ref=thread.model_copy(update={"message": posted}), text="late")
        )

        with pytest.raises(RateLimited) as limited:
            await adapter.send(action, idempotency_key="tb-2")

        assert limited.value.retry_after == 30
        assert [c.status for c in api.calls_of(method)][-1:] == [429]  # asked once, no retry
        assert len([c for c in api.calls_of(method) if refused(c)]) == 1


# --- issue 22: a 5xx whose body is not Slack's JSON ----------------------------------------

PROXY_BODIES = ["text/html", "text/plain", "application/json"]
"""A proxy's error page as HTML, as plain text (slack-sdk hands it over as a str, on
which the sender called ``.get`` and put an ``AttributeError`` in the thread), and as
a body that claims to be JSON and is not (slack-sdk raises with aiohttp's response)."""


@pytest.mark.parametrize("content_type", PROXY_BODIES)
async def test_a_post_failing_on_a_proxy_page_is_reported_in_words_in_its_place(
    tmp_path: Path, content_type: str
) -> None:
    async with slack_delivery(tmp_path, max_attempts=3) as slack:
        api = slack.api
        cid, root = await slack.conversation(CHANNEL)
        api.outage("chat.postMessage", status=502, times=3, content_type=content_type)
        events = (answered("FIRST answer"), answered("SECOND answer"))
        await slack.store.journal.commit(cid, Change(events=events))

        await slack.clock.run(slack.deliverer.drain())

        report = (
            "⚠️ I could not post a message here (“✅ FIRST answer”): Slack answered with a "
            "server error (HTTP 502). I tried 3 times and will not try again."
        )
        assert first_lines(api.posted_texts(CHANNEL, root)) == [report, "✅ SECOND answer"]
        posts = api.calls_of("chat.postMessage")
        assert [c.status for c in posts] == [502, 502, 502, 200, 200]
        assert posts[3].args["text"] == report  # what Slack received, in this order
        assert posts[4].args["text"].startswith("✅ SECOND answer")
        rows = await slack.rows()
        assert [(purpose, state, attempts) for purpose, state, attempts, _ in rows] == [
            ("answer", "failed", 3),
            ("answer", "sent", 0),
            ("report", "sent", 0),
        ]


async def test_a_post_whose_answer_was_a_proxy_page_is_found_and_not_posted_twice(
    tmp_path: Path,
) -> None:
    """Slack took the post and the proxy answered 502: the post client does not ask
    again itself; the next attempt looks for the post by its outbox key first."""
    async with slack_delivery(tmp_path) as slack:
        api = slack.api
        cid, root = await slack.conversation(CHANNEL)
        api.outage("chat.postMessage", status=502, taken=True)
        await slack.store.journal.commit(cid, Change(events=(answered("Posted once."),)))

        await slack.clock.run(slack.deliverer.drain())

        assert first_lines(api.posted_texts(CHANNEL, root)) == ["✅ Posted once."]
        assert [c.status for c in api.calls_of("chat.postMessage")] == [502]
        [lookup] = api.calls_of("conversations.replies")
        assert lookup.ok
        [(purpose, state, attempts, message_id)] = await slack.rows()
        assert (purpose, state, attempts) == ("answer", "sent", 1)
        assert message_id == api.messages(CHANNEL)[-1]["ts"]


async def test_only_what_changes_nothing_twice_is_asked_again_after_a_503_page() -> None:
    """slack-sdk's server-error retry handler asks once more for an edit (made twice,
    it changes nothing); a post is never asked again by the client (it may have
    gone through): it fails, transient, for the deliverer to look for and retry."""
    async with FakeSlackApi() as api:
        adapter = SlackAdapter(SlackConfig(bot_token="xoxb-test", api_url=api.base_url))
        root = str(api.add_message(CHANNEL, "hi")["ts"])
        thread = PlatformRef(platform="slack", workspace=TEAM_ID, channel=CHANNEL, thread=root)
        posted = await adapter.send(PostReply(ref=thread, text="status"), idempotency_key="tb-1")
        assert posted is not None
        api.outage("chat.update", status=503)
        api.outage("chat.postMessage", status=503)

        edit = UpdateMessage(ref=thread.model_copy(update={"message": posted}), text="edited")
        await adapter.send(edit, idempotency_key="tb-1")
        with pytest.raises(DeliveryError) as failed:
            await adapter.send(PostReply(ref=thread, text="answer"), idempotency_key="tb-2")

        assert [c.status for c in api.calls_of("chat.update")] == [503, 200]
        message = api.message(CHANNEL, posted)
        assert message is not None and message["text"] == "edited"
        assert [c.status for c in api.calls_of("chat.postMessage")] == [200, 503]
        assert str(failed.value) == "Slack answered with a server error (HTTP 503)"
        assert not failed.value.permanent
