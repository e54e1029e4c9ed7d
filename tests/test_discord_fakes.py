"""The Discord fake works with the real discord.py client (REST and gateway)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import discord
import discord.gateway
import discord.http
import pytest
from discord import app_commands

from tests.fakes.discord_api import (
    APPLICATION_ID,
    BOT_USER_ID,
    GUILD_ID,
    TEXT_CHANNEL_ID,
    FakeDiscord,
    shown_text,
)

pytestmark = pytest.mark.timeout(300)

FIXTURES = Path(__file__).parent / "fixtures" / "discord"
TOKEN = "fake-bot-token"
ALICE = 573086210457731075
ROOT_MESSAGE = 1249999996321923072


def fixture_d(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())["payload"]["d"]
    return data


def intents() -> discord.Intents:
    chosen = discord.Intents.default()
    chosen.message_content = True
    return chosen


class RecordingClient(discord.Client):
    """A plain discord.py client that counts ``on_ready``."""

    ready_count = 0

    async def on_ready(self) -> None:
        self.ready_count += 1


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(token=TOKEN) as server:
        with server.patch_discord_py():
            yield server


@contextlib.asynccontextmanager
async def running(
    fake: FakeDiscord, chosen: discord.Intents | None = None
) -> AsyncIterator[RecordingClient]:
    """Start a real client against the fake, wait for ``on_ready``; close it after."""
    client = RecordingClient(intents=chosen or intents(), guild_ready_timeout=0.1)
    task = asyncio.create_task(client.start(TOKEN))
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while not client.is_ready():
            if task.done():
                task.result()
                raise AssertionError("the client stopped before it was ready")
            assert loop.time() < deadline, "the client did not get ready"
            await asyncio.sleep(0.01)
        yield client
    finally:
        await asyncio.wait_for(client.close(), 5)
        await asyncio.wait_for(task, 60)


async def next_event(client: discord.Client, event: str, **kwargs: Any) -> asyncio.Future[Any]:
    """Listen for ``event`` now (before anything is dispatched); await the result later."""
    waiter = asyncio.ensure_future(client.wait_for(event, timeout=60, **kwargs))
    await asyncio.sleep(0)
    return waiter


async def mention(fake: FakeDiscord, client: discord.Client) -> discord.Message:
    """Alice's mention of the bot, from the fixture, as ``on_message`` receives it."""
    waiter = await next_event(client, "message", check=lambda m: m.author.id == ALICE)
    await fake.dispatch("MESSAGE_CREATE", fixture_d("message_create_mention_bot.json"))
    message: discord.Message = await waiter
    return message


# -- REST basics -----------------------------------------------------------------------


async def test_rest_answers_exact_json_and_discord_errors(fake: FakeDiscord) -> None:
    assert fake.api_url.startswith("http://127.0.0.1:")
    assert fake.gateway_url == "ws" + fake.api_url[4 : -len("/api/v10")] + "/gateway"
    auth = {"Authorization": f"Bot {TOKEN}"}
    async with aiohttp.ClientSession() as session:
        async with session.get(fake.api_url + "/users/@me", headers=auth) as response:
            assert response.status == 200
            assert response.headers["Content-Type"] == "application/json"
            me = await response.json()
        async with session.get(fake.api_url + "/nope", headers=auth) as response:
            assert response.status == 404
            assert response.headers["Content-Type"] == "application/json"
            assert await response.json() == {"message": "404: Not Found", "code": 0}
        async with session.get(fake.api_url + "/users/@me") as response:
            assert response.status == 401
            assert await response.json() == {"message": "401: Unauthorized", "code": 0}
        async with session.get(fake.api_url + "/gateway/bot", headers=auth) as response:
            assert (await response.json())["url"] == fake.gateway_url
    assert me["id"] == BOT_USER_ID
    assert me["username"] == "agent-bot"
    assert me["bot"] is True
    assert [(c.method, c.path, c.status) for c in fake.calls] == [
        ("GET", "/users/@me", 200),
        ("GET", "/nope", 404),
        ("GET", "/users/@me", 401),
        ("GET", "/gateway/bot", 200),
    ]
    assert [c.seq for c in fake.calls] == sorted(c.seq for c in fake.calls)


async def test_patch_restores_discord_py_urls() -> None:
    base = discord.http.Route.BASE
    gateway = discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    async with FakeDiscord() as server:
        with server.patch_discord_py():
            assert discord.http.Route.BASE == server.api_url
            assert str(discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY) == server.gateway_url
    assert discord.http.Route.BASE == base
    assert discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY == gateway


