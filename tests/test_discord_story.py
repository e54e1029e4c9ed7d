"""The Discord issue's acceptance stories: the real discord.py client against FakeDiscord.

Alice mentions the bot in #agent-work; the runner starts a thread on her message and
the bot posts its plan there (Approve / Reject buttons, ✅ and ❌ seeded); she approves
with ✅, the model asks a question, she answers in the thread, the final answer comes.
Around it: the bot's own echoes, another bot, someone who may not approve, a removed
reaction, ``/stop`` while the model is blocked, the Approve button after a restart, a
reply Discord withheld the text of, and a long answer. Every dispatch is a fixture from
``tests/fixtures/discord`` with fresh ids; each test asserts the REST calls FakeDiscord
recorded and what the store holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import discord.gateway
import discord.http
import pytest
from sqlalchemy import text as sql

from adapters.discord.outbound import MAX_TEXT
from adapters.discord.plan_card import IS_COMPONENTS_V2
from adapters.discord.runner import DiscordAdapter, DiscordConfig, DiscordStartError
from adapters.discord.texts import UNREADABLE
from adapters.discord.typing import EVERY as TYPING_EVERY
from bot.app import App, build
from bot.settings import Settings
from conversations.errors import DeliveryError
from conversations.events import PlatformRef, PostReply
from core.models.scripted import ScriptedModel
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.requests import RequestState
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.verdicts import Approved
from tests.fakes.discord_api import (
    BOT_USER_ID,
    GUILD_ID,
    HUMAN_USERS,
    TEXT_CHANNEL_ID,
    FakeDiscord,
    RecordedCall,
    all_components,
    shown_text,
)
from tests.test_slack_story import (
    FENCE,
    STATS,
    code_stays_in_blocks,
    finish,
    plan,
    question,
    without_fences,
    words,
)

FIXTURES = Path(__file__).parent / "fixtures" / "discord"
ALICE = "573086210457731075"
BOB = "673467649228931076"
OTHER_BOT = "1198930054348939999"
WAIT = 10.0
_ids = itertools.count(1)
_IDENTITY = ("/users/@me", "/oauth2/applications/@me", "/gateway", "/applications/")


def fixture(name: str) -> dict[str, Any]:
    """The ``d`` of a fixture's dispatch (a fresh copy)."""
    data = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return copy.deepcopy(data["payload"]["d"])


def mention_d(
    fake: FakeDiscord,
    text: str,
    *,
    by: str = ALICE,
    bot: bool = False,
    channel: str = TEXT_CHANNEL_ID,
    guild: str = GUILD_ID,
) -> dict[str, Any]:
    """The ``d`` of a MESSAGE_CREATE: ``by`` mentions the bot in ``channel`` of ``guild``."""
    d = fixture("message_create_mention_bot")
    d.update(
        id=fake.snowflake(),
        channel_id=channel,
        content=f"<@{BOT_USER_ID}> {text}",
        nonce=str(next(_ids)),
    )
    d["author"].update(id=by, bot=bot)
    d["guild_id"] = guild
    return d


def reaction_d(
    thread: str, message: str, emoji: str, by: str, *, guild: str = GUILD_ID
) -> dict[str, Any]:
    """The ``d`` of a MESSAGE_REACTION_ADD: ``by`` reacts ``emoji`` to ``message``."""
    d = fixture("message_reaction_add_unicode")
    d.update(user_id=by, channel_id=thread, message_id=message, guild_id=guild)
    d["emoji"] = {"id": None, "name": emoji}
    username, name = HUMAN_USERS.get(by, ("bot", None))
    d["member"]["user"].update(id=by, username=username, global_name=name)
    return d


@pytest.fixture(autouse=True)
def _restore_discord_py() -> Iterator[None]:
    """discord.py's REST base and gateway URL are class attributes: put them back."""
    base = discord.http.Route.BASE
    gateway = discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    yield
    discord.http.Route.BASE = base
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = gateway


