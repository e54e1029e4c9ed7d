"""Settings in layers (issue 13): per workspace, guild and channel, each value traced.

One bot serves two Slack channels with their own model, instructions and
approvers (through the real bolt app and slack-sdk against the fake Slack); the
policy across layers (a lower layer's ``deny`` or ``ask`` beats a channel's
``allow``); a channel with mutating tools off; the per-user limits; ``threadbot
settings explain``; a bad layer refused at start; the in-chat command without
secrets. The same on Discord: ``tests/test_settings_layers_discord.py``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.commands import WHOLE_BOT_LIMITS
from bot.layer_tables import LAYERED, POLICY_KEYS
from bot.settings import Settings
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.policy.policy import Permission
from core.run.settings import EngineSettings
from core.vocabulary.entries import AssistantTurn
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.requests import RequestState
from core.vocabulary.tool_records import ToolState
from tests import forkserver
from tests.conftest import wait_for
from tests.fakes.slack_api import BOT_USER_ID, TEAM_ID
from tests.slack_harness import ALICE, BOB, CHANNEL, Workspace, slack_workspace
from tests.test_slack_story import plan

OTHER = "C0DOCS00002"


def layered(settings: Settings, **changes: Any) -> Settings:
    """``settings`` with ``changes`` validated as a person's TOML would be."""
    data = settings.model_dump(exclude_unset=True) | changes
    return Settings.model_validate(data)


def two_channels(settings: Settings) -> Settings:
    return layered(
        settings,
        model="claude-bot-default",
        slack={
            TEAM_ID: {
                "approvers": [BOB],
                "channels_may_loosen": ["approvers"],  # the docs channel names its own
                "channels": {
                    CHANNEL: {
                        "model": "claude-for-builds",
                        "instructions": "Builds channel: test before you change anything.",
                    },
                    OTHER: {
                        "model": "claude-for-docs",
                        "instructions": "Docs channel: only touch files under docs/.",
                        "approvers": ["U0CAROL001"],
                    },
                },
            }
        },
    )


async def mention_in(ws: Workspace, channel: str, text: str, *, by: str = ALICE) -> str:
    """``by`` mentions the bot at the top of ``channel``; returns the message ts."""
    said = f"<@{BOT_USER_ID}> {text}"
    ts = str(ws.api.add_message(channel, said, user=by)["ts"])
    for body in (ws.mention_body(ts, said, by=by), ws.message_body(ts, said, by=by)):
        body["event"]["channel"] = channel
        await ws.deliver("events_api", body)
    await ws.settle()
    return ts


async def react_in(ws: Workspace, channel: str, message: str, *, by: str) -> None:
    body = ws.reaction_body(message, "white_check_mark", by=by)
    body["event"]["item"]["channel"] = channel
    await ws.deliver("events_api", body)
    await ws.settle()


def bot_posts(ws: Workspace, channel: str, thread: str) -> list[dict[str, Any]]:
    return [m for m in ws.api.thread(channel, thread) if m.get("bot_id")]


def posted(ws: Workspace, channel: str, thread: str, marker: str) -> dict[str, Any]:
    found = [m for m in bot_posts(ws, channel, thread) if marker in str(m.get("text"))]
    assert found, f"no {marker!r} in {[m.get('text') for m in bot_posts(ws, channel, thread)]}"
    return found[-1]


# --- two channels, one bot ---------------------------------------------------------------


async def test_two_channels_get_their_own_model_instructions_and_approvers(settings) -> None:
    model = ScriptedModel([plan(), plan()])
    async with slack_workspace(two_channels(settings), model) as ws:
        builds = await mention_in(ws, CHANNEL, "please fix the build")
        docs = await mention_in(ws, OTHER, "please fix the docs")

        first, second = model.requests
        assert first.model == "claude-for-builds"
        assert "Builds channel: test before you change anything." in first.system
        assert second.model == "claude-for-docs"
        assert "Docs channel: only touch files under docs/." in second.system
        assert "Builds channel" not in second.system
        snaps = {builds: await ws.snapshot(builds), docs: await ws.snapshot(docs, OTHER)}
        turns = {
            ts: [e.entry.model for e in s.journal if isinstance(e.entry, AssistantTurn)]
            for ts, s in snaps.items()
        }
        assert turns == {builds: ["claude-for-builds"], docs: ["claude-for-docs"]}

        # Bob approves in the builds channel (the workspace's approvers) ...
        await react_in(ws, CHANNEL, posted(ws, CHANNEL, builds, "📋 Plan")["ts"], by=BOB)
        assert (await ws.snapshot(builds)).requests[0].state is RequestState.DECIDED
        # ... but not in the docs channel, whose own approvers are Carol alone.
        await react_in(ws, OTHER, posted(ws, OTHER, docs, "📋 Plan")["ts"], by=BOB)
        assert (await ws.snapshot(docs, OTHER)).requests[0].state is RequestState.OPEN
        refusal = bot_posts(ws, OTHER, docs)[-1]["text"]
        assert refusal.startswith("Only the requester or an approver can decide this"), refusal