# -- gateway ---------------------------------------------------------------------------


async def test_client_logs_in_connects_and_gets_the_guild(fake: FakeDiscord) -> None:
    async with running(fake) as client:
        assert client.ready_count == 1
        assert client.user is not None
        assert client.user.id == int(BOT_USER_ID)
        assert client.application_id == int(APPLICATION_ID)
        guild = client.get_guild(int(GUILD_ID))
        assert guild is not None
        assert guild.name == "Fake Guild"
        channel = guild.get_channel(int(TEXT_CHANNEL_ID))
        assert isinstance(channel, discord.TextChannel)
        assert guild.me.id == int(BOT_USER_ID)

        # Login (REST) comes before the gateway connection.
        first_connect = next(r for r in fake.frames if r.kind == "connect")
        login = [(c.method, c.path) for c in fake.calls if c.seq < first_connect.seq]
        assert login == [("GET", "/users/@me"), ("GET", "/oauth2/applications/@me")]
        assert fake.calls[0].headers["Authorization"] == f"Bot {TOKEN}"

        # HELLO -> IDENTIFY -> READY -> GUILD_CREATE; the heartbeat is acked.
        assert fake.identify is not None
        assert fake.identify["token"] == TOKEN
        assert fake.identify["intents"] == intents().value
        assert [r.t for r in fake.sent(op=0)][:2] == ["READY", "GUILD_CREATE"]
        assert fake.sent(op=10)[0].d["heartbeat_interval"] == fake.heartbeat_interval
        heartbeat = fake.received(op=1)[0]
        assert any(r.op == 11 and r.seq > heartbeat.seq for r in fake.sent())


async def test_message_create_reaches_on_message(fake: FakeDiscord) -> None:
    async with running(fake) as client:
        message = await mention(fake, client)
        assert message.id == ROOT_MESSAGE
        assert message.content.startswith(f"<@{BOT_USER_ID}>")
        assert client.user in message.mentions
        assert message.guild is not None and message.guild.id == int(GUILD_ID)
        assert message.channel.id == int(TEXT_CHANNEL_ID)
        dispatched = fake.sent("MESSAGE_CREATE")[0]
        assert dispatched.s == 3  # after READY (1) and GUILD_CREATE (2)


async def test_send_with_nonce_is_recorded_and_deduplicated(fake: FakeDiscord) -> None:
    async with running(fake) as client:
        channel = client.get_channel(int(TEXT_CHANNEL_ID))
        assert isinstance(channel, discord.TextChannel)
        echoed = await next_event(client, "message", check=lambda m: m.author == client.user)
        first = await channel.send("Here is the plan", nonce="run-1-plan")
        again = await channel.send("Here is the plan", nonce="run-1-plan")
        other = await channel.send("Another message", nonce="run-1-other")
        assert (await echoed).id == first.id  # Discord echoes the bot's own messages

    assert again.id == first.id
    assert other.id != first.id
    posts = fake.calls_to("POST", route="/channels/{channel_id}/messages")
    assert len(posts) == 3
    assert posts[0].json["content"] == "Here is the plan"
    assert posts[0].json["nonce"] == "run-1-plan"
    assert posts[0].json["enforce_nonce"] is True
    assert posts[0].headers["Content-Type"] == "application/json"
    assert posts[1].response == posts[0].response
    assert [m["content"] for m in fake.posted(TEXT_CHANNEL_ID)] == [
        "Here is the plan",
        "Another message",
    ]
    assert first.author.id == int(BOT_USER_ID)
    assert first.nonce == "run-1-plan"
    assert len(fake.sent("MESSAGE_CREATE")) == 2  # no echo for the deduplicated send


async def test_low_level_send_and_discord_validation(fake: FakeDiscord) -> None:
    async with running(fake) as client:
        params = discord.http.handle_message_parameters(content="x" * 2001)
        with pytest.raises(discord.HTTPException) as too_long:
            await client.http.send_message(int(TEXT_CHANNEL_ID), params=params)
        params = discord.http.handle_message_parameters(content="ok", nonce=42)
        data = await client.http.send_message(int(TEXT_CHANNEL_ID), params=params)
        with pytest.raises(discord.NotFound) as unknown:
            await client.http.send_message(1, params=params)
    assert too_long.value.code == 50035
    assert data["channel_id"] == TEXT_CHANNEL_ID
    assert data["nonce"] == "42"
    assert data["author"]["id"] == BOT_USER_ID
    assert unknown.value.code == 10003


