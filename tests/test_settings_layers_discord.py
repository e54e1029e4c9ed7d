"""Settings in layers (issue 13) on Discord: a guild, its channels, and their threads.

The real discord.py client against FakeDiscord (the ``Guild`` harness of
``tests/test_discord_story.py``), with a second text channel beside the seeded one.
On Discord a thread is a channel of its own: its settings are its parent channel's,
which the adapter learns when it starts the thread on a mention (and from an
interaction's ``channel.parent_id``). Each test asserts what Discord received, what
the store holds and what the scripted model was asked. The Slack version of these
stories is ``tests/test_settings_layers.py``.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.discord.runner import commands
from bot.settings import Settings
from conversations.events import Author, CommandInvoked, InboundEvent, PlatformRef
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.entries import AssistantTurn
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.requests import RequestState
from core.vocabulary.tool_records import ToolState
from tests.fakes.discord_api import BOT_USER_ID, GUILD_ID, HUMAN_USERS, TEXT_CHANNEL_ID, FakeDiscord
from tests.test_discord_story import ALICE, BOB, Guild, discord_guild
from tests.test_settings_layers import layered
from tests.test_slack_story import finish, plan

BUILDS = TEXT_CHANNEL_ID  # the seeded #agent-work
DOCS = "1198206536908931999"  # a second text channel of the guild
CAROL = "773467649228931077"  # the docs channel's approver (never in the chat)
SECRET_REPO = "https://threadbot:hunter2secret@git.example.com/team/app.git"


@pytest.fixture(params=["memory", "sqlite"])
def settings(request: pytest.FixtureRequest, settings: Settings, tmp_path: Path) -> Settings:
    """The conftest's settings, on the in-memory store and on SQLite: a conversation's
    settings come from its stored binding (the thread and its parent channel)."""
    if request.param == "sqlite":
        settings.database_url = f"sqlite+aiosqlite:///{tmp_path / 'threadbot.db'}"
    return settings


def two_channels(settings: Settings) -> Settings:
    """One guild whose approver is Carol; #builds and #docs with their own model and
    instructions, and #builds with its own approvers (Bob: the guild lets its channels
    name their own)."""
    return layered(
        settings,
        model="claude-bot-default",
        discord={
            GUILD_ID: {
                "approvers": [f"user:{CAROL}"],
                "channels_may_loosen": ["approvers"],  # #builds names its own
                "git_repo": SECRET_REPO,
                "channels": {
                    BUILDS: {
                        "model": "claude-for-builds",
                        "instructions": "Builds channel: test before you change anything.",
                        "approvers": [f"user:{BOB}"],
                    },
                    DOCS: {
                        "model": "claude-for-docs",
                        "instructions": "Docs channel: only touch files under docs/.",
                    },
                },
            }
        },
    )


def in_builds(settings: Settings, **channel: Any) -> Settings:
    """``settings`` with ``channel`` as the seeded channel's layer."""
    return layered(settings, discord={GUILD_ID: {"channels": {BUILDS: channel}}})


@contextlib.asynccontextmanager
async def guild_of_two(settings: Settings, model: ScriptedModel) -> AsyncIterator[Guild]:
    """The fake guild with #docs beside the seeded channel (in GUILD_CREATE), the bot on it."""
    async with FakeDiscord() as fake:
        seeded = fake.channels[TEXT_CHANNEL_ID]
        fake.channels[DOCS] = copy.deepcopy(seeded) | {"id": DOCS, "name": "docs", "position": 1}
        g = Guild(fake, settings)
        try:
            await g.connect(model)
            yield g
        finally:
            await g.disconnect()


async def mention_in(g: Guild, channel: str, text: str, *, by: str = ALICE) -> str:
    """``by`` mentions the bot at the top of ``channel``; returns the message (= thread) id."""
    d = g.mention_d(text, by=by)
    username, name = HUMAN_USERS[by]
    d["author"].update(username=username, global_name=name)
    d["channel_id"] = channel
    await g.dispatch("MESSAGE_CREATE", d)
    return str(d["id"])


def thread_started(g: Guild, channel: str, message: str) -> bool:
    """Whether the bot started a thread on ``message`` of ``channel`` (and Discord made it)."""
    path = f"/channels/{channel}/messages/{message}/threads"
    return any(c.status == 201 for c in g.fake.calls_to("POST", path=path))