class Guild:
    """The fake guild, the bot connected to it, and the people who talk to it."""

    def __init__(
        self, fake: FakeDiscord, settings: Settings, *, typing_every: float = TYPING_EVERY
    ) -> None:
        self.fake = fake
        self.settings = settings
        self.typing_every = typing_every
        self.app: App | None = None
        self.adapter: DiscordAdapter | None = None

    async def connect(self, model: ScriptedModel) -> None:
        """Build the app on the settings' database and connect a new adapter."""
        self.app = await build(self.settings, model=model)
        self.adapter = DiscordAdapter(
            DiscordConfig(
                token="fake-token",
                api_url=self.fake.api_url,
                gateway_url=self.fake.gateway_url,
                guilds=(GUILD_ID,),
                file_threshold=self.settings.file_threshold,
                allow_bots=self.settings.allow_bots,
                bot_thread_cap=self.settings.bot_thread_cap,
                typing_every=self.typing_every,
            )
        )
        self.app.add_sender(self.adapter)
        self.app.add_texts(self.adapter.texts)
        self.app.add_fetcher(self.adapter.files)
        await self.app.start()
        await asyncio.wait_for(self.adapter.start(self.app.hub), WAIT)

    async def disconnect(self) -> None:
        if self.adapter is not None:
            await self.adapter.close()
        if self.app is not None:
            await self.app.close()
        self.adapter = self.app = None

    @property
    def hub_app(self) -> App:
        assert self.app is not None
        return self.app

    # --- delivering dispatches -------------------------------------------------

    async def dispatch(self, name: str, d: dict[str, Any], *, settle: bool = True) -> int:
        s = await self.fake.dispatch(name, d)
        if settle:
            await self.settle(s)
        return s

    async def settle(self, s: int | None = None) -> None:
        """Wait until the runner took dispatch ``s`` and the hub and outbox are idle."""
        adapter, app = self.adapter, self.hub_app
        assert adapter is not None
        async with asyncio.timeout(WAIT):
            while s is not None and adapter.processed_seq < s:  # noqa: ASYNC110
                await asyncio.sleep(0.005)
            await adapter.idle()
            await app.hub.settled()
            await adapter.idle()

    # --- what people do ----------------------------------------------------------

    def mention_d(self, text: str, *, by: str = ALICE, bot: bool = False) -> dict[str, Any]:
        return mention_d(self.fake, text, by=by, bot=bot)

    async def mention(self, text: str = "please fix the flaky login test", **kw: Any) -> str:
        """Alice mentions the bot in the channel; returns the message (and thread) id."""
        d = self.mention_d(text)
        await self.dispatch("MESSAGE_CREATE", d, **kw)
        return str(d["id"])

    async def reply(self, thread: str, text: str, *, by: str = ALICE, bot: bool = False) -> str:
        d = fixture("message_create_in_thread")
        d.update(id=self.fake.snowflake(), channel_id=thread, content=text, guild_id=GUILD_ID)
        d["author"].update(id=by, bot=bot)
        await self.dispatch("MESSAGE_CREATE", d)
        return str(d["id"])

    def reaction_d(self, thread: str, message: str, emoji: str, by: str) -> dict[str, Any]:
        return reaction_d(thread, message, emoji, by)

    async def react(self, thread: str, message: str, emoji: str = "✅", *, by: str = ALICE) -> None:
        await self.dispatch("MESSAGE_REACTION_ADD", self.reaction_d(thread, message, emoji, by))

    def interaction_d(self, name: str, thread: str) -> dict[str, Any]:
        d = fixture(name)
        d.update(id=self.fake.snowflake(), token=f"token-{next(_ids)}", channel_id=thread)
        d["channel"]["id"] = thread
        return d

    # --- what the bot did ----------------------------------------------------------

    def calls(self) -> list[RecordedCall]:
        """REST calls but the log-in, gateway and command registration ones."""
        return [c for c in self.fake.calls if not c.path.startswith(_IDENTITY)]

    def posts(self, thread: str) -> list[str]:
        """The bot's messages in ``thread`` (not interaction responses), oldest first."""
        return [shown_text(m) for m in self.fake.posted(thread) if "webhook_id" not in m]

    def post(self, thread: str, marker: str) -> dict[str, Any]:
        found = [m for m in self.fake.posted(thread) if marker in shown_text(m)]
        assert found, f"no bot message with {marker!r} in {self.posts(thread)}"
        return found[-1]

    async def snapshot(self, thread: str) -> ConversationSnapshot:
        ref = PlatformRef(platform="discord", workspace=GUILD_ID, channel=thread, thread=thread)
        conversation = await self.hub_app.store.threads.find_by_thread(ref)
        assert conversation is not None, f"no conversation in thread {thread}"
        return await self.hub_app.store.journal.load(conversation.id)