async def test_components_v2_messages_and_typing_as_discord_keeps_them(fake: FakeDiscord) -> None:
    """discord.py's own LayoutView: flag 32768, its text in Text Displays; Discord's rules
    for such a message (no content, 40 components, 4,000 characters, the flag stays)."""
    channel = int(TEXT_CHANNEL_ID)
    async with running(fake) as client:
        view = discord.ui.LayoutView()
        view.add_item(discord.ui.Container(discord.ui.TextDisplay("1. step")))
        params = discord.http.handle_message_parameters(view=view)
        data = await client.http.send_message(channel, params=params)
        refused = []
        for bad in (
            {"content": "x", "flags": 1 << 15, "components": [{"type": 10, "content": "y"}]},
            {"flags": 1 << 15, "components": [{"type": 10, "content": "y" * 4001}]},
            {"flags": 1 << 15, "components": [{"type": 10, "content": "y"}] * 41},
        ):
            with pytest.raises(discord.HTTPException) as error:
                await client.http.request(
                    discord.http.Route("POST", "/channels/{c}/messages", c=channel), json=bad
                )
            refused.append(error.value.code)
        route = discord.http.Route(
            "PATCH", "/channels/{c}/messages/{m}", c=channel, m=int(data["id"])
        )
        with pytest.raises(discord.HTTPException) as unflagged:
            await client.http.request(route, json={"flags": 0, "content": "plain again"})
        await client.http.send_typing(channel)
    assert data["flags"] == 1 << 15 and data["content"] == ""
    assert shown_text(fake.messages[data["id"]]) == "1. step"
    assert refused == [50035, 50035, 50035]
    assert unflagged.value.code == 50035
    assert [c.status for c in fake.typing(TEXT_CHANNEL_ID)] == [204]


async def test_thread_from_message_reaction_and_upload(fake: FakeDiscord) -> None:
    async with running(fake) as client:
        message = await mention(fake, client)
        thread = await message.create_thread(name="fix the flaky login test")
        await message.add_reaction("👀")
        await thread.send("Working on it", file=discord.File(io.BytesIO(b"ok\n"), "plan.txt"))
        await message.remove_reaction("👀", client.user)  # type: ignore[arg-type]
        await message.add_reaction("✅")

    assert thread.id == ROOT_MESSAGE
    assert thread.parent_id == int(TEXT_CHANNEL_ID)
    assert thread.type is discord.ChannelType.public_thread
    stored = fake.channels[str(ROOT_MESSAGE)]
    assert stored["type"] == 11
    assert stored["thread_metadata"]["archived"] is False
    created = fake.calls_to("POST", route="/channels/{channel_id}/messages/{message_id}/threads")
    assert created[0].path == f"/channels/{TEXT_CHANNEL_ID}/messages/{ROOT_MESSAGE}/threads"
    assert created[0].json["name"] == "fix the flaky login test"
    assert fake.sent("THREAD_CREATE")[0].d["newly_created"] is True

    puts = fake.calls_to(
        "PUT", route="/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me"
    )
    assert [c.status for c in puts] == [204, 204]
    assert puts[0].path.endswith("/reactions/👀/@me")
    assert fake.reactions == [(TEXT_CHANNEL_ID, str(ROOT_MESSAGE), "✅")]

    upload = fake.calls_to("POST", path=f"/channels/{ROOT_MESSAGE}/messages")[0]
    assert upload.headers["Content-Type"].startswith("multipart/form-data")
    assert upload.json["content"] == "Working on it"
    assert [(f.field, f.filename, f.content) for f in upload.files] == [
        ("files[0]", "plan.txt", b"ok\n")
    ]
    [posted] = fake.posted(ROOT_MESSAGE)
    assert posted["attachments"][0]["filename"] == "plan.txt"
    assert posted["attachments"][0]["size"] == 3


async def test_archived_thread_refuses_until_unarchived(fake: FakeDiscord) -> None:
    async with running(fake) as client:
        message = await mention(fake, client)
        thread = await message.create_thread(name="conversation")
        first = await thread.send("first")
        fake.archive(thread.id)
        with pytest.raises(discord.HTTPException) as archived:
            await thread.send("while archived")
        with pytest.raises(discord.HTTPException) as edit:
            await first.edit(content="edited")
        await thread.edit(archived=False)
        await thread.send("after unarchive")

        fake.archive(thread.id, locked=False)  # Discord reopens an unlocked thread on a post
        with pytest.raises(discord.HTTPException):
            await first.add_reaction("✅")
        await thread.send("reopens it")
        assert fake.channels[str(thread.id)]["thread_metadata"]["archived"] is False

    assert archived.value.status == 400
    assert archived.value.code == 50083
    assert archived.value.text == "Thread is archived"
    assert edit.value.code == 50083
    unarchive = fake.calls_to("PATCH", path=f"/channels/{thread.id}")[0]
    assert unarchive.json == {"archived": False}
    assert [m["content"] for m in fake.posted(thread.id)] == [
        "first",
        "after unarchive",
        "reopens it",
    ]


