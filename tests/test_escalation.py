"""Escalation decided outside the model (issue 28, its second slice): the people are asked.

The scripted model runs commands that fail; threadbot, not the model, sees the
streak and asks the people in the thread (``🆘 I'm stuck: the last 2 commands
failed``, each command with the end of its output), and the conversation waits in
``waiting(escalation)``. Asserted where a person and the store see it: the thread
through the console harness and the Slack fake, the journal, the requests, the tool
call records, the model's next request (the answer in it) and the escalation's span.
What counts: a failed command and a call to a tool that does not exist; a person's
denial and a policy's do not. A stop while it waits stops it; a new request after it
starts a new streak. The streak survives a restart: a bot process killed between
the two failures (``THREADBOT_FAULT=after_tool_result:1``) and started again still
escalates at the second.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from bot.app import build
from bot.settings import Settings
from core import tracing
from core.models.base import ModelRequest
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.run.settings import EngineSettings
from core.vocabulary.entries import Escalated, FailuresReset, UserText
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.requests import Escalation, RequestState
from core.vocabulary.tool_records import ToolState
from tests.console_process import Bot, command, finish, plan
from tests.fakes.slack_api import TEAM_ID
from tests.harness import Chat
from tests.slack_harness import BOB, CHANNEL, slack_workspace
from tests.test_settings_layers import explain_channel, layered, threadbot
from tests.test_traces import Spans

FIRST = "echo building; echo 'error: missing header foo.h' >&2; exit 2"
SECOND = "echo 'cannot open bar.c: No such file' >&2; exit 1"
STUCK = "🆘 I'm stuck: the last 2 commands failed"


def run(cmd: str) -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("run_command", {"command": cmd})])


def planned() -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Build it"]})])


def done(answer: str = "Built.") -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("finish", {"answer": answer})])


def texts_of(request: ModelRequest) -> str:
    """Every text block and tool result of ``request``'s last user message, joined."""
    last = request.messages[-1]
    assert last["role"] == "user"
    parts: list[str] = []
    for block in last["content"]:
        if block.get("type") == "text":
            parts.append(block["text"])
        elif block.get("type") == "tool_result":
            parts.append(str(block["content"]))
    return "\n".join(parts)


async def started(settings: Settings, model: ScriptedModel, **kwargs: Any) -> tuple[Any, Chat]:
    app = await build(settings, model=model, **kwargs)
    await app.start()
    return app, Chat(app)


async def approved(app: Any, chat: Chat) -> None:
    """ "build the project" asked, its plan approved, and the run gone as far as it goes."""
    await chat.mention("build the project")
    await chat.react(chat.bot_message("📋 Plan (v1)"))
    await app.hub.settled()


# --- the console: two failures, the question, the answer ----------------------------


async def test_two_failing_commands_ask_the_people_and_the_answer_goes_on(
    settings: Settings,
) -> None:
    spans = Spans()
    model = ScriptedModel([planned(), run(FIRST), run(SECOND), run("echo built"), done()])
    app, chat = await started(settings, model, tracer_provider=spans.provider)
    try:
        await approved(app, chat)

        shown = chat.out.getvalue()
        snap = await chat.snapshot()
        assert str(snap.status) == "waiting(escalation)"
        assert len(model.requests) == 3  # the plan, two commands: no model call after them
        # The message: the title, each command and the end of its output.
        message = shown[shown.index(STUCK) :]
        assert "1. `echo building; echo 'error: missing header foo.h' >&2; exit 2`" in message
        assert "error: missing header foo.h" in message and "exit code 2" in message
        assert "2. `echo 'cannot open bar.c: No such file' >&2; exit 1`" in message
        assert "cannot open bar.c: No such file" in message and "exit code 1" in message
        assert "(reply in this thread with what to do next)" in message
        # The store: one escalation entry with both failures, one open request.
        [escalated] = [r.entry for r in snap.journal if isinstance(r.entry, Escalated)]
        assert [f.tool for f in escalated.failures] == ["run_command", "run_command"]
        [request] = [r for r in snap.open_requests if isinstance(r, Escalation)]
        assert request.id == escalated.request_id and request.failures == 2
        assert request.prompt == "I'm stuck: the last 2 commands failed"

        # Bob, not the requester, answers as anyone may answer a question.
        await chat.reply("the header is in vendor/, add -Ivendor", by="bob")
        await app.hub.settled()
        snap = await chat.snapshot()
    finally:
        await app.close()

    assert snap.status.lifecycle is Lifecycle.DONE
    assert "✅ Built." in chat.out.getvalue()
    # The model's next request holds threadbot's note and the answer, after the results.
    after = texts_of(model.requests[3])
    assert "[threadbot: the last 2 calls failed in a row, so I asked the people" in after
    assert after.endswith("bob (answer): the header is in vendor/, add -Ivendor")
    entries = [r.entry for r in snap.journal]
    [reset] = [e for e in entries if isinstance(e, FailuresReset)]
    assert reset.request_id == request.id and reset.by.name == "bob"
    answered = [e for e in entries if isinstance(e, UserText) and e.role == "answer"]
    assert [a.text for a in answered] == ["the header is in vendor/, add -Ivendor"]
    [closed] = [r for r in snap.requests if r.id == request.id]
    assert closed.state is RequestState.DECIDED
    assert closed.decided_by is not None and closed.decided_by.name == "bob"
    # A span of its own, a child of the run's, with whom it asked and why.
    [span] = [s for s in spans.finished() if s.name == "threadbot.escalate"]
    assert span.attributes is not None
    assert span.attributes[tracing.ESCALATED_TO] == "people"
    assert span.attributes[tracing.ESCALATION_FAILURES] == 2
    assert span.attributes[tracing.CONVERSATION_ID] == snap.id
    [parent] = [s for s in spans.finished() if s.context.span_id == span.parent.span_id]
    assert parent.name == "invoke_agent threadbot"
    spans.provider.shutdown()