def plan_of(g: Guild, thread: str) -> str:
    """The id of the plan message in ``thread``."""
    return str(g.post(thread, "📋 Plan (v1)")["id"])


async def settings_typed_in(g: Guild, channel: dict[str, Any]) -> dict[str, Any]:
    """Alice types ``/threadbot settings`` in ``channel`` (a partial channel object);
    returns the interaction dispatched."""
    _stop, threadbot = g.fake.commands[GUILD_ID]
    assert threadbot["name"] == "threadbot"
    ask = g.interaction_d("interaction_create_slash_in_thread", channel["id"])
    ask["channel"] = channel
    ask["data"] = {
        "id": threadbot["id"],
        "name": "threadbot",
        "type": 1,
        "guild_id": GUILD_ID,
        "options": [{"name": "settings", "type": 1}],
    }
    await g.dispatch("INTERACTION_CREATE", ask)
    return ask


def answered_to_alice(g: Guild, ask: dict[str, Any]) -> str:
    """The text of the ephemeral answer that filled the deferral of the command ``ask``."""
    original = f"/webhooks/{BOT_USER_ID}/{ask['token']}/messages/@original"
    assert g.fake.calls_to("PATCH", path=original), "the deferral was not filled"
    assert not g.fake.calls_to("DELETE", path=original)
    message_id = g.fake.interactions[ask["id"]].original_message_id
    assert message_id is not None
    message = g.fake.messages[message_id]
    assert message["flags"] & 64 and message["interaction_metadata"]["user"]["id"] == ALICE
    return str(message["content"])


def lines_of(answer: str) -> dict[str, str]:
    """``{setting: line}`` of a ``/threadbot settings`` answer."""
    return {line.split(" = ")[0]: line for line in answer.splitlines() if " = " in line}


# --- two channels, one bot ---------------------------------------------------------------


async def test_two_channels_get_their_own_model_instructions_and_approvers(
    settings: Settings,
) -> None:
    model = ScriptedModel([plan(), plan(), finish("Builds are green.")])
    async with guild_of_two(two_channels(settings), model) as g:
        builds = await mention_in(g, BUILDS, "please fix the build")
        docs = await mention_in(g, DOCS, "please fix the docs")
        assert thread_started(g, BUILDS, builds) and thread_started(g, DOCS, docs)

        first, second = model.requests
        assert first.model == "claude-for-builds"
        assert "Builds channel: test before you change anything." in first.system
        assert second.model == "claude-for-docs"
        assert "Docs channel: only touch files under docs/." in second.system
        assert "Builds channel" not in second.system
        turns = {
            thread: [
                e.entry.model
                for e in (await g.snapshot(thread)).journal
                if isinstance(e.entry, AssistantTurn)
            ]
            for thread in (builds, docs)
        }
        assert turns == {builds: ["claude-for-builds"], docs: ["claude-for-docs"]}

        # Bob approves in #builds' thread (the channel's own approvers name him) ...
        await g.react(builds, plan_of(g, builds), "✅", by=BOB)
        snap = await g.snapshot(builds)
        assert snap.requests[0].state is RequestState.DECIDED
        assert snap.requests[0].decided_by is not None and snap.requests[0].decided_by.id == BOB
        assert g.posts(builds)[-1].startswith("✅ Builds are green.")
        assert model.requests[2].model == "claude-for-builds"
        assert (await g.snapshot(builds)).status.lifecycle is Lifecycle.DONE

        # ... but not in #docs' thread, whose approvers are the guild's (Carol alone).
        await g.react(docs, plan_of(g, docs), "✅", by=BOB)
        refusal = g.posts(docs)[-1]
        assert refusal.startswith("Only the requester or an approver can decide this"), refusal
        assert (await g.snapshot(docs)).requests[0].state is RequestState.OPEN
        assert str((await g.snapshot(docs)).status) == "waiting(plan_approval)"
        assert len(model.requests) == 3


# --- the in-chat command -------------------------------------------------------------------