async def test_rate_limit_is_retried_by_discord_py(fake: FakeDiscord) -> None:
    async with running(fake) as client:
        channel = client.get_channel(int(TEXT_CHANNEL_ID))
        assert isinstance(channel, discord.TextChannel)
        fake.rate_limit(f"/channels/{TEXT_CHANNEL_ID}/messages", retry_after=0.05)
        sent = await channel.send("after a 429")

    posts = fake.calls_to("POST", path=f"/channels/{TEXT_CHANNEL_ID}/messages")
    assert [c.status for c in posts] == [429, 200]
    assert posts[0].response == {
        "message": "You are being rate limited.",
        "retry_after": 0.05,
        "global": False,
    }
    assert sent.content == "after a 429"


async def test_interaction_defer_reaches_the_callback_route(fake: FakeDiscord) -> None:
    d = fixture_d("interaction_create_slash_in_thread.json")
    async with running(fake) as client:
        waiter = await next_event(client, "interaction")
        await fake.dispatch("INTERACTION_CREATE", d)
        interaction: discord.Interaction = await waiter
        assert interaction.type is discord.InteractionType.application_command
        assert interaction.channel_id == int(d["channel_id"])
        await interaction.response.defer()
        await interaction.edit_original_response(content="Stopped.")
        await interaction.followup.send("Anything else?")

    [callback] = fake.calls_to("POST", route="/interactions/{interaction_id}/{token}/callback")
    assert callback.path == f"/interactions/{d['id']}/{d['token']}/callback"
    assert callback.json == {"type": 5}
    assert callback.query == {"with_response": "1"}
    assert "Authorization" not in callback.headers
    assert fake.interactions[d["id"]].callbacks == [{"type": 5}]
    edit = fake.calls_to("PATCH", route="/webhooks/{application_id}/{token}/messages/@original")
    assert edit[0].path == f"/webhooks/{APPLICATION_ID}/{d['token']}/messages/@original"
    followup = fake.calls_to("POST", route="/webhooks/{application_id}/{token}")[0]
    dispatched = fake.sent("INTERACTION_CREATE")[0]
    assert dispatched.seq < callback.seq < edit[0].seq < followup.seq
    assert [m["content"] for m in fake.posted(d["channel_id"])] == ["Stopped.", "Anything else?"]


async def test_button_answer_once_and_ephemeral(fake: FakeDiscord) -> None:
    d = fixture_d("interaction_create_button.json")
    async with running(fake) as client:
        waiter = await next_event(client, "interaction")
        await fake.dispatch("INTERACTION_CREATE", d)
        interaction: discord.Interaction = await waiter
        assert interaction.type is discord.InteractionType.component
        await interaction.response.send_message("Approved.", ephemeral=True)

    url = f"{fake.api_url}/interactions/{d['id']}/{d['token']}/callback"
    async with aiohttp.ClientSession() as session:
        async with session.post(url, json={"type": 6}) as again:
            assert again.status == 400
            assert await again.json() == {
                "message": "Interaction has already been acknowledged.",
                "code": 40060,
            }
        headers = {"Content-Type": "application/json"}
        async with session.post(url, data=b"{not json", headers=headers) as broken:
            assert broken.status == 400
            assert (await broken.json())["code"] == 50109
    assert fake.interactions[d["id"]].callbacks == [
        {"type": 4, "data": {"tts": False, "content": "Approved.", "flags": 64}}
    ]
    plan, answer = fake.posted(d["channel_id"])  # the clicked plan message is the bot's too
    assert plan["id"] == d["message"]["id"]
    assert answer["flags"] & 64
    assert answer["interaction_metadata"]["user"]["id"] == str(ALICE)
    assert not fake.sent("MESSAGE_CREATE")  # ephemeral answers are not dispatched


async def test_late_interaction_answer_is_unknown() -> None:
    async with FakeDiscord(interaction_timeout=0.0) as server:
        with server.patch_discord_py():
            async with running(server) as client:
                waiter = await next_event(client, "interaction")
                await server.dispatch(
                    "INTERACTION_CREATE", fixture_d("interaction_create_slash_in_thread.json")
                )
                interaction: discord.Interaction = await waiter
                await asyncio.sleep(0.01)
                with pytest.raises(discord.NotFound) as late:
                    await interaction.response.defer()
    assert late.value.code == 10062


