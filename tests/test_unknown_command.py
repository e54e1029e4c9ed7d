"""A slash command the bot does not know is answered to the person alone, on every platform.

A command can reach the bot that it has no use for: a Slack app's manifest lists a
command the code dropped, a Discord guild keeps a command an older version
registered. The hub answers "Unknown command /deploy." to the person who typed it,
not to the channel: on Slack with ``chat.postEphemeral``
(https://docs.slack.dev/reference/methods/chat.postEphemeral), on Discord as the
command's own ephemeral interaction response (flags 64:
https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-response-object-messages),
and the console marks what it shows one person only. Asserted on what the fakes
received, with the real bolt app, slack-sdk and discord.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from core.models.scripted import ScriptedModel
from tests.fakes.discord_api import APPLICATION_ID, GUILD_ID, TEXT_CHANNEL_ID
from tests.slack_harness import ALICE, CHANNEL, Transport, slack_workspace
from tests.test_discord_story import ALICE as D_ALICE
from tests.test_discord_story import (  # noqa: F401  (the fixture restores discord.py)
    Guild,
    _restore_discord_py,
    discord_guild,
)
from tests.test_story_console import run_console

EPHEMERAL = 1 << 6
UNKNOWN = "Unknown command /deploy."


@pytest.mark.parametrize("transport", ["http", "socket"])
async def test_slack_answers_an_unknown_command_to_the_person_alone(
    settings, transport: Transport
) -> None:
    async with slack_workspace(settings, ScriptedModel([]), transport=transport) as ws:
        delivery = await ws.slash("/deploy", "production")

        assert delivery.status == 200  # over Socket Mode: the envelope was acked
        assert [call.method for call in ws.calls()] == ["chat.postEphemeral"]
        [ephemeral] = ws.api.ephemerals
        assert (ephemeral["channel"], ephemeral["user"], ephemeral["text"]) == (
            CHANNEL,
            ALICE,
            UNKNOWN,
        )
        assert ws.api.posted_texts(CHANNEL) == []
        assert await ws.conversation_ids() == []


def command_d(g: Guild, name: str, channel: dict[str, Any]) -> dict[str, Any]:
    """Alice's ``/name`` in ``channel`` (a partial channel object), as Discord sends it."""
    d = g.interaction_d("interaction_create_slash_in_thread", channel["id"])
    d["channel"] = channel
    d["data"] = {"id": g.fake.snowflake(), "name": name, "type": 1, "guild_id": GUILD_ID}
    return d


async def test_discord_answers_an_unknown_command_in_its_own_ephemeral_response(
    settings,
) -> None:
    async with discord_guild(settings, ScriptedModel([])) as g:
        in_channel = {"id": TEXT_CHANNEL_ID, "type": 0, "guild_id": GUILD_ID}
        deploy = command_d(g, "deploy", in_channel)  # left registered by an older version
        await g.dispatch("INTERACTION_CREATE", deploy)

        interaction = g.fake.interactions[deploy["id"]]
        assert interaction.callbacks == [{"type": 5, "data": {"flags": EPHEMERAL}}]
        original = f"/webhooks/{APPLICATION_ID}/{deploy['token']}/messages/@original"
        [filled] = g.fake.calls_to("PATCH", path=original)
        assert filled.json == {
            "content": UNKNOWN,
            "allowed_mentions": {"parse": []},
            "components": [],
        }
        callbacks = "/interactions/{interaction_id}/{token}/callback"
        [callback] = g.fake.calls_to("POST", route=callbacks)
        assert callback.seq < filled.seq
        assert interaction.original_message_id is not None
        answer = g.fake.messages[interaction.original_message_id]
        assert answer["content"] == UNKNOWN
        assert answer["flags"] & EPHEMERAL  # Alice alone sees it
        assert answer["interaction_metadata"]["user"]["id"] == D_ALICE
        assert not g.fake.calls_to("DELETE", path=original)  # the answer stays
        assert not g.fake.calls_to("POST", path=f"/channels/{TEXT_CHANNEL_ID}/messages")
        assert await g.hub_app.store.threads.conversations() == []


async def test_the_console_marks_an_answer_for_one_person(make_app) -> None:
    app = await make_app(ScriptedModel([]))

    transcript = await run_console(app, "/settings\n/deploy\n")

    shown = transcript.splitlines()
    assert shown[shown.index("alice: /settings") + 1] == (
        "[1] threadbot (only to alice): Settings here, each with the layer it came from:"
    )
    assert not any("```" in line for line in shown)  # a terminal shows no Markdown fences
    assert "! unknown command /deploy (try /help; start the line with \\ to send it as text)" in (
        shown
    )