async def test_a_tool_that_does_not_exist_counts_toward_the_streak(settings: Settings) -> None:
    invented = ScriptedTurn(calls=[ScriptedCall("compile_project", {"target": "all"})])
    model = ScriptedModel([planned(), run(FIRST), invented, done()])
    app, chat = await started(settings, model)
    try:
        await approved(app, chat)
        snap = await chat.snapshot()
        shown = chat.out.getvalue()
    finally:
        await app.close()

    assert str(snap.status) == "waiting(escalation)"
    [call] = [r for r in snap.tool_calls.values() if r.name == "compile_project"]
    assert call.state is ToolState.FAILED
    message = shown[shown.index("🆘 I'm stuck: the last 2 calls failed") :]  # not both commands
    assert "2. compile_project (no such tool)" in message
    assert "There is no tool compile_project. The tools here are:" in message
    assert "The tools here are: ask_user, edit_file, finish, list_files" in message


async def test_a_denial_does_not_count(settings: Settings) -> None:
    settings.policy = {
        "rules": [
            {
                "tool": "run_command",
                "command_prefix": "make deploy",
                "decision": "deny",
                "reason": "no deploys",
            }
        ]
    }
    model = ScriptedModel(
        [
            planned(),
            run(FIRST),
            run("rm -rf build"),  # asks first: alice denies it
            run("make deploy"),  # the policy denies it
            run(SECOND),
            done("Gave up."),
        ]
    )
    app, chat = await started(settings, model)
    try:
        await approved(app, chat)
        await chat.react(chat.bot_message("🔐 May I run this?"), "x")
        await app.hub.settled()
        snap = await chat.snapshot()
    finally:
        await app.close()

    # Two failures with two denials between them: the streak is two, so it escalates
    # at the second failure only (the denials neither count nor end it).
    commands = [r for r in snap.tool_calls.values() if r.name == "run_command"]
    states = [(r.input["command"], r.state) for r in commands]
    assert states == [
        (FIRST, ToolState.FAILED),
        ("rm -rf build", ToolState.DENIED),
        ("make deploy", ToolState.DENIED),
        (SECOND, ToolState.FAILED),
    ]
    assert str(snap.status) == "waiting(escalation)"
    [escalated] = [r.entry for r in snap.journal if isinstance(r.entry, Escalated)]
    assert [f.call for f in escalated.failures] == [f"`{FIRST}`", f"`{SECOND}`"]
    assert len(model.requests) == 5  # the plan and four commands: none after the second failure


async def test_a_stop_while_it_waits_stops_it_and_a_new_request_starts_a_new_streak(
    settings: Settings,
) -> None:
    model = ScriptedModel([planned(), run(FIRST), run(SECOND), done("Starting over.")])
    app, chat = await started(settings, model)
    try:
        await approved(app, chat)
        assert str((await chat.snapshot()).status) == "waiting(escalation)"

        await chat.stop()
        await app.hub.settled()
        snap = await chat.snapshot()
        assert snap.status.lifecycle is Lifecycle.CANCELLED
        [request] = [r for r in snap.requests if isinstance(r, Escalation)]
        assert request.state is RequestState.CANCELLED
        assert chat.said()[-1] == "⏹ Stopped by alice."

        # A new request after the stop: the failures before it no longer count.
        await chat.reply("start over, please")
        await app.hub.settled()
        snap = await chat.snapshot()
    finally:
        await app.close()
    assert snap.status.lifecycle is Lifecycle.DONE
    assert chat.said()[-1] == "✅ Starting over."
    assert sum(isinstance(r.entry, Escalated) for r in snap.journal) == 1


async def test_the_failure_limit_is_a_setting(settings: Settings) -> None:
    settings.failure_limit = 3
    model = ScriptedModel([planned(), run(FIRST), run(SECOND), run("exit 5"), done()])
    app, chat = await started(settings, model)
    try:
        await approved(app, chat)
        snap = await chat.snapshot()
    finally:
        await app.close()
    assert str(snap.status) == "waiting(escalation)"
    assert "🆘 I'm stuck: the last 3 commands failed" in chat.out.getvalue()