def progress(n: int, gate: asyncio.Event | None = None) -> ScriptedTurn:
    note = {"step": f"step {n} of 2", "note": f"working on part {n}"}
    return ScriptedTurn(calls=[ScriptedCall("report_progress", note)], gate=gate)


async def test_a_channel_s_progress_mode_is_how_its_notes_show(settings) -> None:
    done = ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Done."})])
    gates = [asyncio.Event(), asyncio.Event()]  # the second note comes after the first shows
    script = [plan(), progress(1), progress(2, gates[0]), done]
    script += [plan(), progress(1), progress(2, gates[1]), done]
    s = layered(settings, slack={TEAM_ID: {"channels": {CHANNEL: {"progress_mode": "status"}}}})
    async with slack_workspace(s, ScriptedModel(script)) as ws:

        def notes(channel: str, thread: str) -> list[str]:
            return [
                m["text"] for m in bot_posts(ws, channel, thread) if "working on part" in m["text"]
            ]

        async def story(channel: str, gate: asyncio.Event) -> str:
            root = await mention_in(ws, channel, "fix it")
            body = ws.reaction_body(posted(ws, channel, root, "📋 Plan")["ts"], by=ALICE)
            body["event"]["item"]["channel"] = channel
            await ws.deliver("events_api", body)
            await wait_for(lambda: any("part 1" in n for n in notes(channel, root)))
            gate.set()
            await ws.settle()
            return root

        edited = await story(CHANNEL, gates[0])
        replied = await story(OTHER, gates[1])

        # status: one reply, edited to hold every note
        (status,) = notes(CHANNEL, edited)
        assert "part 1" in status and "part 2" in status
        updates = [c.args["text"] for c in ws.calls("chat.update") if c.args["channel"] == CHANNEL]
        assert any("part 2" in text for text in updates)
        # replies (the bot's default): a reply per note, none edited
        assert [("part 1" in n, "part 2" in n) for n in notes(OTHER, replied)] == [
            (True, False),
            (False, True),
        ]
        other_updates = [c for c in ws.calls("chat.update") if c.args["channel"] == OTHER]
        assert not any("working on part" in c.args["text"] for c in other_updates)


def test_a_channel_s_caps_repository_and_lifetime_reach_its_runs(settings) -> None:
    channel = {
        "command_timeout": 30.0,
        "command_cpu_seconds": 10.0,
        "command_memory_mb": 256,
        "command_processes": 64,
        "output_limit": 5000,
        "request_ttl": 600.0,
        "git_repo": "https://git.example.com/team/app.git",
        "fallback_models": ["claude-backup"],
    }
    s = layered(settings, slack={TEAM_ID: {"channels": {CHANNEL: channel}}})
    run = s.layers().at("slack", TEAM_ID, CHANNEL).engine_settings(EngineSettings())
    assert (
        run.command_timeout,
        run.command_cpu_seconds,
        run.command_memory_mb,
        run.command_processes,
        run.output_limit,
        run.request_ttl,
        run.git_repo,
        run.fallback_models,
    ) == (30.0, 10.0, 256, 64, 5000, 600.0, channel["git_repo"], ("claude-backup",))
    elsewhere = s.layers().at("slack", TEAM_ID, OTHER).engine_settings(EngineSettings())
    assert (elsewhere.command_timeout, elsewhere.git_repo) == (120.0, None)
    assert (elsewhere.command_memory_mb, elsewhere.command_processes) == (2048, 256)  # defaults
    with pytest.raises(ValueError, match="command_processes"):
        layered(settings, slack={TEAM_ID: {"channels": {CHANNEL: {"command_processes": 4}}}})


# --- the policy across layers ------------------------------------------------------------


def rule(tool: str, decision: str, **more: Any) -> dict[str, Any]:
    return {"tool": tool, "decision": decision, **more}


def policy_at(settings: Settings, channel: str = CHANNEL) -> Any:
    return settings.layers().at("slack", TEAM_ID, channel).policy


def verdict(policy: Any, command: str) -> Any:
    return policy.check(
        tool_name="run_command", read_only=False, arguments={"command": command}, plan_approved=True
    )