@contextlib.asynccontextmanager
async def discord_guild(
    settings: Settings,
    model: ScriptedModel,
    *,
    typing_every: float = TYPING_EVERY,
    **fake_options: Any,
) -> AsyncIterator[Guild]:
    async with FakeDiscord(**fake_options) as fake:
        guild = Guild(fake, settings, typing_every=typing_every)
        try:
            await guild.connect(model)
            yield guild
        finally:
            await guild.disconnect()


def buttons(message: dict[str, Any]) -> dict[str, str]:
    """``{label: custom_id}`` of a posted message's buttons (in rows, or in a Components
    V2 card's container)."""
    return {
        str(c["label"]): str(c["custom_id"])
        for c in all_components(message.get("components", []))
        if c.get("type") == 2
    }


def story() -> ScriptedModel:
    return ScriptedModel([plan(), question(), finish()])


def route(call: RecordedCall) -> tuple[str, str]:
    return call.method, call.path


# --- 1: the story -----------------------------------------------------------------------


async def test_the_story_mention_thread_plan_approval_question_answer(settings) -> None:
    model = story()
    async with discord_guild(settings, model) as g:
        assert g.fake.identify is not None
        assert g.fake.identify["intents"] & (1 << 15)  # Message Content asked for
        [sync] = g.fake.calls_to(
            "PUT", path=f"/applications/{BOT_USER_ID}/guilds/{GUILD_ID}/commands"
        )
        assert [c["name"] for c in sync.json] == ["stop", "threadbot"]

        root = await g.mention("please fix the flaky login test")
        thread = root  # a thread started from a message has the message's id
        plan_message = g.post(thread, "📋 Plan (v1)")
        snap = await g.snapshot(thread)
        request = snap.requests[0]
        assert buttons(plan_message) == {
            "Approve": f'tb1:{{"k":"approve","r":"{request.id}"}}',
            "Reject": f'tb1:{{"k":"reject","r":"{request.id}"}}',
            "Stop": 'tb1:{"k":"stop"}',  # the pressed message's conversation
        }
        assert plan_message["flags"] & IS_COMPONENTS_V2  # a card: its text in components
        assert str(snap.status) == "waiting(plan_approval)"

        await g.react(thread, str(plan_message["id"]), "✅", by=ALICE)
        ask = g.post(thread, "❓ Staging or production database?")
        assert str((await g.snapshot(thread)).status) == "waiting(question)"

        await g.reply(thread, "staging, please")
        answer = g.post(thread, "✅ The login test is fixed.")

        plan_id, ask_id, answer_id = (str(m["id"]) for m in (plan_message, ask, answer))
        typing, plan_edit = f"/channels/{thread}/typing", f"/channels/{thread}/messages/{plan_id}"
        assert [route(c) for c in g.calls() if c.path not in (typing, plan_edit)] == [
            ("POST", f"/channels/{TEXT_CHANNEL_ID}/messages/{root}/threads"),
            ("POST", f"/channels/{thread}/messages"),  # the plan
            ("PUT", f"/channels/{thread}/messages/{plan_id}/reactions/✅/@me"),
            ("PUT", f"/channels/{thread}/messages/{plan_id}/reactions/❌/@me"),
            ("POST", f"/channels/{thread}/messages"),  # the question
            ("PATCH", f"/channels/{thread}/messages/{ask_id}"),  # answered: who, no buttons
            ("POST", f"/channels/{thread}/messages"),  # the answer
        ]
        # The plan's card: the approval, then its steps as they move (at most one a second).
        edits = [c.json for c in g.fake.edits(plan_id)]
        assert shown_text(edits[0]).startswith(f"✅ Approved by <@{ALICE}> (plan v1)")
        assert "✅ 1. " in shown_text(edits[-1])  # the answer: every step done
        assert g.fake.typing(thread)  # the run worked: the thread showed the bot typing
        asked = g.fake.messages[ask_id]
        assert asked["content"].startswith(f"💬 <@{ALICE}> answered: staging, please\n❓ Staging")
        assert buttons(asked) == {}
        decided = g.fake.messages[plan_id]  # as Discord holds it now
        assert shown_text(decided).startswith(
            f"✅ Approved by <@{ALICE}> (plan v1)\n📋 Plan (v1)\n"
        )
        assert buttons(decided) == {}
        created = g.calls()[0]
        assert created.json["name"] == "please fix the flaky login test"
        posts = [c for c in g.calls() if c.method == "POST" and c.path != typing][1:]
        assert [c.response["id"] for c in posts] == [plan_id, ask_id, answer_id]
        assert all(c.json["enforce_nonce"] and c.json["nonce"] for c in posts)
        assert len({c.json["nonce"] for c in posts}) == 3
        assert all(c.headers["Authorization"] == "Bot fake-token" for c in g.fake.calls)
        snap = await g.snapshot(thread)
        assert snap.status.lifecycle is Lifecycle.DONE
        assert snap.requests[0].verdict == Approved()
        assert snap.requests[0].decided_by is not None
        assert snap.requests[0].decided_by.id == ALICE
        answers = [
            (r.entry.author.id, r.entry.text)
            for r in snap.journal
            if r.entry.kind == "user_text" and r.entry.role == "answer"
        ]
        assert answers == [(ALICE, "staging, please")]
        assert len(model.requests) == 3