async def test_command_sync_echoes_commands_with_ids(fake: FakeDiscord) -> None:
    async with running(fake) as client:
        tree = app_commands.CommandTree(client)

        @tree.command(name="stop", description="Stop the run in this thread")
        async def stop(interaction: discord.Interaction) -> None:
            """Never invoked here."""

        synced = await tree.sync()
        guild = discord.Object(id=int(GUILD_ID))
        tree.copy_global_to(guild=guild)
        in_guild = await tree.sync(guild=guild)
        again = await tree.sync(guild=guild)

    assert [c.name for c in synced] == ["stop"]
    assert synced[0].id > 0
    assert synced[0].application_id == int(APPLICATION_ID)
    assert [c.name for c in in_guild] == ["stop"]
    assert again[0].id == in_guild[0].id  # overwriting keeps a command's id
    assert fake.calls_to("PUT", path=f"/applications/{APPLICATION_ID}/commands")
    put = fake.calls_to("PUT", route="/applications/{application_id}/guilds/{guild_id}/commands")
    assert put[0].path == f"/applications/{APPLICATION_ID}/guilds/{GUILD_ID}/commands"
    assert put[0].json[0]["name"] == "stop"
    assert fake.commands[GUILD_ID][0]["guild_id"] == GUILD_ID
    assert fake.commands[None][0]["name"] == "stop"


async def test_reconnect_resumes_the_session(fake: FakeDiscord) -> None:
    async with running(fake) as client:
        resumed = await next_event(client, "resumed")
        await fake.request_reconnect()
        await fake.wait_resumed()
        await resumed
        message = await mention(fake, client)
        assert message.id == ROOT_MESSAGE

    assert fake.connections_made == 2
    assert fake.identify is not None
    [resume] = fake.resumes
    assert resume["token"] == TOKEN
    assert resume["seq"] == 2  # READY, GUILD_CREATE
    assert fake.sent("RESUMED")[0].s == 3
    assert fake.sent("MESSAGE_CREATE")[0].s == 4


async def test_members_intent_gets_its_chunk(fake: FakeDiscord) -> None:
    chosen = intents()
    chosen.members = True
    async with running(fake, chosen) as client:
        guild = client.get_guild(int(GUILD_ID))
        assert guild is not None
        assert {m.name for m in guild.members} == {"agent-bot", "alice_fake", "bob_fake"}
    assert fake.received(op=8)
    assert fake.sent("GUILD_MEMBERS_CHUNK")


async def test_privileged_intent_not_enabled_is_refused(fake: FakeDiscord) -> None:
    client = discord.Client(intents=discord.Intents.all(), guild_ready_timeout=0.1)
    try:
        with pytest.raises(discord.PrivilegedIntentsRequired):
            await asyncio.wait_for(client.start(TOKEN), 5)
    finally:
        await client.close()
    [closed] = [r for r in fake.frames if r.kind == "closed"]
    assert (closed.closed_by, closed.close_code) == ("server", 4014)


async def test_close_is_clean(fake: FakeDiscord) -> None:
    async with running(fake):
        pass
    await asyncio.sleep(0.05)  # no reconnection follows
    assert fake.connections_made == 1
    [closed] = [r for r in fake.frames if r.kind == "closed"]
    assert closed.closed_by == "client"
    # discord.py asks for 1000, but its reader task answers aiohttp's "closing" first
    # with its own default, 4000: the session stays resumable, as on Discord.
    assert closed.close_code == 4000
    assert fake.log[-1] is closed


async def test_a_shard_beyond_the_count_is_refused_with_4010(fake: FakeDiscord) -> None:
    client = discord.AutoShardedClient(intents=intents(), shard_count=2, shard_ids=[2])
    try:
        with pytest.raises(discord.ConnectionClosed) as refused:
            await asyncio.wait_for(client.start(TOKEN), 10)
    finally:
        await client.close()
    assert refused.value.code == 4010  # Invalid shard
    assert fake.identifies == []
    [closed] = [r for r in fake.frames if r.kind == "closed"]
    assert (closed.closed_by, closed.close_code) == ("server", 4010)


async def test_gateway_bot_recommends_the_shard_count_the_test_sets(fake: FakeDiscord) -> None:
    fake.gateway_shards = 3
    client = discord.Client(intents=intents())
    try:
        await client.login(TOKEN)
        shards, url, _limits = await client.http.get_bot_gateway()
    finally:
        await client.close()
    assert (shards, url) == (3, fake.gateway_url)
