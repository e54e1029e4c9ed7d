"""Approval scopes on Slack (issue 33): allow once, for this run, or always in this channel.

With the real bolt app and slack-sdk against the Slack fake (:mod:`tests.slack_harness`),
a channel whose settings ask before ``echo hello`` commands (an ``ask`` rule): Alice
allows the first one for this run by its button, and the next matching call of that
run runs without asking (a note says which rule allowed it), while the first one of her
next run asks again; an approval always in this channel leaves a rule that a second
conversation meets, that a file ``deny`` never gives way to, and that ``threadbot
policy``, run as an operator against the same SQLite database, lists and revokes: the
running conversation's next call asks again. A layer with ``approval_scopes =
["once"]`` offers no wider button and refuses a wider press. Commands run in the
sandbox (the wider scopes are offered only where it works: ``working_bwrap``).
"""

from __future__ import annotations

import asyncio
import copy
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from bot.operators import token_sha256
from bot.settings import Settings
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.approvals import ApprovalScope, RuleApplied
from core.vocabulary.entries import DecisionEntry
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolState
from tests.cli_harness import clean_env
from tests.conftest import wait_for
from tests.fakes.slack_api import TEAM_ID
from tests.platform_threads import DiscordThread, on
from tests.slack_harness import ALICE, CHANNEL, WAIT, Workspace, slack_workspace
from tests.test_discord_story import ALICE as D_ALICE
from tests.test_discord_story import _restore_discord_py  # noqa: F401  (restores discord.py)
from tests.test_settings_layers import layered
from tests.test_slack_story import finish, plan, plan_buttons

pytestmark = pytest.mark.usefixtures("working_bwrap")

ASK_ECHO = {"rules": [{"tool": "run_command", "command_prefix": "echo hello", "decision": "ask"}]}
"""The bot's ``[policy]``: ``echo hello`` commands ask first (an ``ask`` rule)."""
TOKEN = "ops-token-0123456789abcdef"


def echo(words: str, gate: asyncio.Event | None = None) -> ScriptedTurn:
    return ScriptedTurn(
        calls=[ScriptedCall("run_command", {"command": f"echo hello {words}"})], gate=gate
    )


def asking(settings: Settings, **changes: Any) -> Settings:
    return layered(settings, policy=ASK_ECHO, **changes)


def record_of(snap: ConversationSnapshot, command: str) -> Any:
    [record] = [r for r in snap.tool_calls.values() if r.input.get("command") == command]
    return record


async def approve_plan(ws: Workspace, root: str) -> None:
    await ws.react(ws.post(root, "📋 Plan")["ts"], "white_check_mark", by=ALICE)


def approvals(ws: Workspace, root: str) -> list[dict[str, Any]]:
    return [m for m in ws.posts(root) if m["text"].startswith(("🔐", "✅ Allowed", "❌ Denied"))]


async def press(ws: Workspace, message: Mapping[str, Any], label: str, by: str = ALICE) -> None:
    held = ws.api.message(CHANNEL, str(message["ts"]))
    assert held is not None
    await ws.press(held, plan_buttons(held)[label], by=by)


# --- for this run ----------------------------------------------------------------------


async def test_an_approval_for_this_run_lets_the_next_matching_call_run_and_the_next_run_asks(
    settings: Settings,
) -> None:
    model = ScriptedModel(
        [plan(), echo("one"), echo("two"), finish("Said hello twice."), plan(), echo("three")]
    )
    async with slack_workspace(asking(settings), model) as ws:
        root = await ws.mention("say hello")
        await approve_plan(ws, root)

        [asked] = approvals(ws, root)
        assert asked["text"].splitlines()[2] == (
            "↳ The buttons also allow it for this run (until it ends) or always in this "
            "channel: commands starting with `echo hello`"
        )
        assert list(plan_buttons(asked)) == [
            "Allow",
            "Deny",
            "Allow for this run: echo hello …",
            "Always allow here: echo hello …",
        ]
        await press(ws, asked, "Allow for this run: echo hello …")

        decided = ws.api.message(CHANNEL, asked["ts"])
        assert decided is not None
        assert decided["text"].startswith(
            f"✅ Allowed by <@{ALICE}> for this run: commands starting with `echo hello`\n🔐"
        )
        assert plan_buttons(decided) == {}
        ws.post(root, "✅ Said hello twice.")
        assert len(approvals(ws, root)) == 1  # the second call asked nobody
        notes = ws.post(root, "`echo hello two` allowed by rule")["text"].splitlines()
        assert (
            "✅ `echo hello two` allowed by rule 1: commands starting with `echo hello`, for "
            f"this run (given by <@{ALICE}>)"
        ) in notes  # a progress note, batched with those near it
        snap = await ws.snapshot(root)
        assert record_of(snap, "echo hello one").state is ToolState.DONE
        assert record_of(snap, "echo hello two").state is ToolState.DONE
        [applied] = [r.entry for r in snap.journal if isinstance(r.entry, RuleApplied)]
        assert (applied.rule_id, applied.scope, applied.by.id) == (1, ApprovalScope.RUN, ALICE)
        [decision] = [r.entry for r in snap.journal if isinstance(r.entry, DecisionEntry)][-1:]
        assert decision.scope is ApprovalScope.RUN

        await ws.reply(root, "say it once more")  # the next run
        await approve_plan(ws, root)
        again = approvals(ws, root)
        assert len(again) == 2 and again[-1]["text"].startswith("🔐 May I run this?")
        snap = await ws.snapshot(root)
        assert record_of(snap, "echo hello three").state is ToolState.PENDING_APPROVAL
        assert str(snap.status) == "waiting(tool_approval)"
        [rule] = await ws.app.store.approvals.listed(every=True)
        assert (rule.rule.scope, rule.in_force) == (ApprovalScope.RUN, False)  # its run ended