# --- 2: echoes, other bots, outsiders, removed reactions ----------------------------------


async def test_echoes_other_bots_outsiders_and_removed_reactions_change_nothing(
    settings,
) -> None:
    model = ScriptedModel([plan(), finish("Done once.")])
    async with discord_guild(settings, model) as g:
        thread = await g.mention()
        plan_message = g.post(thread, "📋 Plan (v1)")
        plan_id = str(plan_message["id"])
        # The fake echoed the plan (MESSAGE_CREATE) and the seeded ✅ ❌ (REACTION_ADD).
        echoed = [r.t for r in g.fake.sent() if r.t and r.t.startswith(("MESSAGE", "THREAD"))]
        assert echoed.count("MESSAGE_REACTION_ADD") == 2
        before = (len(g.calls()), await g.snapshot(thread))

        own = fixture("message_create_own_bot_message")
        own.update(id=g.fake.snowflake(), channel_id=thread, guild_id=GUILD_ID)
        await g.dispatch("MESSAGE_CREATE", own)
        for emoji in ("✅", "❌"):
            await g.react(thread, plan_id, emoji, by=BOT_USER_ID)
        other = g.mention_d("please delete everything", by=OTHER_BOT, bot=True)
        await g.dispatch("MESSAGE_CREATE", other)
        removed = fixture("message_reaction_remove")
        removed.update(channel_id=thread, message_id=plan_id, user_id=ALICE)
        await g.dispatch("MESSAGE_REACTION_REMOVE", removed)

        assert len(g.calls()) == before[0]  # no thread for the other bot, nothing posted
        assert await g.snapshot(thread) == before[1]
        assert len(model.requests) == 1

        await g.react(thread, plan_id, "✅", by=BOB)  # Bob may not approve Alice's plan
        notice = g.post(thread, "Only the requester or an approver can decide this")
        assert notice["content"].endswith(f", <@{BOB}>.")
        snap = await g.snapshot(thread)
        assert snap.requests[0].state is RequestState.OPEN
        assert len(model.requests) == 1

        await g.react(thread, plan_id, "✅", by=ALICE)
        assert len(model.requests) == 2
        g.post(thread, "✅ Done once.")
        assert (await g.snapshot(thread)).status.lifecycle is Lifecycle.DONE


