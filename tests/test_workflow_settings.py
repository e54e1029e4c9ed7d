"""The workflow settings (issue 29): ``workflow``, ``workflows`` and ``check_command``
layered per channel and shown with their layers by ``threadbot settings explain``;
``workflows_folder`` read at start and its workflows handed to the engine; a setting
that names a workflow the bot has not is a settings error (exit 2) naming its layer and
the workflows there are.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.app import build
from bot.layers import UnknownWorkflows
from bot.settings import Settings
from bot.workflow_commands import bot_tools
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.run.settings import EngineSettings
from core.vocabulary.entries import WorkflowChosen
from core.workflows.model import Workflow
from tests.harness import Chat
from tests.test_settings_layers import explain_channel, layered

ANSWER = """\
[workflow]
name = "answer"
description = "Answer with the read-only tools."
start = "answering"

[states.answering]
kind = "agent"
tools = ["read_only", "finish"]

[states.answering.on]
finished = "answered"

[states.answered]
kind = "end"
"""
"""A workflow of a ``workflows_folder``: one agent state and its end."""


def folder(tmp_path: Path) -> Path:
    """A ``workflows_folder`` holding :data:`ANSWER`."""
    found = tmp_path / "flows"
    found.mkdir(exist_ok=True)
    (found / "answer.toml").write_text(ANSWER)
    return found


def test_settings_explain_shows_the_workflow_settings_with_their_layers(tmp_path: Path) -> None:
    folder(tmp_path)
    toml = (
        'workflows_folder = "flows"\nworkflows = ["default", "chat", "answer"]\n'
        '[slack.T0123.channels.C0456]\nworkflow = "answer"\n'
    )
    done = explain_channel(tmp_path, toml=toml, THREADBOT_CHECK_COMMAND="make check")
    assert done.returncode == 0, done.stderr
    lines = {line.split(" = ")[0]: line for line in done.stdout.splitlines() if " = " in line}
    assert lines["workflow"] == "workflow = 'answer'  (slack channel C0456)"
    assert lines["workflows"] == (
        "workflows = ['default', 'chat', 'answer']  (bot settings (threadbot.toml))"
    )
    assert lines["check_command"] == (
        "check_command = 'make check'  (bot settings (THREADBOT_CHECK_COMMAND))"
    )
    assert "workflows_folder" not in lines  # the bot's alone: not a layered setting


def test_a_channel_naming_a_workflow_there_is_not_is_a_settings_error(tmp_path: Path) -> None:
    toml = '[slack.T0123]\nworkflows = ["chat", "nightly"]\n'
    done = explain_channel(tmp_path, toml=toml)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "threadbot: bad settings:\n"
        "  threadbot.toml: slack.T0123.workflows: no workflow called 'nightly'; "
        "known: default, chat, validate-fix\n"
    )


@pytest.mark.parametrize(
    ("variables", "table", "said"),
    [
        (
            {"THREADBOT_WORKFLOW": "nightly"},
            {},
            [
                "THREADBOT_WORKFLOW: no workflow called 'nightly'; "
                "known: default, chat, validate-fix"
            ],
        ),
        (
            {},
            {"workflow": "nightly"},
            [
                "threadbot.toml: workflow: no workflow called 'nightly'; "
                "known: default, chat, validate-fix"
            ],
        ),
        (
            {"THREADBOT_WORKFLOWS": "chat, Chat"},
            {},
            ["THREADBOT_WORKFLOWS: no workflow called 'Chat'; known: default, chat, validate-fix"],
        ),
        (
            {},
            {"slack": {"T0123": {"channels": {"C0456": {"workflow": "answer"}}}}},
            [
                "threadbot.toml: slack.T0123.channels.C0456.workflow: no workflow called "
                "'answer'; known: default, chat, validate-fix"
            ],
        ),
        (
            {},
            {"discord": {"1198206788567171079": {"workflow": "x", "workflows": ["y", "chat"]}}},
            [
                "threadbot.toml: discord.1198206788567171079.workflow: no workflow called 'x'; "
                "known: default, chat, validate-fix",
                "threadbot.toml: discord.1198206788567171079.workflows: no workflow called "
                "'y'; known: default, chat, validate-fix",
            ],
        ),
    ],
    ids=["bot workflow", "bot's in the file", "bot workflows", "channel", "guild"],
)
def test_each_unknown_workflow_is_named_with_its_layer(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    variables: dict[str, str],
    table: dict[str, object],
    said: list[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    settings = Settings.model_validate(table)
    library = settings.workflow_library(bot_tools())
    with pytest.raises(UnknownWorkflows) as raised:
        settings.layers(known_tools=bot_tools(), known_workflows=library.names)
    assert list(raised.value.lines) == said


def test_a_channel_s_workflow_settings_reach_its_engine_settings(
    settings: Settings, tmp_path: Path
) -> None:
    layered_settings = layered(
        settings,
        workflows_folder=folder(tmp_path),
        check_command="make check",
        slack={
            "T0123": {
                "workflows": ["chat", "answer"],
                "channels": {"C0456": {"workflow": "answer", "check_command": "make lint"}},
            }
        },
    )
    library = layered_settings.workflow_library(bot_tools())
    assert library.names == ("default", "chat", "validate-fix", "answer")
    layers = layered_settings.layers(known_tools=bot_tools(), known_workflows=library.names)
    channel = layers.at("slack", "T0123", "C0456").engine_settings(EngineSettings())
    assert (channel.workflow, channel.workflows, channel.check_command) == (
        "answer",
        ("chat", "answer"),
        "make lint",
    )
    bot = layers.at("console", "", "").engine_settings(EngineSettings())
    assert (bot.workflow, bot.workflows, bot.check_command) == (
        "default",
        ("default", "chat", "validate-fix"),
        "make check",
    )


async def test_a_workflow_of_the_folder_is_what_a_conversation_asking_for_it_runs(
    settings: Settings, tmp_path: Path
) -> None:
    s = layered(settings, workflows_folder=folder(tmp_path), workflows=["chat", "answer"])
    model = ScriptedModel([ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Hello."})])])
    app = await build(s, model=model)
    try:
        chat = Chat(app)
        await app.start()
        await chat.mention("workflow=answer hi there")
        snap = await chat.snapshot()
    finally:
        await app.close()
    (chosen,) = [r.entry for r in snap.journal if isinstance(r.entry, WorkflowChosen)]
    assert chosen.name == "answer"
    assert list(Workflow.model_validate_json(chosen.definition).states) == [
        "answering",
        "answered",
    ]


def test_a_schedule_naming_a_workflow_there_is_not_is_a_settings_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    schedule = {
        "name": "nightly-check",
        "cron": "0 2 * * *",
        "channel": "console",
        "workflow": "nightly",
        "request": "Check it.",
        "owner": "alice",
    }
    settings = Settings.model_validate({"schedules": [schedule]})
    library = settings.workflow_library(bot_tools())
    with pytest.raises(UnknownWorkflows) as raised:
        settings.layers(known_tools=bot_tools(), known_workflows=library.names)
    assert list(raised.value.lines) == [
        "threadbot.toml: schedules.nightly-check.workflow: no workflow called 'nightly'; "
        "known: default, chat, validate-fix"
    ]


@pytest.mark.parametrize(
    ("toml", "env", "said"),
    [
        (
            "",
            {"THREADBOT_CHECK_COMMAND": "make test `date`"},
            "  THREADBOT_CHECK_COMMAND ('make test `date`'): no backticks: the plan shows the "
            "command in a code span, which a backtick would end (write $(...) instead)\n",
        ),
        (
            '[slack.T0123.channels.C0456]\ncheck_command = """make lint\nmake test"""\n',
            {},
            "  threadbot.toml: slack.T0123.channels.C0456.check_command: one line: the plan "
            "shows the command in a code span (join commands with && or ;)\n",
        ),
    ],
    ids=["backticks", "two lines"],
)
def test_a_check_command_the_plan_could_not_show_whole_is_a_settings_error(
    tmp_path: Path, toml: str, env: dict[str, str], said: str
) -> None:
    done = explain_channel(tmp_path, toml=toml, **env)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "threadbot: bad settings:\n" + said