# --- always in this channel --------------------------------------------------------------


async def test_an_always_rule_answers_another_conversation_of_the_channel_never_a_deny(
    settings: Settings,
) -> None:
    deny = {"tool": "run_command", "command_prefix": "echo hello secret", "decision": "deny"}
    policy = {"rules": [deny, *ASK_ECHO["rules"]]}
    model = ScriptedModel(
        [
            plan(),
            echo("one"),
            finish("Once."),
            plan(),
            echo("two"),
            echo("secret"),
            finish("Twice."),
        ]
    )
    async with slack_workspace(layered(settings, policy=policy), model) as ws:
        first = await ws.mention("say hello")
        await approve_plan(ws, first)
        [asked] = approvals(ws, first)
        await press(ws, asked, "Always allow here: echo hello …")
        decided = ws.api.message(CHANNEL, asked["ts"])
        assert decided is not None
        assert decided["text"].startswith(
            f"✅ Allowed by <@{ALICE}> always in this channel: commands starting with "
            "`echo hello`\n"
        )
        ws.post(first, "✅ Once.")

        second = await ws.mention("say hello again")
        await approve_plan(ws, second)
        ws.post(second, "✅ Twice.")
        assert approvals(ws, second) == []  # the channel's rule answered its ask
        snap = await ws.snapshot(second)
        assert record_of(snap, "echo hello two").state is ToolState.DONE
        secret = record_of(snap, "echo hello secret")
        assert secret.state is ToolState.DENIED  # the file's deny: no rule answers it
        assert "echo hello secret" in ws.post(second, "was not run: Denied by policy")["text"]
        applied = [r.entry for r in snap.journal if isinstance(r.entry, RuleApplied)]
        assert [a.tool_use_id for a in applied] == [record_of(snap, "echo hello two").tool_use_id]


async def test_a_revoked_rule_asks_again_in_the_running_conversation(
    sqlite_settings: Settings, tmp_path: Path
) -> None:
    gate = asyncio.Event()
    toml = f'[operators.dana]\ntoken_sha256 = "{token_sha256(TOKEN)}"\n'
    (tmp_path / "threadbot.toml").write_text(toml)
    gate_turn = echo("three", gate=gate)
    model = ScriptedModel([plan(), echo("one"), echo("two"), gate_turn, finish("Done.")])
    settings = asking(sqlite_settings)
    async with slack_workspace(settings, model) as ws:
        root = await ws.mention("say hello")
        await approve_plan(ws, root)
        [asked] = approvals(ws, root)
        always = plan_buttons(asked)["Always allow here: echo hello …"]
        await ws.deliver("interactive", ws.press_body(asked, always, by=ALICE))
        await asyncio.wait_for(gate_turn.started.wait(), WAIT)  # past `echo hello two`
        said = "`echo hello two` allowed by rule 1"
        await wait_for(lambda: any(said in m["text"] for m in ws.posts(root)))

        listed = await cli(tmp_path, settings, "policy", "list")
        assert listed.returncode == 0, listed.stderr
        said = (
            f"#1 always in this channel (slack {TEAM_ID} {CHANNEL}): run_command starting "
            f"with `echo hello`; added by {ALICE} at "
        )
        [line] = listed.stdout.splitlines()
        assert line.startswith(said) and line.endswith(" UTC")
        explained = await cli(
            tmp_path,
            settings,
            *("settings", "explain", "--platform", "slack", "--team", TEAM_ID),
            *("--channel", CHANNEL),
        )
        assert explained.returncode == 0, explained.stderr
        assert f"  {line}" in explained.stdout.splitlines()  # who added it, and when

        wrong = await cli(
            tmp_path, settings, "policy", "revoke", "1", "--operator", "dana", token="x" * 20
        )
        assert wrong.returncode == 2
        assert "refused: 'dana' is not an operator with this token" in wrong.stderr
        assert [r.in_force for r in await ws.app.store.approvals.listed(every=True)] == [True]

        revoked = await cli(tmp_path, settings, "policy", "revoke", "1", "--operator", "dana")
        assert revoked.returncode == 0, revoked.stderr
        assert revoked.stdout.startswith("revoked: #1 always in this channel")
        assert "; revoked by operator dana at " in revoked.stdout

        gate.set()  # the run goes on: its next call meets no rule now
        # Until the run waits for a person, not until its card shows: the card is sent
        # after the commit that opens the request, before the one that waits
        # (core/run/tool_calls.py `continue_turn`).
        await ws.settle()
        assert len(approvals(ws, root)) == 2
        snap = await ws.snapshot(root)
        assert record_of(snap, "echo hello three").state is ToolState.PENDING_APPROVAL
        assert snap.status.lifecycle is Lifecycle.WAITING
        [rule] = await ws.app.store.approvals.listed(every=True)
        assert (rule.revoked_by, rule.in_force) == ("dana", False)

        audited = await cli(tmp_path, settings, "audit", "--json")  # the revocation, too
        assert audited.returncode == 0, audited.stderr
        entries = json.loads(audited.stdout)
        [revocation] = [e for e in entries if e["request_kind"] == "approval_rule"]
        assert (revocation["user_id"], revocation["means"], revocation["outcome"]) == (
            "operator:dana",
            "command",
            "revoked",
        )
        assert (revocation["request_id"], revocation["channel"]) == ("1", CHANNEL)
        assert revocation["conversation"] == (await ws.snapshot(root)).id
        allowed = [e for e in entries if e["outcome"] == "allowed"]
        assert allowed and allowed[0]["means"] == "button"  # the "always" button's decision