# --- 3: /stop while the model is blocked; a button after a restart -----------------------


async def test_stop_is_answered_while_the_model_is_still_blocked(settings) -> None:
    gate = asyncio.Event()
    first = plan(gate)
    async with discord_guild(settings, ScriptedModel([first])) as g:
        thread = await g.mention(settle=False)
        await asyncio.wait_for(first.started.wait(), WAIT)

        stop = g.interaction_d("interaction_create_slash_in_thread", thread)
        s = await g.dispatch("INTERACTION_CREATE", stop, settle=False)
        interaction = g.fake.interactions[stop["id"]]
        async with asyncio.timeout(WAIT):
            while not interaction.callbacks or g.adapter.processed_seq < s:  # type: ignore[union-attr]  # noqa: ASYNC110
                await asyncio.sleep(0.005)
        assert not gate.is_set()  # answered while the model is still blocked
        assert interaction.callbacks == [{"type": 5, "data": {"flags": 64}}]

        gate.set()
        await g.settle(s)
        assert g.posts(thread) == [f"⏹ Stopped by <@{ALICE}>."]
        assert (await g.snapshot(thread)).status.lifecycle is Lifecycle.CANCELLED
        [callback] = g.fake.calls_to(
            "POST", route="/interactions/{interaction_id}/{token}/callback"
        )
        first_post = g.fake.calls_to("POST", path=f"/channels/{thread}/messages")[0]
        assert callback.seq < first_post.seq


async def test_the_approve_button_works_after_a_restart(sqlite_settings) -> None:
    settings = sqlite_settings  # a restart on the same database
    model = ScriptedModel([plan(), finish("Approved after the restart.")])
    async with discord_guild(settings, model) as g:
        thread = await g.mention()
        plan_message = g.post(thread, "📋 Plan (v1)")
        approve = buttons(plan_message)["Approve"]

        await g.disconnect()
        await g.connect(model)  # the same database, a new client and gateway session
        assert g.fake.connections_made == 2

        press = g.interaction_d("interaction_create_button", thread)
        press["message"] = copy.deepcopy(plan_message)
        press["data"] = {"custom_id": approve, "component_type": 2}
        await g.dispatch("INTERACTION_CREATE", press)

        assert g.fake.interactions[press["id"]].callbacks == [{"type": 6}]
        g.post(thread, "✅ Approved after the restart.")
        snap = await g.snapshot(thread)
        assert snap.requests[0].verdict == Approved()
        assert snap.status.lifecycle is Lifecycle.DONE


async def as_posted_before_the_encoding(g: Guild, plan_message: dict[str, Any]) -> str:
    """Make the plan's buttons what a threadbot before the button encoding posted and stored:
    ``approve:<request>`` and ``reject:<request>`` on Discord and in the outbox row. Returns
    the old Approve value."""
    request = (await g.snapshot(str(plan_message["channel_id"]))).requests[0].id
    old = {"Approve": f"approve:{request}", "Reject": f"reject:{request}"}
    held = g.fake.messages[str(plan_message["id"])]
    for button in all_components(held["components"]):
        if button.get("type") == 2 and button["label"] in old:
            button["custom_id"] = old[button["label"]]  # type: ignore[index]
    engine = g.hub_app.store.engine  # type: ignore[attr-defined]
    async with engine.begin() as conn:
        rows = await conn.execute(
            sql("select id, action from outbox where request_id = :r"), {"r": request}
        )
        for row_id, stored in rows.all():
            action = json.loads(stored) if isinstance(stored, str) else stored
            for button in action["buttons"]:
                button["action"] = old[button["label"]]
            await conn.execute(
                sql("update outbox set action = :a where id = :i"),
                {"a": json.dumps(action), "i": row_id},
            )
    return old["Approve"]


