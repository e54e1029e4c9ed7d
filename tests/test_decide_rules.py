"""Issue 9's other rules of deciding: the policy checked again, bystanders, approver settings.

- A call approved while the bot ran with one policy, and about to run after a
  restart with a policy that denies it, ends ``denied`` and never runs; one that
  the new policy only asks about runs (a person approved it already).
- A bystander's "retry" or "go on" gets the refusal a reaction of theirs gets;
  the words are kept as a note and nothing goes on.
- ``THREADBOT_APPROVERS`` holds platform ids when Slack or Discord runs: a name
  or a bare number stops the bot at start (exit 2, the entry named); the console
  takes names.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.app import build
from bot.settings import Settings
from conversations.access import parse_approver, platform_problem
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.entries import ToolResultEntry, UserText
from core.vocabulary.errors import ModelError
from core.vocabulary.requests import RequestState
from core.vocabulary.tool_records import ToolState
from tests.harness import Chat
from tests.test_cli import _run
from tests.test_slack_story import finish, plan

REFUSED = "Only the requester or an approver can decide this, bob."

# --- the policy, checked again before a call runs ---------------------------------------


@pytest.mark.parametrize(("decision", "runs"), [("deny", False), ("ask", True)])
async def test_a_rule_added_by_a_restart_while_an_approval_waits(
    sqlite_settings: Settings, decision: str, runs: bool
) -> None:
    settings = sqlite_settings  # a restart on the same database
    command = "rm -rf build && touch ran"  # `rm -rf` asks by default
    model = ScriptedModel(
        [
            plan(),
            ScriptedTurn(calls=[ScriptedCall("run_command", {"command": command})]),
            finish("Over."),
        ]
    )
    first = await build(settings, model=model)
    chat = Chat(first)
    await first.start()
    await chat.mention("clean the build")
    await chat.react(chat.bot_message("📋 Plan (v1)"))
    await first.hub.settled()
    approval = chat.bot_message("🔐 May I run this?")
    assert str((await chat.snapshot()).status) == "waiting(tool_approval)"
    await first.close()

    settings.policy = {
        "rules": [
            {
                "tool": "run_command",
                "command_prefix": "rm -rf",
                "decision": decision,
                "reason": "no deletions today",
            }
        ]
    }
    second = await build(settings, model=model)  # the same database, the new rule
    try:
        chat.app = second
        second.add_sender(chat.console)
        await second.start()
        await chat.react(approval)  # alice allows the call
        await second.hub.settled()

        snap = await chat.snapshot()
        [call] = [r for r in snap.tool_calls.values() if r.name == "run_command"]
        [request] = [r for r in snap.requests if r.kind == "tool_approval"]
        assert request.state is RequestState.DECIDED  # the person's decision stands
        assert (Path(snap.workspace) / "ran").exists() is runs
        result = next(
            r.entry
            for r in snap.journal
            if isinstance(r.entry, ToolResultEntry) and r.entry.tool_use_id == call.tool_use_id
        )
        if runs:
            assert call.state is ToolState.DONE and not result.is_error
        else:
            assert call.state is ToolState.DENIED
            assert result.is_error and "no deletions today" in result.content
            assert "was not run: no deletions today" in chat.out.getvalue()
        assert chat.said()[-1].startswith("✅ Over.")
    finally:
        await second.close()


# --- bystanders' "retry" and "go on" ----------------------------------------------------


async def test_a_bystanders_retry_is_refused_like_their_reaction(make_app) -> None:
    failing = ScriptedTurn(error=ModelError("The model API is overloaded"))
    model = ScriptedModel([plan(), failing, finish("Back.")])
    app = await make_app(model)
    chat = Chat(app)
    await app.start()
    await chat.mention("fix it")
    await chat.react(chat.bot_message("📋 Plan (v1)"))
    await app.hub.settled()
    asked = len(model.requests)
    await chat.react(chat.bot_message("⚠️"), "repeat", by="bob")
    await app.hub.settled()
    assert chat.said()[-1] == REFUSED

    await chat.reply("retry", by="bob")

    assert chat.said()[-2:] == [REFUSED, REFUSED]
    snap = await chat.snapshot()
    assert str(snap.status) == "waiting(retry)"
    assert [r.state for r in snap.requests if r.kind == "retry"] == [RequestState.OPEN]
    assert isinstance(note := snap.journal[-1].entry, UserText)
    assert (note.role, note.text, note.author.name) == ("note", "retry", "bob")
    assert len(model.requests) == asked

    await chat.reply("retry")  # alice goes on
    assert chat.said()[-1].startswith("✅ Back.")


async def test_a_bystanders_go_on_at_the_turn_cap_is_refused(settings, make_app) -> None:
    settings.step_turn_limit = 2
    looping = [ScriptedTurn(calls=[ScriptedCall("list_files", {})]) for _ in range(2)]
    model = ScriptedModel([plan(), *looping])
    app = await make_app(model)
    chat = Chat(app)
    await app.start()
    await chat.mention("look around")
    await chat.react(chat.bot_message("📋 Plan (v1)"))
    await app.hub.settled()
    assert str((await chat.snapshot()).status) == "waiting(continue)"
    asked = len(model.requests)

    await chat.reply("go on", by="bob")

    assert chat.said()[-1] == REFUSED
    assert str((await chat.snapshot()).status) == "waiting(continue)"
    assert len(model.requests) == asked


# --- approver entries in the settings ----------------------------------------------------


@pytest.mark.parametrize(
    ("token", "entries", "said"),
    [
        (
            {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": "s"},
            "U0CAROL001,alice",
            "'alice' is a name",
        ),
        ({"DISCORD_TOKEN": "fake-token"}, "alice", "'alice' is a name"),
        (
            {"DISCORD_TOKEN": "fake-token"},
            "773086210457731077",
            "could be a Discord user or a role",
        ),
        (
            {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": "s"},
            "group:admins",
            "starts with S",
        ),
        ({}, "team:S0ADMINS1", "'team' is no kind of approver"),
    ],
)
def test_approvers_that_are_not_ids_stop_a_platform_bot_at_start(
    tmp_path: Path, token: dict[str, str], entries: str, said: str
) -> None:
    result = _run(tmp_path, {"THREADBOT_APPROVERS": entries, **token}, "")
    assert result.returncode == 2, result.stderr
    [line] = [x for x in result.stderr.splitlines() if x.startswith("  THREADBOT_APPROVERS")]
    assert line.startswith(f"  THREADBOT_APPROVERS ({entries!r}): ")
    assert said in line and "Traceback" not in result.stderr
    if "name" in said:
        assert "user:U0123ABCD" in line and "role:<number>" in line


def test_the_console_takes_names_as_approvers(tmp_path: Path) -> None:
    result = _run(tmp_path, {"THREADBOT_APPROVERS": "alice,bob"}, "hello\n")
    assert result.returncode == 0, result.stderr
    assert "📋 Plan (v1)" in result.stdout


@pytest.mark.parametrize(
    ("entry", "kind", "value", "problem"),
    [
        ("U0CAROL001", "user", "U0CAROL001", None),
        ("W0CAROL001", "user", "W0CAROL001", None),
        ("user:U0CAROL001", "user", "U0CAROL001", None),
        ("user:773086210457731077", "user", "773086210457731077", None),
        ("group:S0APPROVE1", "group", "S0APPROVE1", None),
        ("role:1198206788567179999", "role", "1198206788567179999", None),
        ("carol", "name", "carol", "is a name"),
        ("773086210457731077", "name", "773086210457731077", "could be a Discord user"),
        ("user:carol", "user", "carol", "neither a Slack user id nor a Discord user id"),
        ("role:admins", "role", "admins", "a Discord role id is a number"),
    ],
)
def test_approver_entries_say_what_they_are(
    entry: str, kind: str, value: str, problem: str | None
) -> None:
    approver = parse_approver(entry)
    assert (approver.kind, approver.value) == (kind, value)
    found = platform_problem(entry)
    assert (found is None) if problem is None else (found is not None and problem in found)


@pytest.mark.parametrize("entry", ["team:S0ADMINS1", "user:", "two words"])
def test_malformed_approver_entries_are_refused_everywhere(entry: str) -> None:
    with pytest.raises(ValueError, match=r"approver|names no id"):
        parse_approver(entry)