def test_a_lower_layers_deny_and_ask_beat_a_channels_allow(settings) -> None:
    channel_allows = {"policy": {"rules": [rule("run_command", "allow", command_prefix="make")]}}
    s = layered(
        settings,
        channels_may_loosen=["allow_rules"],  # the channel's allow counts
        policy={"rules": [rule("run_command", "deny", command_prefix="make deploy")]},
        slack={
            TEAM_ID: {
                "policy": {"rules": [rule("run_command", "ask", command_prefix="make release")]},
                "channels": {CHANNEL: channel_allows},
            }
        },
    )
    policy = policy_at(s)
    denied = verdict(policy, "make deploy")
    assert denied.decision is Permission.DENY and denied.rule.startswith("bot settings rules[0]")
    asked = verdict(policy, "make release")
    assert asked.decision is Permission.ASK
    assert (
        asked.rule.startswith(f"slack workspace {TEAM_ID}") and "(slack workspace" in asked.reason
    )
    allowed = verdict(policy, "make test")
    assert allowed.decision is Permission.ALLOW and allowed.rule.startswith(
        f"slack channel {CHANNEL}"
    )
    # Elsewhere in the workspace, without the channel's allow: the shipped gate decides.
    assert verdict(policy_at(s, OTHER), "make test").rule == "plan_approved"


def test_a_rule_grants_network_to_what_it_lets_through(settings) -> None:
    s = layered(
        settings,
        channels_may_loosen=["allow_rules"],
        slack={
            TEAM_ID: {
                "channels": {
                    CHANNEL: {
                        "policy": {
                            "rules": [
                                rule(
                                    "run_command",
                                    "allow",
                                    command_prefix="pip download",
                                    network=True,
                                )
                            ]
                        }
                    }
                }
            }
        },
    )
    assert verdict(policy_at(s), "pip download requests").network is True
    assert verdict(policy_at(s), "ls").network is False
    with pytest.raises(ValueError, match="grants nothing on a deny"):
        layered(settings, policy={"rules": [rule("run_command", "deny", network=True)]})


async def test_a_channel_with_mutating_tools_off_refuses_them_with_a_note(settings) -> None:
    write = ScriptedCall("write_file", {"path": "notes.md", "content": "hi"})
    model = ScriptedModel(
        [
            plan(),
            ScriptedTurn(calls=[write]),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Could not write."})]),
        ]
    )
    s = layered(settings, slack={TEAM_ID: {"channels": {CHANNEL: {"mutating_tools": False}}}})
    async with slack_workspace(s, model) as ws:
        root = await mention_in(ws, CHANNEL, "write a note")
        await react_in(ws, CHANNEL, posted(ws, CHANNEL, root, "📋 Plan")["ts"], by=ALICE)
        note = posted(ws, CHANNEL, root, "was not run")
        assert "mutating tools are off here" in note["text"]
        snap = await ws.snapshot(root)
        (record,) = [r for r in snap.tool_calls.values() if r.name == "write_file"]
        assert record.state is ToolState.DENIED
        assert not (Path(snap.workspace) / "notes.md").exists()


# --- per-user limits -----------------------------------------------------------------------


async def test_over_the_runs_at_once_limit_the_bot_says_so_and_starts_nothing(settings) -> None:
    model = ScriptedModel([plan(), plan()])
    limit = {"user_runs": 2, "user_runs_over": "refuse"}  # queued by default: test_slots.py
    s = layered(settings, slack={TEAM_ID: {"channels": {CHANNEL: limit}}})
    async with slack_workspace(s, model) as ws:
        await mention_in(ws, CHANNEL, "first")
        await mention_in(ws, CHANNEL, "second")
        third = await mention_in(ws, CHANNEL, "third")

        assert len(model.requests) == 2  # the third started no run
        assert len(await ws.conversation_ids()) == 2
        (said,) = [m["text"] for m in bot_posts(ws, CHANNEL, third)]
        assert "2 at once is the limit here" in said and "started nothing" in said
        # Bob is not Alice: his own count is zero.
        model.add(plan())
        await mention_in(ws, CHANNEL, "mine", by=BOB)
        assert len(await ws.conversation_ids()) == 3