async def test_a_button_posted_before_the_encoding_still_approves_after_an_upgrade(
    sqlite_settings,
) -> None:
    settings = sqlite_settings  # the upgrade: a new threadbot on the same database
    model = ScriptedModel([plan(), finish("Approved after the upgrade.")])
    async with discord_guild(settings, model) as g:
        thread = await g.mention()
        plan_id = str(g.post(thread, "📋 Plan (v1)")["id"])
        approve = await as_posted_before_the_encoding(g, g.fake.messages[plan_id])
        await g.disconnect()

        await g.connect(model)
        press = g.interaction_d("interaction_create_button", thread)
        press["message"] = copy.deepcopy(g.fake.messages[plan_id])
        press["data"] = {"custom_id": approve, "component_type": 2}
        await g.dispatch("INTERACTION_CREATE", press)

        assert approve.startswith("approve:")
        assert g.fake.interactions[press["id"]].callbacks == [{"type": 6}]
        g.post(thread, "✅ Approved after the upgrade.")
        decided = g.fake.messages[plan_id]  # the edit read the plan from its old outbox row
        assert shown_text(decided).startswith(
            f"✅ Approved by <@{ALICE}> (plan v1)\n📋 Plan (v1)\n"
        )
        assert buttons(decided) == {}
        snap = await g.snapshot(thread)
        assert snap.requests[0].verdict == Approved()
        assert snap.status.lifecycle is Lifecycle.DONE


async def test_the_fixture_s_namespaced_button_approves_the_plan_it_is_under(settings) -> None:
    """``threadbot:approve:plan:1``, the button of the captured interaction, decides the plan
    of the message it was pressed on, as a reaction there does."""
    model = ScriptedModel([plan(), finish("Approved from the old button.")])
    async with discord_guild(settings, model) as g:
        thread = await g.mention()
        plan_message = g.post(thread, "📋 Plan (v1)")

        press = g.interaction_d("interaction_create_button", thread)
        press["message"] = copy.deepcopy(plan_message)
        assert press["data"]["custom_id"] == "threadbot:approve:plan:1"
        await g.dispatch("INTERACTION_CREATE", press)

        g.post(thread, "✅ Approved from the old button.")
        snap = await g.snapshot(thread)
        assert snap.requests[0].verdict == Approved()
        assert snap.requests[0].decided_by is not None
        assert snap.status.lifecycle is Lifecycle.DONE


# --- 4: no Message Content intent -------------------------------------------------------


async def test_a_reply_without_its_content_gets_the_clear_message(settings) -> None:
    model = ScriptedModel([plan(), question(), finish()])
    async with discord_guild(settings, model) as g:
        thread = await g.mention()
        await g.react(thread, str(g.post(thread, "📋 Plan (v1)")["id"]))
        g.post(thread, "❓ Staging or production database?")

        await g.reply(thread, "")  # what Discord sends without the Message Content intent

        assert g.posts(thread)[-1] == UNREADABLE
        assert str((await g.snapshot(thread)).status) == "waiting(question)"
        assert len(model.requests) == 2


async def test_a_refused_message_content_intent_is_said_clearly(settings, caplog) -> None:
    async with FakeDiscord(app_flags=0) as fake:
        adapter = DiscordAdapter(
            DiscordConfig(token="t", api_url=fake.api_url, gateway_url=fake.gateway_url)
        )
        app = await build(settings, model=ScriptedModel([]))
        try:
            with caplog.at_level(logging.ERROR), pytest.raises(DiscordStartError) as raised:
                await asyncio.wait_for(adapter.start(app.hub), WAIT)
        finally:
            await adapter.close()
            await app.close()
    assert "Message Content" in str(raised.value)
    assert "Message Content" in caplog.text
    assert [r.close_code for r in fake.frames if r.kind == "closed"] == [4014]


# --- 5: a long answer ---------------------------------------------------------------------


def answer_of(size: int) -> str:
    """About ``size`` characters of paragraphs and ```python blocks of 60 lines (> 2,000)."""
    parts: list[str] = []
    n = 0
    while len("\n\n".join(parts)) < size:
        n += 1
        if n % 2 == 0:
            code = "\n".join(f"    result_{i} = run(step={i})  # part {n}" for i in range(60))
            parts.append(f"```python\n{code}\n```")
        else:
            parts.append(" ".join(f"Sentence {n}.{i} about the login test." for i in range(9)))
    return "\n\n".join(parts)[:size].rstrip() + "\n```"


