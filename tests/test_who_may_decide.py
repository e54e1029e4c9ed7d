"""Who may decide on Slack and Discord (issue 9): platform ids, user groups and roles.

The real bolt app / slack-sdk and discord.py against the local fakes. Alice asks;
Carol is the approver. Mallory took the display name "carol", Eve took Carol's id
as hers: neither may approve (reaction or button) or stop, and the thread says so
while the request stays open. A Slack user group or a Discord role of approvers
decides through the platform's API, cached on a virtual clock: a member removed
from the group decides until the cache expires, and is refused after; a lookup
that fails refuses, and is asked again next time.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from adapters.discord.directory import DiscordDirectory
from adapters.slack.directory import SlackDirectory
from conversations.membership import DEFAULT_TTL
from core.models.scripted import ScriptedModel, ScriptedTurn
from core.vocabulary.errors import ModelError
from core.vocabulary.requests import RequestState
from tests.fakes.clock import VirtualClock
from tests.fakes.discord_api import GUILD_ID, shown_text
from tests.fakes.slack_api import TEAM_ID
from tests.slack_harness import ALICE, CHANNEL, Workspace, slack_workspace
from tests.test_discord_story import (  # noqa: F401  (the fixture restores discord.py)
    Guild,
    _restore_discord_py,
    buttons,
    discord_guild,
    fixture,
)
from tests.test_slack_story import finish, plan, plan_buttons

REFUSED = "Only the requester or an approver can {} this, {}."

# --- Slack ----------------------------------------------------------------------------

CAROL = "U0CAROL001"
MALLORY = "U0MALLORY1"  # display name "carol"
EVE = "U0EVE00001"  # display name "U0CAROL001"
GROUP = "S0APPROVE1"


def slack_people(ws: Workspace) -> None:
    ws.api.add_user(CAROL, "carol")
    ws.api.add_user(MALLORY, "carol", display_name="carol", real_name="Carol")
    ws.api.add_user(EVE, "eve", display_name=CAROL, real_name=CAROL)


async def slack_tries_everything(ws: Workspace, root: str, plan_message: dict[str, Any]) -> None:
    """Mallory and Eve approve (reaction, button) and stop (🛑, /stop, the stop word)."""
    approve = plan_buttons(plan_message)["Approve"]
    for who in (MALLORY, EVE):
        shown = ws.api.users[who]["profile"]["display_name"]
        await ws.react(plan_message["ts"], "white_check_mark", by=who)
        press = ws.press_body(plan_message, approve, by=who)
        press["user"].update(name=shown, username=shown)  # what Slack shows of them
        await ws.deliver("interactive", press)
        await ws.settle()
        await ws.react(plan_message["ts"], "octagonal_sign", by=who)
        await ws.slash("/stop", root, by=who)
        await ws.reply(root, "stop", by=who)


async def test_slack_display_names_equal_to_an_approvers_name_or_id_decide_nothing(
    settings,
) -> None:
    settings.approvers = [CAROL, "carol"]  # a name slipped in: never compared on Slack
    model = ScriptedModel([plan(), finish("Approved by Carol.")])
    async with slack_workspace(settings, model) as ws:
        slack_people(ws)
        root = await ws.mention()
        plan_message = ws.post(root, "📋 Plan (v1)")

        await slack_tries_everything(ws, root, plan_message)

        said = ws.api.posted_texts(CHANNEL, root)
        for who in (MALLORY, EVE):
            assert said.count(REFUSED.format("decide", f"<@{who}>")) == 2
            assert said.count(REFUSED.format("stop", f"<@{who}>")) == 3
        snap = await ws.snapshot(root)
        assert [r.state for r in snap.requests] == [RequestState.OPEN]
        assert str(snap.status) == "waiting(plan_approval)"
        assert len(model.requests) == 1

        await ws.react(plan_message["ts"], "white_check_mark", by=CAROL)
        ws.post(root, "✅ Approved by Carol.")


async def slack_job(ws: Workspace, text: str, by: str) -> str:
    """Alice asks for ``text``; ``by`` reacts ✅ on the plan; returns the thread."""
    root = await ws.mention(text)
    await ws.react(ws.post(root, "📋 Plan (v1)")["ts"], "white_check_mark", by=by)
    return root


async def test_a_slack_user_group_decides_until_a_removal_outlives_the_cache(settings) -> None:
    settings.approvers = [f"group:{GROUP}"]
    clock = VirtualClock()
    model = ScriptedModel([plan(), finish("First."), plan(), finish("Second."), plan()])
    async with slack_workspace(settings, model) as ws:
        ws.api.set_group(GROUP, [CAROL, "U0DAVE0001"])
        ws.app.add_membership(SlackDirectory(client=ws.adapter.client, clock=clock))

        first = await slack_job(ws, "first job", CAROL)
        ws.post(first, "✅ First.")
        [lookup] = ws.calls("usergroups.users.list")
        assert (lookup.args["usergroup"], lookup.args["team_id"]) == (GROUP, TEAM_ID)

        ws.api.set_group(GROUP, ["U0DAVE0001"])  # Carol leaves the group
        clock.advance(DEFAULT_TTL - 1)
        second = await slack_job(ws, "second job", CAROL)
        ws.post(second, "✅ Second.")  # the kept member list still has her
        assert len(ws.calls("usergroups.users.list")) == 1

        clock.advance(2)
        third = await slack_job(ws, "third job", CAROL)
        ws.post(third, REFUSED.format("decide", f"<@{CAROL}>"))
        assert len(ws.calls("usergroups.users.list")) == 2
        assert [r.state for r in (await ws.snapshot(third)).requests] == [RequestState.OPEN]
        assert len(model.requests) == 5


async def test_a_failed_slack_group_lookup_refuses_and_is_asked_again(settings, caplog) -> None:
    settings.approvers = [f"group:{GROUP}"]
    model = ScriptedModel([plan(), finish("Done.")])
    async with slack_workspace(settings, model) as ws:
        ws.api.set_group(GROUP, [CAROL])
        ws.app.add_membership(SlackDirectory(client=ws.adapter.client, clock=VirtualClock()))
        ws.api.fail("usergroups.users.list", error="missing_scope")

        with caplog.at_level(logging.WARNING, logger="conversations.access"):
            root = await slack_job(ws, "a job", CAROL)
        ws.post(root, REFUSED.format("decide", f"<@{CAROL}>"))
        assert [r.state for r in (await ws.snapshot(root)).requests] == [RequestState.OPEN]
        [warning] = [r.getMessage() for r in caplog.records if r.name == "conversations.access"]
        assert CAROL in warning and "missing_scope" in warning and "reinstall" in warning

        await ws.react(ws.post(root, "📋 Plan (v1)")["ts"], "white_check_mark", by=CAROL)
        ws.post(root, "✅ Done.")  # the failure was not kept: Slack was asked again
        assert len(ws.calls("usergroups.users.list")) == 2


# --- Discord --------------------------------------------------------------------------

D_CAROL = "773086210457731077"
D_MALLORY = "873086210457731078"  # nick "carol"
D_EVE = "973086210457731079"  # nick and global name "773086210457731077"
ROLE = "1198206788567179999"


def react_d(g: Guild, thread: str, message: str, emoji: str, member: dict[str, Any]) -> Any:
    d = g.reaction_d(thread, message, emoji, str(member["user"]["id"]))
    d["member"] = copy.deepcopy(member)
    return d


def said_d(g: Guild, thread: str, text: str, member: dict[str, Any]) -> Any:
    d = fixture("message_create_in_thread")
    d.update(id=g.fake.snowflake(), channel_id=thread, content=text, guild_id=GUILD_ID)
    d["author"] = copy.deepcopy(member["user"])
    d["member"] = {k: v for k, v in copy.deepcopy(member).items() if k != "user"}
    return d


def interaction_as(g: Guild, name: str, thread: str, member: dict[str, Any]) -> Any:
    d = g.interaction_d(name, thread)
    d["member"] = copy.deepcopy(member)
    return d


async def discord_tries_everything(g: Guild, thread: str, member: dict[str, Any]) -> None:
    plan_message = g.post(thread, "📋 Plan (v1)")
    plan_id = str(plan_message["id"])
    await g.dispatch("MESSAGE_REACTION_ADD", react_d(g, thread, plan_id, "✅", member))
    press = interaction_as(g, "interaction_create_button", thread, member)
    press["message"] = copy.deepcopy(plan_message)
    press["data"] = {"custom_id": buttons(plan_message)["Approve"], "component_type": 2}
    await g.dispatch("INTERACTION_CREATE", press)
    await g.dispatch("MESSAGE_REACTION_ADD", react_d(g, thread, plan_id, "🛑", member))
    stop = interaction_as(g, "interaction_create_slash_in_thread", thread, member)
    await g.dispatch("INTERACTION_CREATE", stop)
    await g.dispatch("MESSAGE_CREATE", said_d(g, thread, "stop", member))


async def test_discord_display_names_equal_to_an_approvers_name_or_id_decide_nothing(
    settings,
) -> None:
    """Refused, and told so by mention: a nickname that is an approver's id is never
    said back as if it named the approver (the mention pings no one)."""
    settings.approvers = [f"user:{D_CAROL}", "carol"]  # a name slipped in: never compared
    model = ScriptedModel([plan(), finish("Approved by Carol.")])
    async with discord_guild(settings, model) as g:
        carol = g.fake.add_member(D_CAROL, "carol_fake", global_name="Carol")
        mallory = g.fake.add_member(D_MALLORY, "mallory_fake", global_name="Mal", nick="carol")
        eve = g.fake.add_member(D_EVE, "eve_fake", global_name=D_CAROL, nick=D_CAROL)
        thread = await g.mention()

        for member, who in ((mallory, D_MALLORY), (eve, D_EVE)):
            await discord_tries_everything(g, thread, member)
            said = g.posts(thread)
            assert said.count(REFUSED.format("decide", f"<@{who}>")) == 2
            assert said.count(REFUSED.format("stop", f"<@{who}>")) == 3
        refusals = [
            call.json
            for call in g.fake.calls_to("POST", path=f"/channels/{thread}/messages")
            if isinstance(call.json, dict) and "approver can" in str(call.json.get("content"))
        ]
        assert len(refusals) == 10
        assert all(body["allowed_mentions"] == {"parse": []} for body in refusals)
        assert not [body for body in refusals if D_CAROL in body["content"]]
        assert not [body for body in refusals if "carol" in body["content"]]
        snap = await g.snapshot(thread)
        assert [r.state for r in snap.requests] == [RequestState.OPEN]
        assert str(snap.status) == "waiting(plan_approval)"
        assert len(model.requests) == 1

        plan_message = g.post(thread, "📋 Plan (v1)")
        await g.dispatch(
            "MESSAGE_REACTION_ADD", react_d(g, thread, str(plan_message["id"]), "✅", carol)
        )
        g.post(thread, "✅ Approved by Carol.")
        decided = shown_text(g.fake.messages[str(plan_message["id"])])
        assert decided.startswith(f"✅ Approved by <@{D_CAROL}> (plan v1)"), decided


async def discord_job(g: Guild, text: str, member: dict[str, Any]) -> str:
    thread = await g.mention(text)
    plan_id = str(g.post(thread, "📋 Plan (v1)")["id"])
    await g.dispatch("MESSAGE_REACTION_ADD", react_d(g, thread, plan_id, "✅", member))
    return thread


def member_lookups(g: Guild) -> list[str]:
    """Paths of the Get Guild Member calls, answered or refused."""
    return [c.path for c in g.fake.calls_to("GET") if c.path.startswith("/guilds/")]


async def test_a_discord_role_decides_until_a_removal_outlives_the_cache(settings) -> None:
    settings.approvers = [f"role:{ROLE}"]
    clock = VirtualClock()
    model = ScriptedModel([plan(), finish("First."), plan(), finish("Second."), plan()])
    async with discord_guild(settings, model) as g:
        carol = g.fake.add_member(D_CAROL, "carol_fake", global_name="Carol", roles=[ROLE])
        assert g.adapter is not None
        g.hub_app.add_membership(DiscordDirectory(client=g.adapter.client, clock=clock))

        first = await discord_job(g, "first job", carol)
        g.post(first, "✅ First.")
        assert member_lookups(g) == [f"/guilds/{GUILD_ID}/members/{D_CAROL}"]

        g.fake.set_roles(D_CAROL, [])  # the role is taken away
        clock.advance(DEFAULT_TTL - 1)
        second = await discord_job(g, "second job", carol)
        g.post(second, "✅ Second.")
        assert len(member_lookups(g)) == 1

        clock.advance(2)
        third = await discord_job(g, "third job", carol)
        g.post(third, REFUSED.format("decide", f"<@{D_CAROL}>"))
        assert len(member_lookups(g)) == 2
        assert [r.state for r in (await g.snapshot(third)).requests] == [RequestState.OPEN]


async def test_a_failed_discord_member_lookup_refuses_and_is_asked_again(settings, caplog) -> None:
    settings.approvers = [f"role:{ROLE}"]
    model = ScriptedModel([plan(), finish("Done.")])
    async with discord_guild(settings, model) as g:
        carol = g.fake.add_member(D_CAROL, "carol_fake", global_name="Carol", roles=[ROLE])
        assert g.adapter is not None
        g.hub_app.add_membership(DiscordDirectory(client=g.adapter.client, clock=VirtualClock()))
        g.fake.fail("/guilds/", 403, 50013, "Missing Permissions", method="GET")

        with caplog.at_level(logging.WARNING, logger="conversations.access"):
            thread = await discord_job(g, "a job", carol)
        g.post(thread, REFUSED.format("decide", f"<@{D_CAROL}>"))
        assert [r.state for r in (await g.snapshot(thread)).requests] == [RequestState.OPEN]
        [warning] = [r.getMessage() for r in caplog.records if r.name == "conversations.access"]
        assert D_CAROL in warning and "403" in warning

        plan_message = g.post(thread, "📋 Plan (v1)")
        press = interaction_as(g, "interaction_create_button", thread, carol)
        press["message"] = copy.deepcopy(plan_message)
        press["data"] = {"custom_id": buttons(plan_message)["Approve"], "component_type": 2}
        await g.dispatch("INTERACTION_CREATE", press)  # a second ✅ would be the same delivery
        g.post(thread, "✅ Done.")
        assert len(member_lookups(g)) == 2


async def test_slack_alice_still_decides_her_own_plan_with_no_lookup(settings) -> None:
    settings.approvers = [f"group:{GROUP}"]
    model = ScriptedModel([plan(), finish("Mine.")])
    async with slack_workspace(settings, model) as ws:
        ws.app.add_membership(SlackDirectory(client=ws.adapter.client, clock=VirtualClock()))
        root = await slack_job(ws, "my job", ALICE)
        ws.post(root, "✅ Mine.")
        assert ws.calls("usergroups.users.list") == []


async def test_a_bystanders_retry_on_slack_is_refused_and_changes_nothing(settings) -> None:
    failing = ScriptedTurn(error=ModelError("The model API is overloaded"))
    model = ScriptedModel([plan(), failing, finish("Back.")])
    async with slack_workspace(settings, model) as ws:
        root = await slack_job(ws, "a job", ALICE)
        ws.post(root, "⚠️ The model API is overloaded")
        asked = len(model.requests)

        await ws.reply(root, "retry", by=MALLORY)

        assert ws.api.posted_texts(CHANNEL, root)[-1] == REFUSED.format("decide", f"<@{MALLORY}>")
        snap = await ws.snapshot(root)
        assert str(snap.status) == "waiting(retry)"
        assert len(model.requests) == asked
        await ws.reply(root, "retry", by=ALICE)
        ws.post(root, "✅ Back.")