async def test_a_message_restarting_an_ended_conversation_counts_against_the_limit(
    settings,
) -> None:
    model = ScriptedModel([plan(), plan()])
    limit = {"user_runs": 1, "user_runs_over": "refuse"}
    s = layered(settings, slack={TEAM_ID: {"channels": {CHANNEL: limit}}})
    async with slack_workspace(s, model) as ws:
        first = await mention_in(ws, CHANNEL, "first")
        await ws.slash("/stop", first)
        assert (await ws.snapshot(first)).status.lifecycle is Lifecycle.CANCELLED
        await mention_in(ws, CHANNEL, "second")  # waiting for its plan's approval

        await ws.reply(first, "go on with the first after all")

        assert len(model.requests) == 2  # the first did not start again
        said = bot_posts(ws, CHANNEL, first)[-1]["text"]
        assert "you have 1 conversation going, and 1 at once is the limit here" in said
        assert (await ws.snapshot(first)).status.lifecycle is Lifecycle.CANCELLED


async def test_over_the_mentions_per_hour_limit_the_bot_says_so(settings) -> None:
    model = ScriptedModel([plan()])
    s = layered(settings, user_mentions_per_hour=1)
    async with slack_workspace(s, model) as ws:
        await mention_in(ws, CHANNEL, "first")
        second = await mention_in(ws, CHANNEL, "second")
        (said,) = [m["text"] for m in bot_posts(ws, CHANNEL, second)]
        assert "1 an hour is the limit here" in said
        assert len(await ws.conversation_ids()) == 1


# --- seeing why ------------------------------------------------------------------------------


TOML = """\
model = "claude-bot-default"
approvers = ["U0BOSS0001"]
channels_may_loosen = ["allow_rules"]

[slack.T0123]
approvers = ["group:S0LEADS01"]
progress_mode = "status"

[slack.T0123.channels.C0456]
model = "claude-for-builds"
git_repo = "https://threadbot:hunter2secret@git.example.com/team/app.git"

[[slack.T0123.channels.C0456.policy.rules]]
tool = "run_command"
command_prefix = "make test"
decision = "allow"
"""


def threadbot(
    tmp_path: Path, *args: str, toml: str = TOML, **env: str
) -> subprocess.CompletedProcess:
    """``threadbot ARGS`` in ``tmp_path`` with ``toml`` as its file, ``env`` beside the
    environment's non-threadbot variables, and nothing on its input."""
    (tmp_path / "threadbot.toml").write_text(toml)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("THREADBOT_", "SLACK_"))}
    clean.pop("ANTHROPIC_API_KEY", None)
    return forkserver.run(
        [sys.executable, "-m", "bot", *args],
        cwd=tmp_path,
        env=clean | env,
        input="",
        capture_output=True,
        text=True,
        timeout=120,
    )


def explain_channel(tmp_path: Path, *, toml: str = TOML, **env: str) -> subprocess.CompletedProcess:
    """``threadbot settings explain`` of Slack channel C0456 in workspace T0123
    (:func:`threadbot`'s ``toml`` and ``env``)."""
    return threadbot(
        tmp_path,
        "settings",
        "explain",
        "--platform",
        "slack",
        "--team",
        "T0123",
        "--channel",
        "C0456",
        toml=toml,
        **env,
    )


def test_settings_explain_names_the_layer_of_every_value(tmp_path: Path) -> None:
    done = explain_channel(
        tmp_path,
        THREADBOT_REQUEST_TTL="600",
        THREADBOT_CLUSTER_MAX_RUNS="40",
    )
    assert done.returncode == 0, done.stderr
    lines = {line.split(" = ")[0]: line for line in done.stdout.splitlines() if " = " in line}
    assert set(lines) == {
        *LAYERED,
        *POLICY_KEYS[:2],
        "workspaces_may_loosen",
        "channels_may_loosen",
        "runner",  # the whole bot's: where its runs are carried out, and how many at once
        *WHOLE_BOT_LIMITS,
        "organisation",  # which organisation's layer the workspace takes
    }
    assert lines["runner"] == "runner = 'local'  (defaults)"
    assert lines["organisation"] == "organisation = 'default'  (no table of its own)"
    assert lines["max_runs"] == "max_runs = (none: no limit)  (defaults)"
    assert lines["cluster_max_runs"] == (
        "cluster_max_runs = 40  (bot settings (THREADBOT_CLUSTER_MAX_RUNS))"
    )
    assert lines["queued_after"] == "queued_after = 2.0  (defaults)"
    assert lines["model"].endswith("(slack channel C0456)")
    assert lines["approvers"] == "approvers = ['group:S0LEADS01']  (slack workspace T0123)"
    assert lines["progress_mode"].endswith("(slack workspace T0123)")
    assert lines["request_ttl"] == "request_ttl = 600.0  (bot settings (THREADBOT_REQUEST_TTL))"
    assert lines["output_limit"].endswith("(defaults)")
    assert "hunter2secret" not in done.stdout and "https://***@git" in lines["git_repo"]
    assert lines["ask_commands"] == "ask_commands = the default list  (defaults)"
    assert "run_command command_prefix='make test' -> allow  (slack channel C0456)" in done.stdout

    elsewhere = threadbot(tmp_path, "settings", "explain", "--platform", "discord")
    assert "model = 'claude-bot-default'  (bot settings (threadbot.toml))" in elsewhere.stdout
    assert "approvers = ['U0BOSS0001']  (bot settings (threadbot.toml))" in elsewhere.stdout