async def test_a_long_answer_arrives_whole_split_with_code_fences_intact(settings) -> None:
    answer = answer_of(5_000)
    assert len(answer) > 4_990 and answer.count("```python") >= 2
    model = ScriptedModel([plan(), finish(answer)])
    async with discord_guild(settings, model) as g:
        thread = await g.mention()
        await g.react(thread, str(g.post(thread, "📋 Plan (v1)")["id"]))

        chunks = g.posts(thread)[1:]  # after the plan
        assert len(chunks) >= 3
        assert all(len(c) <= MAX_TEXT for c in chunks)
        assert all(code_stays_in_blocks(c) for c in chunks)
        assert chunks[0].startswith("✅ ")
        stats, mention = chunks[-1].split("\n")[-2:]
        assert STATS.fullmatch(stats) and mention.endswith(">, here is the answer.")
        whole = f"✅ {answer}\n{stats}\n{mention}"
        joined = "\n".join(without_fences(c) for c in chunks)
        assert words(joined) == words(without_fences(whole))  # nothing lost, nothing added
        assert any(c.startswith("```python\n") for c in chunks[1:])  # a block was reopened
        added = len(FENCE.findall("\n".join(chunks))) - len(FENCE.findall(whole))
        assert added > 0 and added % 2 == 0  # a close and a reopen per block cut in two
        assert (await g.snapshot(thread)).status.lifecycle is Lifecycle.DONE


# --- the sender: archived threads, files, refusals; direct messages -----------------------


async def test_a_post_to_an_archived_thread_unarchives_it_and_posts_once(settings) -> None:
    async with discord_guild(settings, ScriptedModel([plan()])) as g:
        thread = await g.mention()
        g.fake.archive(thread, locked=True)  # locked: Discord refuses the post (50083)
        ref = PlatformRef(platform="discord", workspace=GUILD_ID, channel=thread, thread=thread)
        adapter = g.adapter
        assert adapter is not None

        sent = await adapter.send(PostReply(ref=ref, text="still here"), idempotency_key="tb-77")

        assert [(c.method, c.path, c.status) for c in g.calls()[-3:]] == [
            ("POST", f"/channels/{thread}/messages", 400),
            ("PATCH", f"/channels/{thread}", 200),
            ("POST", f"/channels/{thread}/messages", 200),
        ]
        assert g.calls()[-2].json == {"archived": False}
        assert sent == str(g.post(thread, "still here")["id"])

        # Sent again (maybe_sent after a crash): Discord's nonce returns the same message.
        again = await adapter.send(
            PostReply(ref=ref, text="still here"), idempotency_key="tb-77", maybe_sent=True
        )
        assert again == sent
        assert g.posts(thread).count("still here") == 1


async def test_a_long_plain_answer_goes_up_as_a_file_and_refusals_are_delivery_errors(
    settings,
) -> None:
    settings.file_threshold = 3_000
    async with discord_guild(settings, ScriptedModel([plan()])) as g:
        thread = await g.mention()
        ref = PlatformRef(platform="discord", workspace=GUILD_ID, channel=thread, thread=thread)
        adapter = g.adapter
        assert adapter is not None
        text = "✅ The whole answer\n" + "x" * 5_000

        await adapter.send(PostReply(ref=ref, text=text), idempotency_key="tb-9")

        upload = g.calls()[-1]
        assert (upload.method, upload.path) == ("POST", f"/channels/{thread}/messages")
        assert upload.json["content"].startswith("✅ The whole answer\n")
        assert upload.json["nonce"] == "tb-9"
        [file] = upload.files
        assert (file.field, file.filename) == ("files[0]", "threadbot-answer-tb-9.md")
        assert file.content == text.encode()

        g.fake.fail(f"/channels/{thread}/messages", 403, 50013, "Missing Permissions")
        with pytest.raises(DeliveryError) as refused:
            await adapter.send(PostReply(ref=ref, text="no"), idempotency_key="tb-10")
        assert refused.value.permanent
        assert "50013" in str(refused.value)
        # 503 (not 500/502/504/524, which discord.py retries five times over ~25 s)
        g.fake.fail(f"/channels/{thread}/messages", 503, 0, "Service Unavailable")
        with pytest.raises(DeliveryError) as broken:
            await adapter.send(PostReply(ref=ref, text="no"), idempotency_key="tb-11")
        assert not broken.value.permanent