async def cli(cwd: Path, settings: Settings, *command: str, token: str = TOKEN) -> Any:
    """``threadbot COMMAND...`` as an operator runs it beside the bot, on its database,
    without blocking the bot's loop: its exit code and output."""
    env = clean_env() | {
        "THREADBOT_DATABASE_URL": settings.database_url,
        "THREADBOT_OPERATOR_TOKEN": token,
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *command,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    return _Done(process.returncode or 0, out.decode(), err.decode())


class _Done:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


# --- on Discord ---------------------------------------------------------------------------


async def test_on_discord_a_call_allowed_always_here_lets_the_next_one_run(
    settings: Settings,
) -> None:
    model = ScriptedModel([plan(), echo("one"), echo("two"), finish("Said hello.")])
    async with on("discord", asking(settings), model) as t:
        await t.mention("say hello")
        await t.react(t.message("📋 Plan"), True, by="alice")
        asked = t.message("🔐 May I run this?")
        assert t.shown(asked).buttons == [
            "Allow",
            "Deny",
            "Allow for this run: echo hello …",
            "Always allow here: echo hello …",
        ]
        assert isinstance(t, DiscordThread)
        await t.press(asked, "Always allow here: echo hello …", by="alice")
        await t.settle()

        alice = t.name("alice")
        shown = t.shown(asked)
        assert shown.text.startswith(
            f"✅ Allowed by {alice} always in this channel: commands starting with `echo hello`"
        )
        assert shown.buttons == []
        assert any(p.startswith("✅ Said hello.") for p in t.posts())
        snap = await t.snapshot()
        assert record_of(snap, "echo hello two").state is ToolState.DONE
        [rule] = await t.app.store.approvals.listed()
        assert (rule.place.platform, rule.rule.by.id) == ("discord", D_ALICE)


# --- once only ---------------------------------------------------------------------------


async def test_a_layer_that_offers_once_only_shows_no_wider_button_and_refuses_one(
    settings: Settings,
) -> None:
    slack = {TEAM_ID: {"channels": {CHANNEL: {"approval_scopes": ["once"]}}}}
    model = ScriptedModel([plan(), echo("one"), finish("Done.")])
    async with slack_workspace(asking(settings, slack=slack), model) as ws:
        root = await ws.mention("say hello")
        await approve_plan(ws, root)
        [asked] = approvals(ws, root)
        assert list(plan_buttons(asked)) == ["Allow", "Deny"]
        assert "↳" not in asked["text"]

        # A wider button anyway (an old message's, or a crafted one): refused, nothing kept.
        snap = await ws.snapshot(root)
        request = snap.requests[-1]
        crafted = copy.deepcopy(asked)
        value = f'tb1:{{"k":"channel","r":"{request.id}","n":1}}'
        element = {"type": "button", "action_id": value, "value": value}
        element["text"] = {"type": "plain_text", "text": "Always allow here"}
        crafted["blocks"].append({"type": "actions", "block_id": "x", "elements": [element]})
        await ws.press(crafted, value, by=ALICE)
        notice = ws.post(root, "are not offered here")["text"]
        assert notice == (
            f"Approvals always in this channel are not offered here, <@{ALICE}>: allow this "
            "call once instead."
        )
        assert await ws.app.store.approvals.listed(every=True) == []
        assert str((await ws.snapshot(root)).status) == "waiting(tool_approval)"

        await press(ws, asked, "Allow")
        ws.post(root, "✅ Done.")