def test_the_failure_limit_is_layered_and_at_least_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREADBOT_FAILURE_LIMIT", "4")
    s = layered(
        Settings(database_url="memory://"),
        slack={TEAM_ID: {"channels": {CHANNEL: {"failure_limit": 1}}}},
    )
    layers = s.layers()
    assert layers.at("slack", TEAM_ID, CHANNEL).engine_settings(EngineSettings()).failure_limit == 1
    assert (
        layers.at("slack", TEAM_ID, "C0OTHER001").engine_settings(EngineSettings()).failure_limit
        == 4
    )
    with pytest.raises(ValidationError, match="failure_limit"):
        Settings(database_url="memory://", failure_limit=0)
    with pytest.raises(ValueError, match="at least 1"):
        EngineSettings(failure_limit=0)

    explained = explain_channel(
        tmp_path,
        toml="[slack.T0123.channels.C0456]\nfailure_limit = 1\n",
    )
    assert explained.returncode == 0, explained.stderr
    assert "failure_limit = 1  (slack channel C0456)" in explained.stdout
    refused = threadbot(
        tmp_path, "settings", "explain", "--platform", "slack", THREADBOT_FAILURE_LIMIT="0"
    )
    assert refused.returncode != 0
    assert "THREADBOT_FAILURE_LIMIT" in refused.stderr


# --- Slack ----------------------------------------------------------------------------


async def test_on_slack_the_thread_is_asked_and_a_reply_goes_on(settings: Settings) -> None:
    model = ScriptedModel([planned(), run(FIRST), run(SECOND), done("Built on Slack.")])
    async with slack_workspace(settings, model) as slack:
        thread = await slack.mention("build the project")
        await slack.react(slack.post(thread, "Plan (v1)")["ts"])
        await slack.app.hub.settled()
        asked = slack.post(thread, "I'm stuck")
        text = asked["text"]
        assert text.startswith(STUCK)
        assert "error: missing header foo.h" in text and "cannot open bar.c" in text
        assert "exit code 2" in text and "exit code 1" in text
        assert len(text) <= 3_900  # one Slack message

        await slack.reply(thread, "use the vendored headers", by=BOB)
        await slack.app.hub.settled()
        snap = await slack.snapshot(thread)
        finished = slack.post(thread, "Built on Slack.")
    assert snap.status.lifecycle is Lifecycle.DONE
    assert finished["ts"] > asked["ts"]
    assert texts_of(model.requests[3]).endswith("(answer): use the vendored headers")
    assert any(isinstance(r.entry, FailuresReset) for r in snap.journal)


async def test_on_slack_a_stop_while_it_waits_stops_it(settings: Settings) -> None:
    model = ScriptedModel([planned(), run(FIRST), run(SECOND)])
    async with slack_workspace(settings, model) as slack:
        thread = await slack.mention("build the project")
        await slack.react(slack.post(thread, "Plan (v1)")["ts"])
        await slack.app.hub.settled()
        slack.post(thread, "I'm stuck")
        await slack.slash("/stop")
        await slack.app.hub.settled()
        snap = await slack.snapshot(thread)
        last = slack.posts(thread)[-1]["text"]
    assert snap.status.lifecycle is Lifecycle.CANCELLED
    assert [r.state for r in snap.requests if isinstance(r, Escalation)] == [RequestState.CANCELLED]
    assert last.startswith("⏹ Stopped by")


# --- a restart between the two failures -------------------------------------------------


def test_the_streak_survives_a_restart_between_the_two_failures(tmp_path: Path) -> None:
    bot = Bot(
        tmp_path,
        [
            plan("Build it"),
            {"calls": [command(FIRST)]},
            {"calls": [command(SECOND)]},
            finish("Built after all."),
        ],
    )
    first = bot.run("build the project\n+✅ 2\n", fault="after_tool_result:1")
    assert first.returncode == -signal.SIGKILL
    assert bot.query("select state from tool_calls where name = 'run_command'") == [("failed",)]

    second = bot.run()
    assert second.returncode == 0, second.stderr
    assert STUCK in second.stdout
    assert "error: missing header foo.h" in second.stdout and "cannot open bar.c" in second.stdout
    assert bot.query("select lifecycle, wait_kind from conversations") == [
        ("waiting", "escalation")
    ]
    assert bot.query("select kind, state from pending_requests where kind = 'escalation'") == [
        ("escalation", "open")
    ]

    third = bot.run(">1 the headers are in vendor/\n")
    assert third.returncode == 0, third.stderr
    assert "✅ Built after all." in third.stdout
    kinds = [k for (k,) in bot.query("select kind from journal order by seq")]
    assert kinds.count("escalated") == 1 and kinds.count("failures_reset") == 1
    assert kinds.index("failures_reset") < len(kinds) - 2  # the model went on after it
    (body,) = bot.query("select body from journal where kind = 'escalated'")[0]
    failures = json.loads(body)["failures"]
    assert [f["call"] for f in failures] == [f"`{FIRST}`", f"`{SECOND}`"]
