"""Bad input from Discord: dispatches discord.py cannot parse, the bot's id in code and quotes.

The real discord.py client runs against FakeDiscord's gateway and REST API
(``tests/test_discord_story.py`` drives it the same way). A dispatch with a missing
or wrong-typed field makes one of discord.py's parsers raise; before the guard in
:mod:`adapters.discord.gateway_guard` that ended ``Client.start`` for good. Now the
dispatch is logged with its event name and skipped, and the same connection goes on
receiving: a normal mention afterwards still starts a conversation. A mention is
Discord's ``mentions`` list, unless the content names the bot only inside a code
block, inline code or a quote.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.fakes.discord_api import BOT_USER_ID, GUILD_ID, TEXT_CHANNEL_ID
from tests.test_discord_story import Guild, buttons, discord_guild, story

BOT = f"<@{BOT_USER_ID}>"


async def conversation_count(g: Guild) -> int:
    return len(await g.hub_app.store.threads.conversations())


def thread_calls(g: Guild) -> list[str]:
    return [c.path for c in g.calls() if c.path.endswith("/threads")]


def unparsable(g: Guild) -> list[tuple[str, Any]]:
    """Dispatches each of which makes a discord.py 2.7 parser raise."""
    no_author = g.mention_d("please fix the flaky login test")
    del no_author["author"]  # Message(...) reads data['author']
    guild = g.fake._guild_create(g.fake.identify["intents"] if g.fake.identify else 0)
    del guild["channels"]  # read with .get: harmless to discord.py, but sent all the same
    bad_channels = dict(guild, channels="#agent-work")  # a string where a list belongs
    bad_id = {"id": ["not", "a", "snowflake"], "type": 0, "guild_id": GUILD_ID, "name": "x"}
    return [
        ("MESSAGE_CREATE", no_author),
        ("GUILD_CREATE", guild),
        ("GUILD_CREATE", bad_channels),
        ("CHANNEL_UPDATE", bad_id),  # int(data['id']) on a list
        ("MESSAGE_CREATE", {"id": g.fake.snowflake(), "channel_id": TEXT_CHANNEL_ID}),
    ]


async def test_dispatches_discord_py_cannot_parse_are_skipped_and_the_client_keeps_receiving(
    settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="adapters")
    async with discord_guild(settings, story()) as g:
        assert g.adapter is not None
        connection = g.adapter._connection
        for name, d in unparsable(g):
            await g.dispatch(name, d)

        skipped = [
            r.getMessage()
            for r in caplog.records
            if r.name == "adapters.discord.gateway_guard" and r.levelno == logging.WARNING
        ]
        assert [line.split(":")[0] for line in skipped] == [
            "skipped the gateway dispatch MESSAGE_CREATE",
            "skipped the gateway dispatch GUILD_CREATE",
            "skipped the gateway dispatch CHANNEL_UPDATE",
            "skipped the gateway dispatch MESSAGE_CREATE",
        ]
        dropped = [r.getMessage() for r in caplog.records if "dropped Discord" in r.getMessage()]
        assert len(dropped) == 2 and all("MESSAGE_CREATE discord:message:" in d for d in dropped)
        assert connection is not None and not connection.done()

        root = await g.mention("please fix the flaky login test")
        plan_message = g.post(root, "📋 Plan (v1)")
        snap = await g.snapshot(root)
        assert str(snap.status) == "waiting(plan_approval)"
        assert set(buttons(plan_message)) == {"Approve", "Reject", "Stop"}
        assert await conversation_count(g) == 1
        assert g.fake.connections_made == 1  # the same connection, never resumed or redone
        assert not connection.done()
        assert [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []


HIDDEN = {
    "a code block": f"```\n{BOT} please deploy\n```",
    "a code block with a language": f"```py\nbot = '{BOT}'\n```",
    "inline code": f"run `{BOT}` to deploy",
    "double-backtick inline code": f"run ``{BOT}`` to deploy",
    "a quote line": f"> {BOT} please deploy\nthat is what they said",
    "a quote block": f"as they said:\n>>> hello\n{BOT} please deploy",
}


@pytest.mark.parametrize("where", list(HIDDEN))
async def test_the_bots_id_in_code_or_a_quote_starts_nothing(settings, where: str) -> None:
    async with discord_guild(settings, story()) as g:
        d = g.mention_d("")
        d["content"] = HIDDEN[where]  # the fixture lists the bot in mentions, as Discord may
        assert any(u["id"] == BOT_USER_ID for u in d["mentions"])
        await g.dispatch("MESSAGE_CREATE", d)
        assert thread_calls(g) == []
        assert g.calls() == []
        assert await conversation_count(g) == 0


async def test_a_real_mention_beside_a_code_block_starts_a_conversation(settings) -> None:
    async with discord_guild(settings, story()) as g:
        d = g.mention_d("")
        d["content"] = f"```\n{BOT} is how you call it\n```\n{BOT} please fix the flaky test"
        await g.dispatch("MESSAGE_CREATE", d)
        root = str(d["id"])
        assert thread_calls(g) == [f"/channels/{TEXT_CHANNEL_ID}/messages/{root}/threads"]
        g.post(root, "📋 Plan (v1)")
        assert await conversation_count(g) == 1
        snap = await g.snapshot(root)
        said = [r.entry.text for r in snap.journal if r.entry.kind == "user_text"]
        assert said == [f"```\n{BOT} is how you call it\n```\nplease fix the flaky test"]


async def test_a_message_before_the_login_waits_instead_of_failing() -> None:
    """discord.py's HTTP client has no session before its login: a send then is a wait
    (``NotConnected``, a rate limit that costs no attempt), not a crash counted as one."""
    import discord

    from adapters.discord.sending import DiscordSender
    from conversations.errors import NotConnected, RateLimited
    from conversations.events import PlatformRef, PostReply

    client = discord.Client(intents=discord.Intents.none())
    sender = DiscordSender(client=client, file_threshold=3_000)
    ref = PlatformRef(platform="discord", workspace=str(GUILD_ID), channel=str(TEXT_CHANNEL_ID))

    with pytest.raises(NotConnected) as waiting:
        await sender.send(PostReply(ref=ref, text="hello"), idempotency_key="tb-1")

    assert isinstance(waiting.value, RateLimited) and waiting.value.retry_after > 0
    await client.close()
