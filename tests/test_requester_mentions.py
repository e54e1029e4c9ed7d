"""The requester is mentioned when something waits for them and when the answer is ready
(issue 31, "Stops and mentions"), unless ``mention_requester`` (a layered setting) is off.

Through the real SDKs against the fakes: on Slack the plan, the question and the final
answer each end with a line mentioning ``<@U...>``, and the plan's closing edit drops it
(nobody waits any more); a channel layer with ``mention_requester = false`` posts none.
On Discord the same lines, and the posts' ``allowed_mentions`` let that one user be
notified (every other mention still pings nobody). In the console, the requester's name.
"""

from __future__ import annotations

from bot.settings import Settings
from core.models.scripted import ScriptedModel
from tests.fakes.discord_api import shown_text
from tests.fakes.slack_api import TEAM_ID
from tests.harness import Chat
from tests.slack_harness import ALICE, CHANNEL, slack_workspace
from tests.test_discord_story import ALICE as DISCORD_ALICE
from tests.test_discord_story import discord_guild
from tests.test_settings_layers import layered
from tests.test_slack_story import finish, plan, question

WAITS_APPROVAL = ", this plan waits for your approval."
WAITS_ANSWER = ", this question waits for your answer."
READY = ", here is the answer."


def story() -> ScriptedModel:
    return ScriptedModel([plan(), question(), finish()])


async def test_on_slack_the_plan_the_question_and_the_answer_mention_the_requester(
    settings: Settings,
) -> None:
    async with slack_workspace(settings, story()) as ws:
        root = await ws.mention("please fix the flaky login test")
        plan_post = ws.post(root, "📋 Plan (v1)")
        assert plan_post["text"].endswith(f"\n<@{ALICE}>{WAITS_APPROVAL}")

        await ws.react(plan_post["ts"])
        ask = ws.post(root, "❓ Staging or production database?")
        assert ask["text"].endswith(f"\n<@{ALICE}>{WAITS_ANSWER}")
        edit = ws.calls("chat.update")[0]  # the plan, decided: nobody waits for it now
        assert edit.args["text"].startswith(f"✅ Approved by <@{ALICE}> (plan v1)\n📋 Plan (v1)\n")
        assert f"<@{ALICE}>{WAITS_APPROVAL}" not in edit.args["text"]

        await ws.reply(root, "staging, please")
        answer = ws.post(root, "✅ The login test is fixed.")
        assert answer["text"].endswith(f"\n<@{ALICE}>{READY}")
        texts = ws.api.posted_texts(CHANNEL, root)
        # the answer; the question, answered and edited to say so, waits for nobody now
        assert sum(f"<@{ALICE}>," in t for t in texts) == 1


async def test_a_channel_with_mention_requester_off_mentions_nobody(settings: Settings) -> None:
    quiet = layered(
        settings, slack={TEAM_ID: {"channels": {CHANNEL: {"mention_requester": False}}}}
    )
    async with slack_workspace(quiet, story()) as ws:
        root = await ws.mention("please fix the flaky login test")
        await ws.react(ws.post(root, "📋 Plan (v1)")["ts"])
        await ws.reply(root, "staging, please")

        texts = ws.api.posted_texts(CHANNEL, root)
        assert texts[-1].startswith("✅ The login test is fixed."), texts
        # all three: the plan approved, the question answered, the answer
        assert [t.split("\n")[0][:1] for t in texts] == ["✅", "💬", "✅"], texts
        assert not any(f"<@{ALICE}>," in t for t in texts), texts
        assert not any(WAITS_APPROVAL in c.args.get("text", "") for c in ws.calls())


async def test_on_discord_the_mention_of_the_requester_notifies_them_alone(
    settings: Settings,
) -> None:
    async with discord_guild(settings, story()) as g:
        thread = await g.mention("please fix the flaky login test")
        plan_message = g.post(thread, "📋 Plan (v1)")
        await g.react(thread, str(plan_message["id"]), "✅")
        await g.reply(thread, "staging, please")
        g.post(thread, "✅ The login test is fixed.")

        posts = [c.json for c in g.fake.calls_to("POST", path=f"/channels/{thread}/messages")]
        ends = [(shown_text(p).rpartition("\n")[2], p["allowed_mentions"]) for p in posts if p]
        only_alice = {"parse": [], "users": [DISCORD_ALICE]}
        assert ends == [
            (f"<@{DISCORD_ALICE}>{WAITS_APPROVAL}", only_alice),
            (f"<@{DISCORD_ALICE}>{WAITS_ANSWER}", only_alice),
            (f"<@{DISCORD_ALICE}>{READY}", only_alice),
        ]
        edit = g.fake.edits(plan_message["id"])[0]  # the approval (the card's steps follow)
        assert edit.json["allowed_mentions"] == {"parse": []}
        assert WAITS_APPROVAL not in shown_text(edit.json)


async def test_in_the_console_the_requester_is_named_and_the_setting_turns_it_off(
    settings: Settings, make_app
) -> None:
    app = await make_app(story())
    chat = Chat(app)
    await app.start()
    await chat.mention("please fix the flaky login test")
    await chat.react(chat.bot_message("📋 Plan (v1)"))
    await app.hub.settled()
    await chat.reply("staging, please")
    said = [line.strip() for line in chat.out.getvalue().splitlines()]
    assert said.count(f"alice{WAITS_APPROVAL}") == 1  # on the plan; its edit has none
    assert said.count(f"alice{WAITS_ANSWER}") == 1 and said.count(f"alice{READY}") == 1
    assert said[-1] == f"alice{READY}"

    settings.mention_requester = False
    quiet_app = await make_app(story())
    quiet = Chat(quiet_app)
    await quiet_app.start()
    await quiet.mention("please fix the flaky login test")
    await quiet.react(quiet.bot_message("📋 Plan (v1)"))
    await quiet_app.hub.settled()
    await quiet.reply("staging, please")
    transcript = quiet.out.getvalue()
    assert "✅ The login test is fixed." in transcript
    assert WAITS_APPROVAL not in transcript and WAITS_ANSWER not in transcript
    assert READY not in transcript