async def test_threadbot_settings_in_a_thread_shows_its_channel_s_settings(
    settings: Settings,
) -> None:
    async with guild_of_two(two_channels(settings), ScriptedModel([plan()])) as g:
        docs = await mention_in(g, DOCS, "please fix the docs")
        held = g.fake.channels[docs]
        assert (held["type"], held["parent_id"]) == (11, DOCS)
        posted = len(g.fake.calls_to("POST", path=f"/channels/{docs}/messages"))

        ask = await settings_typed_in(
            g, {"id": docs, "type": 11, "parent_id": DOCS, "guild_id": GUILD_ID}
        )

        # Alice alone sees the answer: it fills the command's ephemeral deferral.
        assert g.fake.interactions[ask["id"]].callbacks == [{"type": 5, "data": {"flags": 64}}]
        answer = answered_to_alice(g, ask)
        assert len(g.fake.calls_to("POST", path=f"/channels/{docs}/messages")) == posted
        lines = lines_of(answer)
        assert lines["model"] == f"model = 'claude-for-docs'  (discord channel {DOCS})", answer
        assert lines["instructions"] == (
            f"instructions = 'Docs channel: only touch files under docs/.'  "
            f"(discord channel {DOCS})"
        )
        assert lines["approvers"] == f"approvers = ['user:{CAROL}']  (discord guild {GUILD_ID})"
        assert lines["output_limit"].endswith("(defaults)")
        for secret in ("fake-token", ask["token"], "hunter2secret"):
            assert secret not in answer
        assert "***@git.example.com" in lines["git_repo"]

        # Typed in #builds itself (no thread): #builds' settings, answered there.
        ask = await settings_typed_in(g, {"id": BUILDS, "type": 0, "guild_id": GUILD_ID})
        answer = answered_to_alice(g, ask)
        assert lines_of(answer)["model"] == (
            f"model = 'claude-for-builds'  (discord channel {BUILDS})"
        )
        assert lines_of(answer)["approvers"] == (
            f"approvers = ['user:{BOB}']  (discord channel {BUILDS})"
        )


async def test_a_channel_adding_an_approver_is_refused_and_said_so_in_chat(
    settings: Settings,
) -> None:
    """A channel may narrow its guild's approvers, not add one: without the guild's
    ``channels_may_loosen``, #builds' Bob is refused, and ``/threadbot settings`` says why."""
    guild = {"approvers": [f"user:{CAROL}"], "channels": {BUILDS: {"approvers": [f"user:{BOB}"]}}}
    async with guild_of_two(
        layered(settings, discord={GUILD_ID: guild}), ScriptedModel([plan()])
    ) as g:
        thread = await mention_in(g, BUILDS, "please fix the build")
        await g.react(thread, plan_of(g, thread), "✅", by=BOB)
        refusal = g.posts(thread)[-1]
        assert refusal.startswith("Only the requester or an approver can decide this"), refusal
        assert (await g.snapshot(thread)).requests[0].state is RequestState.OPEN

        before = len(g.fake.posted(thread))
        await settings_typed_in(
            g, {"id": thread, "type": 11, "parent_id": BUILDS, "guild_id": GUILD_ID}
        )
        answer = "\n".join(str(m["content"]) for m in g.fake.posted(thread)[before:])
        assert lines_of(answer)["approvers"] == (
            f"approvers = ['user:{CAROL}']  (discord guild {GUILD_ID}); discord channel {BUILDS} "
            f"sets approvers = ['user:{BOB}'] (looser than ['user:{CAROL}'], from discord guild "
            f"{GUILD_ID}): refused; a wider layer may allow it with "
            'channels_may_loosen = ["approvers"]'
        )


# --- mutating tools off ---------------------------------------------------------------------


async def test_a_channel_with_mutating_tools_off_refuses_them_with_a_note(
    settings: Settings,
) -> None:
    write = ScriptedCall("write_file", {"path": "notes.md", "content": "hi"})
    model = ScriptedModel(
        [plan(), ScriptedTurn(calls=[write]), finish("Could not write.")],
    )
    async with guild_of_two(in_builds(settings, mutating_tools=False), model) as g:
        thread = await mention_in(g, BUILDS, "write a note")
        await g.react(thread, plan_of(g, thread), "✅", by=ALICE)

        note = g.post(thread, "was not run")["content"]
        assert "was not run: Denied by policy: mutating tools are off here" in note
        snap = await g.snapshot(thread)
        assert snap.requests[0].state is RequestState.DECIDED
        (record,) = [r for r in snap.tool_calls.values() if r.name == "write_file"]
        assert record.state is ToolState.DENIED
        assert not (Path(snap.workspace) / "notes.md").exists()
        assert g.posts(thread)[-1].startswith("✅ Could not write.")

        # The same guild's other channel keeps the bot's setting: the write runs there.
        model.add(plan())
        model.add(ScriptedTurn(calls=[write]))
        model.add(finish("Written."))
        docs = await mention_in(g, DOCS, "write a note")
        await g.react(docs, plan_of(g, docs), "✅", by=ALICE)
        assert not [p for p in g.posts(docs) if "was not run" in p]
        assert (Path((await g.snapshot(docs)).workspace) / "notes.md").read_text() == "hi"