async def test_a_direct_message_is_a_conversation_in_its_channel(settings) -> None:
    dm = "1250000000000000777"
    async with discord_guild(settings, ScriptedModel([question(), finish("Done in the DM.")])) as g:
        g.fake.add_channel({"id": dm, "type": 1, "recipients": []})
        d = fixture("message_create_in_thread")
        for key in ("guild_id", "member", "channel_type"):
            d.pop(key, None)
        d.update(id=g.fake.snowflake(), channel_id=dm, content="can you fix the login test?")
        await g.dispatch("MESSAGE_CREATE", d)  # no mention: a DM starts a conversation
        posts = [c for c in g.calls() if not c.path.endswith("/typing")]
        assert [c.path for c in posts] == [f"/channels/{dm}/messages"]  # no thread
        assert "message_reference" not in posts[0].json
        assert g.fake.typing(dm)  # the DM showed the bot typing while it worked

        d2 = fixture("message_create_in_thread")
        for key in ("guild_id", "member", "channel_type"):
            d2.pop(key, None)
        d2.update(id=g.fake.snowflake(), channel_id=dm, content="staging, please")
        await g.dispatch("MESSAGE_CREATE", d2)

        assert g.posts(dm)[-1].startswith("✅ Done in the DM.")
        ref = PlatformRef(platform="discord", channel=dm, thread=dm)
        conversation = await g.hub_app.store.threads.find_by_thread(ref)
        assert conversation is not None
        snap = await g.hub_app.store.journal.load(conversation.id)
        assert snap.status.lifecycle is Lifecycle.DONE


async def test_allowed_bots_are_capped_per_thread(settings) -> None:
    settings.allow_bots = True
    settings.bot_thread_cap = 2
    other_bot = "1081153998028931077"
    model = ScriptedModel([plan(), plan(), plan(), plan()])
    async with discord_guild(settings, model) as guild:
        d = guild.mention_d("check the build", by=other_bot, bot=True)
        await guild.dispatch("MESSAGE_CREATE", d)
        thread = str(d["id"])
        for n in range(3):  # the other bot keeps answering: a loop in the making
            await guild.reply(thread, f"revise it, round {n}", by=other_bot, bot=True)

        assert len(model.requests) == 2  # the mention and one reply: two per thread


async def test_a_rate_limited_thread_start_holds_up_no_other_conversation(settings) -> None:
    """Starting a mention's thread may wait out a 429 (discord.py sleeps it); the frames
    behind it are taken meanwhile: an approval in another thread goes on at once."""
    async with discord_guild(settings, ScriptedModel([plan(), question(), plan()])) as g:
        first = await g.mention("the first one")
        plan_message = g.post(first, "📋 Plan (v1)")
        second = g.mention_d("the second one")
        threads = f"/channels/{TEXT_CHANNEL_ID}/messages/{second['id']}/threads"
        g.fake.rate_limit(threads, retry_after=1.0, method="POST")
        await g.dispatch("MESSAGE_CREATE", second, settle=False)

        await g.react(first, str(plan_message["id"]), "✅", by=ALICE)

        asked = g.post(first, "❓ Staging or production database?")
        started = [c for c in g.fake.calls_to("POST", path=threads) if c.status < 300]
        [question_call] = [
            c
            for c in g.fake.calls_to("POST", path=f"/channels/{first}/messages")
            if c.response and c.response.get("id") == asked["id"]
        ]
        assert len(started) == 1 and question_call.seq < started[0].seq  # did not wait for it
        g.post(str(second["id"]), "📋 Plan (v1)")  # and the second mention got its thread