@pytest.mark.parametrize(
    ("toml", "said"),
    [
        (
            '[slack.T0123.channels.C0456]\napprovers = ["U0AAA0001", "alice"]\n',
            "threadbot.toml: slack.T0123.channels.C0456.approvers[1]: 'alice' is a name",
        ),
        (
            '[discord.1198206788567171079]\nprogress_mode = "loud"\n',
            "threadbot.toml: discord.1198206788567171079.progress_mode: "
            "must be one of 'replies' or 'status'",
        ),
        (
            "[slack.T0123.channels.general]\nmodel = 'x'\n",
            "threadbot.toml: slack.T0123.channels.general: 'general' is not a Slack channel id",
        ),
        (
            '[slack.T0123.channels.C0456]\noutput_cache = "in_memory"\n',
            "threadbot.toml: slack.T0123.channels.C0456.output_cache: a setting of the whole "
            "bot, not of a workspace, guild or channel: set output_cache at the top of the file",
        ),
        (
            "[slack.T0123.channels.C0456]\nmodle = 'x'\n",
            "threadbot.toml: slack.T0123.channels.C0456.modle: not a setting threadbot knows "
            "(did you mean model?)",
        ),
        (
            "[[slack.T0123.policy.rules]]\ntool = 'nope'\ndecision = 'allow'\n",
            "slack.T0123.policy.rules[0].tool: no tool called 'nope'",
        ),
        (
            "[slack.T0123]\nrequest_ttl = inf\n",
            "threadbot.toml: slack.T0123.request_ttl: Input should be a finite number",
        ),
        (
            "[slack.T0123]\ncommand_cpu_seconds = 1e300\n",
            "threadbot.toml: slack.T0123.command_cpu_seconds: must be at most 86400",
        ),
        (
            '[slack.T0123.channels.C0456]\nmutating_tools = "no"\n',
            "threadbot.toml: slack.T0123.channels.C0456.mutating_tools: must be true or false",
        ),
        (
            "[slack.T0123.channels.C0456]\nmodel = '  '\n",
            "threadbot.toml: slack.T0123.channels.C0456.model: String should have at least 1",
        ),
        (
            "[[slack.T0123.policy.rules]]\ntool = 'write_file'\ndecision = 'allow'\n"
            "network = true\n",
            "slack.T0123.policy.rules[0]: `network = true` applies only to `run_command`",
        ),
        (
            "[[slack.T0123.policy.rules]]\ntool = 'run_command'\ndecision = 'allow'\n"
            "network = 'yes'\n",
            "slack.T0123.policy.rules[0].network: Input should be a valid boolean",
        ),
        (
            "[slack.T0123]\ngit_repo = 1\n[discord.0]\nmodel = 'x'\n",
            "threadbot.toml: discord.0: '0' is not a Discord id",
        ),
        (
            "model = 'x'\n[slack.T0123\n",
            "threadbot.toml: ",
        ),
    ],
)
def test_a_bad_layer_stops_the_bot_at_start_with_its_table(
    tmp_path: Path, toml: str, said: str
) -> None:
    done = threadbot(tmp_path, "console", toml=toml)
    assert done.returncode == 2
    assert said in done.stderr, done.stderr


async def test_the_in_chat_command_shows_the_channel_s_settings_without_secrets(settings) -> None:
    s = layered(
        two_channels(settings),
        git_repo="https://threadbot:hunter2secret@git.example.com/team/app.git",
    )
    async with slack_workspace(s, ScriptedModel([])) as ws:
        await ws.slash("/threadbot", "settings", by=BOB)
        (said,) = [c for c in ws.calls("chat.postEphemeral")]
        text = said.args["text"]
        assert said.args["user"] == BOB and said.args["channel"] == CHANNEL
        assert "model = 'claude-for-builds'  (slack channel C0PROJ0001)" in text
        assert f"approvers = ['{BOB}']  (slack workspace {TEAM_ID})" in text
        for secret in ("hunter2secret", "xoxb-test", "test-signing-secret"):
            assert secret not in text
        assert "***@git.example.com" in text