# --- per-user limits -----------------------------------------------------------------------


async def test_over_the_runs_at_once_limit_the_bot_says_so_in_the_thread(
    settings: Settings,
) -> None:
    model = ScriptedModel([plan()])
    limited = in_builds(settings, user_runs=1, user_runs_over="refuse")
    async with guild_of_two(limited, model) as g:
        first = await mention_in(g, BUILDS, "first")
        g.post(first, "📋 Plan (v1)")
        second = await mention_in(g, BUILDS, "second")

        assert thread_started(g, BUILDS, second)  # the thread exists: the answer is in it
        (said,) = g.posts(second)
        assert said.startswith(f"<@{ALICE}>, "), said
        assert "1 at once is the limit here" in said and "started nothing" in said
        assert len(model.requests) == 1
        conversations = await g.hub_app.store.threads.conversations()
        assert len(conversations) == 1
        # Bob is not Alice: his own count is zero.
        model.add(plan())
        bobs = await mention_in(g, BUILDS, "mine", by=BOB)
        g.post(bobs, "📋 Plan (v1)")
        assert len(await g.hub_app.store.threads.conversations()) == 2
        # #docs sets no limit: Alice may start one there.
        model.add(plan())
        docs = await mention_in(g, DOCS, "in docs")
        g.post(docs, "📋 Plan (v1)")
        assert len(await g.hub_app.store.threads.conversations()) == 3


# --- the command, registered and taken -----------------------------------------------------


async def test_threadbot_settings_is_registered_and_reaches_the_hub_as_a_command(
    settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/threadbot settings`` is registered beside ``/stop``, as a SUB_COMMAND option
    (https://discord.com/developers/docs/interactions/application-commands#subcommands-and-subcommand-groups),
    and typed in the channel it reaches the hub as ``threadbot`` with args ``settings``.
    """
    async with discord_guild(settings, ScriptedModel([])) as g:
        [sync] = g.fake.calls_to(
            "PUT", path=f"/applications/{BOT_USER_ID}/guilds/{GUILD_ID}/commands"
        )
        assert sync.json == commands("stop")
        stop, threadbot = g.fake.commands[GUILD_ID]
        assert (stop["name"], stop["type"], stop.get("options")) == ("stop", 1, None)
        assert (threadbot["name"], threadbot["type"]) == ("threadbot", 1)
        assert threadbot["options"] == [
            {"name": "settings", "description": "Show this channel's settings", "type": 1}
        ]
        handed: list[InboundEvent] = []
        take = g.hub_app.hub.handle

        async def spy(event: InboundEvent) -> None:
            handed.append(event)
            await take(event)

        monkeypatch.setattr(g.hub_app.hub, "handle", spy)

        ask = g.interaction_d("interaction_create_slash_in_thread", TEXT_CHANNEL_ID)
        ask["channel"] = {"id": TEXT_CHANNEL_ID, "type": 0, "guild_id": GUILD_ID}
        ask["data"] = {
            "id": threadbot["id"],
            "name": "threadbot",
            "type": 1,
            "guild_id": GUILD_ID,
            "options": [{"name": "settings", "type": 1}],
        }
        await g.dispatch("INTERACTION_CREATE", ask)

        assert handed == [
            CommandInvoked(
                delivery_key=f"discord:interaction:{ask['id']}",
                ref=PlatformRef(
                    platform="discord", workspace=GUILD_ID, channel=TEXT_CHANNEL_ID, user=ALICE
                ),
                author=Author(id=ALICE, name=f"<@{ALICE}>"),
                name="threadbot",
                args="settings",
            )
        ]
        assert g.fake.interactions[ask["id"]].callbacks == [{"type": 5, "data": {"flags": 64}}]


def test_a_stop_command_named_threadbot_is_registered_alone() -> None:
    """Discord refuses two commands of one type with one name: no second ``threadbot``."""
    assert [c["name"] for c in commands("halt")] == ["halt", "threadbot"]
    assert [c["name"] for c in commands("threadbot")] == ["threadbot"]
